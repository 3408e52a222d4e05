"""engine_plan: what vLLM or SGLang will report at start-up for one model on one kind of GPU.

>>> p = engine_plan("llama-3.1-8b", "h100-sxm", available_kv_gib=6.51, max_model_len=32768)
>>> p.num_gpu_blocks, p.gpu_kv_cache_tokens   # 6.51 GiB // (64 x 32 x 2 x 8 x 128 x 2 B)
(833, 53312)

Per GPU, from first principles (vllm/v1/worker/gpu_worker.py determine_available_memory):
available = total x gpu_memory_utilization - weights - activation peak - non-torch memory
(- CUDA-graph memory from 0.21 on). Weights are calc.serving.sharding's; the activation peak is
calc.capacity's formula at max_num_batched_tokens; non-torch memory is calc.capacity's reserve.
`available_kv_gib` replaces the derivation by a logged figure; a calibration (calc.serving.
calibrate) replaces the activation and non-torch estimates by what one real log showed.
vLLM 0.34.0's extensible KV cache (on by default on CUDA and ROCm): that sum, at
gpu_memory_utilization 1.0 and without the CUDA-graph estimate, is only the reserved capacity;
the blocks are those of the memory measured after warmup and capture (calc.serving.
vllm_extensible), and a given `available_kv_gib` is that measured budget (the "N KV cache blocks
(X GiB)" of its "Memory after warmup" line). --kv-cache-memory-bytes sets every worker's memory
instead (calc.serving.vllm_kv_memory).
SGLang: rest = total x mem_fraction_static - weights; tokens = rest // cell (see memory.py).
"""

from __future__ import annotations

from dataclasses import replace

from calc.activation import activation_dtype
from calc.presets import resolve_model
from calc.serving.engine import DEFAULT_VERSION, SglangConfig, VllmConfig, engine_config
from calc.serving.figures import GIB, PP_CHECK_PER_RANK_FROM  # noqa: F401 (re-exported)
from calc.serving.fp8_blocks import check_fp8_moe_blocks
from calc.serving.hardware import HardwareSpec, nvidia_capability, resolve_hardware
from calc.serving.indexed import vllm_dsa_settings, vllm_v32_load_bytes
from calc.serving.kv_auto import resolved_kv_cache_dtype
from calc.serving.layout import kv_layout
from calc.serving.plan_result import EnginePlan, identity
from calc.serving.plan_sglang import sglang_plan
from calc.serving.plan_v4 import v4_engine_plan
from calc.serving.plan_vllm import vllm_plan
from calc.serving.quant_weights import plan_weights
from calc.serving.sglang_archs import check_architecture
from calc.serving.sglang_budget import check_transport
from calc.serving.sglang_fp4 import FP4_E2M1, check_sglang_fp4_e2m1
from calc.serving.sglang_kv_lines import sglang_model_dtype
from calc.serving.sglang_multimodal import sglang_multimodal, sglang_weight_spec
from calc.serving.sglang_nvfp4 import check_sglang_nvfp4, decode_on_trtllm, shared_token_bytes
from calc.serving.sglang_page import kind_of as sglang_kind
from calc.serving.sglang_page import sglang_page
from calc.serving.sglang_parallel import sglang_parallel
from calc.serving.sglang_spec import check_model as check_speculative_model
from calc.serving.sglang_spec import sglang_arch
from calc.serving.sglang_spec_pool import resolve_draft_layers
from calc.serving.sglang_swa import hybrid_swa_memory
from calc.serving.shard_layers import attention_tp
from calc.serving.vllm_block import KERNEL_FROM_BLOCK_FROM, vllm_default_block
from calc.serving.vllm_dcp import check_dcp
from calc.serving.vllm_draft_group import drafter_own_group
from calc.serving.vllm_kv_memory import sets_memory
from calc.serving.vllm_lines import ONE_LINE_FROM, vllm_report  # noqa: F401 (re-exported)
from calc.serving.vllm_mamba import StateArgs, is_nemotron_h
from calc.serving.vllm_mla_block import vllm_mla_block
from calc.serving.vllm_nvfp4 import NVFP4, check_vllm_nvfp4
from calc.serving.vllm_offload import check_sglang_offload
from calc.serving.vllm_spec import (
    Speculation,
    speculation,
)
from calc.serving.vllm_weights import vllm_load_extras, vllm_stage_weights
from calc.serving.vllm_xpu import (
    check_xpu,
    check_xpu_layout,
    xpu_block_multiple,
    xpu_kernel_block,
)
from calc.spec import ModelSpec


def prepare(
    model: str | ModelSpec,
    gpu: str | HardwareSpec,
    engine: str = "vllm",
    *,
    config: VllmConfig | SglangConfig | None = None,
    calibration: dict | None = None,
    weight_dtype: str | None = None,
    **settings,
):
    """Everything a plan needs that no memory figure changes: the resolved config, the KV
    layout, the weights of each pipeline rank."""
    spec, hw = resolve_model(model), resolve_hardware(gpu)
    if spec.is_v4:  # engine_plan's own path (plan_v4): its activation peak is not modelled
        raise ValueError(
            f"'model' {spec.name!r} is DeepSeek-V4: its activation peak is not modelled (weights: "
            "calc.serving.v4_weights); engine_plan plans its vLLM KV cache from a given memory"
        )
    explicit = config
    arch = sglang_arch(  # SGLang's speculative defaults (calc.serving.sglang_spec)
        spec.family,
        mla=spec.is_mla,
        nsa="indexed_attention" in spec.attention_counts,
        moe=spec.is_moe,
        multimodal=spec.vision is not None,
    )
    part = settings.pop("pp_layer_partition", None)
    part = tuple(part) if part else None
    if config is None:
        config = engine_config(
            engine,
            # SGLang's rules read nvidia-smi's total; vLLM's, torch's device total (CUDA's)
            gpu_memory_gib=(hw.driver_total_bytes if engine == "sglang" else hw.total_memory_bytes)
            / GIB,
            gpu_name=hw.name,
            gpu_vendor=hw.vendor,
            model_max_len=spec.max_position_embeddings,
            multimodal=_multimodal(spec, engine, settings),
            vision_tower=(spec.vision.num_hidden_layers, spec.vision.hidden_size)
            if spec.vision
            else None,
            nsa="indexed_attention" in spec.attention_counts,
            model_family=spec.family,  # SGLang: GLM-5's DSA settings (calc.serving.indexed_sglang)
            mla=spec.is_mla,  # SGLang >= 0.5.10's prefill CUDA graph (defaults_sglang_2026.py)
            linear_attention="linear_attention" in spec.attention_counts,
            nemotron_h="mamba" in spec.attention_counts and is_nemotron_h(spec),
            model_name=spec.name,
            sglang_arch=arch,
            **settings,
        )
    tp, pp, v = config.tensor_parallel_size, config.pipeline_parallel_size, config.version_tuple
    kv = resolved_kv_cache_dtype(spec, config.engine, v, config.kv_cache_dtype)
    if kv != config.kv_cache_dtype:  # the checkpoint's declared fp8 cache (calc.serving.kv_auto)
        config = config.model_copy(update={"kv_cache_dtype": kv})
    cap = nvidia_capability(hw)
    major = cap[0] if cap else None
    if config.kv_cache_dtype == NVFP4 and config.engine == "vllm":
        check_vllm_nvfp4(spec, config, cap)
    elif config.kv_cache_dtype == NVFP4:  # SGLang's pool (calc.serving.sglang_nvfp4)
        check_sglang_nvfp4(spec, config, major)
    elif config.kv_cache_dtype == FP4_E2M1:  # SGLang only (calc.serving.sglang_fp4)
        check_sglang_fp4_e2m1(spec, config, major)
    if config.engine == "sglang":  # DP attention, SGLang's ep_size (calc.serving.sglang_parallel)
        check_speculative_model(spec, config)
        check_architecture(spec, config.version)  # GLM-4.5, MiniMax-M2, Kimi K2.5, ...
        check_transport(config, hw.vendor)  # --mm-feature-transport
        ep, split = sglang_parallel(spec, config, hw)
    else:  # vLLM: every module over tp; the experts as VllmConfig.expert_parallel_size says
        ep, split = config.expert_parallel_size, None
    moe_tp = tp // ep if config.engine == "sglang" else (1 if ep > 1 else tp)
    check_fp8_moe_blocks(spec, config.engine, config.version_tuple, moe_tp)
    towers = (True,) * pp
    if config.engine == "sglang":  # Llama 4's vision encoder only with --enable-multimodal
        wspec = sglang_weight_spec(spec, config.version, config.enable_multimodal)
        weights, wd = plan_weights(wspec, config, weight_dtype, tp, pp, ep, part, hw.name, split)
        check_sglang_offload(spec, config, wd)  # --cpu-offload-gb (vllm_offload)
    else:  # the tower by stage, flag and release (calc.serving.vllm_weights)
        weights, wd, towers = vllm_stage_weights(spec, config, weight_dtype, ep, part, hw.name)
        check_xpu(spec, hw.vendor, config.attention_backend, activation_dtype(wd))
    kd, dsa = config.kv_dtype(activation_dtype(wd)), ""
    if config.engine == "vllm" and "indexed_attention" in spec.attention_counts:
        kd, dsa, config = vllm_dsa_settings(spec, config, hw.name, activation_dtype(wd))
        extra = vllm_v32_load_bytes(spec, config.max_num_batched_tokens)
        weights = tuple(w + extra for w in weights)
    block_line = None
    # the page SGLang's default backend needs; the block vLLM's dense MLA backends force
    if config.engine == "sglang" and (kind := sglang_kind(spec)) != "dsa":
        given = settings.get("page_size") if explicit is None else config.page_size
        trtllm = config.kv_cache_dtype == NVFP4 and decode_on_trtllm(v, major)
        page, block_line = sglang_page(v, cap, kind, given, trtllm_decode=trtllm)
        if page != config.page_size:
            config = config.model_copy(update={"page_size": page})
    if config.engine == "vllm" and not spec.is_mla and settings.get("block_size") is None:
        backend = config.attention_backend
        block_line = vllm_default_block(v, hw.vendor, backend)[1] if explicit is None else None
    if config.engine == "vllm" and spec.is_mla and not dsa:
        given = settings.get("block_size") if explicit is None else config.block_size
        kv = config.kv_cache_dtype
        block, block_line = vllm_mla_block(v, cap, kv, given, spec.qk_nope_head_dim)
        if block != config.block_size:
            config = config.model_copy(update={"block_size": block})
    hybrid, chunked, flags, sp = True, True, StateArgs(), Speculation()
    if config.engine == "sglang":  # its hybrid SWA memory as server_args leave it (sglang_swa)
        hybrid = hybrid_swa_memory(spec, v, major, config.speculative_algorithm is not None)
    if config.engine == "vllm":
        hybrid = not config.disable_hybrid_kv_cache_manager
        chunked, flags = config.allow_chunked_local_attn_hybrid, config.state_args
        method, k = config.speculative_method, config.num_speculative_tokens
        sp = speculation(spec, v, method, k, pp=pp, dcp=config.decode_context_parallel_size)
        if drafter_own_group(spec, hw.vendor, v, config.attention_backend, sp.draft_layers):
            sp = sp._replace(own_group=True)
        # the MTP drafter's weights, LoRA's slots, the offload checks (vllm_weights)
        weights = vllm_load_extras(spec, config, weights, wd, towers, sp, ep, part)
    kv_tp = attention_tp(tp, split)  # SGLang: the KV heads of the attention group
    # a linear layer's state in the model dtype unless vLLM's flags say otherwise
    args = (config.engine, config.version_tuple, part, hybrid, chunked, activation_dtype(wd))
    gpu = hw.name if hw.vendor == "NVIDIA" else (hw.vendor, hw.name)  # a cheap cache key
    lay = kv_layout(spec, kv_tp, pp, kd, *args, dsa, gpu, flags, sp)
    if block_line:  # the engine's line for the block / page its backend takes
        lay = replace(lay, block_line=block_line)
    if config.engine == "sglang" and config.kv_cache_dtype == NVFP4:  # its dequant workspace
        lay = replace(lay, shared_token_bytes=shared_token_bytes(spec, lay.kv_heads, v, major))
    if config.engine == "vllm" and lay.state_bytes and v >= KERNEL_FROM_BLOCK_FROM:
        lay = replace(lay, kernel_from_block=True)  # the raised block's multiple (vllm_block)
    if config.engine == "vllm" and lay.state_bytes:  # Intel XPU's GDN block (vllm_xpu)
        kernel = xpu_kernel_block(hw.vendor, v, config.attention_backend)
        lay = replace(lay, platform_multiple=xpu_block_multiple(spec, hw.vendor, v))
        lay = replace(lay, kernel_block=kernel)
        check_xpu_layout(lay, config.block_size)
    if config.engine == "vllm":
        check_dcp(spec, config.version_tuple, tp, config.decode_context_parallel_size, lay, kd)
    else:  # the draft's layers, which SGLang's pool counts from 0.5.14
        config = resolve_draft_layers(spec, config, lay, arch)
    total = hw.total_memory_bytes
    if calibration and "total_memory_bytes" in calibration:
        total = int(calibration["total_memory_bytes"])
    return spec, hw, config, lay, weights, kd, wd, total


def _multimodal(spec, engine: str, settings: dict) -> str | None:
    """The vision encoder kind the engine's fraction rules see: SGLang's is_multimodal
    (calc.serving.sglang_multimodal, with its --enable-multimodal), vLLM's any encoder."""
    if engine == "sglang":
        version = settings.get("version") or DEFAULT_VERSION["sglang"]
        return sglang_multimodal(spec, version, settings.get("enable_multimodal"))
    return spec.vision.kind if spec.vision else None


def engine_plan(
    model: str | ModelSpec,
    gpu: str | HardwareSpec,
    engine: str = "vllm",
    *,
    config: VllmConfig | SglangConfig | None = None,
    available_kv_gib: float | None = None,
    calibration: dict | None = None,
    weight_dtype: str | None = None,
    **settings,
) -> EnginePlan:
    """The start-up report of `engine` (its settings: EngineConfig's fields, or `config`;
    pp_layer_partition: VLLM_PP_LAYER_PARTITION as a tuple). `weight_dtype`: the engine's
    --dtype (bf16 / fp16 / fp32), or kvcalc's whole-model int8 / int4 / fp8 on an unquantized
    checkpoint; None: a quantized checkpoint's torch_dtype, else bf16. DeepSeek-V4: vLLM's
    cache from `available_kv_gib` (calc.serving.plan_v4)."""
    spec = resolve_model(model)
    if spec.is_v4:
        unset = dict(config=config, calibration=calibration, weight_dtype=weight_dtype)
        hw = resolve_hardware(gpu)
        config, fields = v4_engine_plan(spec, hw, engine, available_kv_gib, settings, unset)
        source = "kv_cache_memory_bytes" if sets_memory(config) else "given"
        ids = identity(spec, hw, config, "fp8_ds_mla", source, hw.total_memory_bytes)
        return EnginePlan(**ids, **fields)
    spec, hw, config, lay, weights, kd, wd, total = prepare(
        model,
        gpu,
        engine,
        config=config,
        calibration=calibration,
        weight_dtype=weight_dtype,
        **settings,
    )
    if config.engine == "sglang":
        model_dtype = sglang_model_dtype(spec, weight_dtype)  # the pools' printed dtype
        args = (kd, total, available_kv_gib, calibration, model_dtype)
        return sglang_plan(spec, hw, config, lay, weights, *args)
    return vllm_plan(spec, hw, config, lay, weights, kd, wd, total, available_kv_gib, calibration)
