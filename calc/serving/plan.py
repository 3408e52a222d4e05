"""engine_plan: what vLLM or SGLang will report at start-up for one model on one kind of GPU.

>>> p = engine_plan("llama-3.1-8b", "h100-sxm", available_kv_gib=6.51, max_model_len=32768)
>>> p.num_gpu_blocks, p.gpu_kv_cache_tokens   # 6.51 GiB // (16 x 32 x 2 x 8 x 128 x 2 B)
(3333, 53328)

Per GPU, from first principles (vllm/v1/worker/gpu_worker.py determine_available_memory):
available = total x gpu_memory_utilization - weights - activation peak - non-torch memory
(- CUDA-graph memory from 0.21 on). Weights are calc.serving.sharding's; the activation peak is
calc.capacity's formula at max_num_batched_tokens; non-torch memory is calc.capacity's reserve.
`available_kv_gib` replaces the derivation by a logged figure; a calibration (calc.serving.
calibrate) replaces the activation and non-torch estimates by what one real log showed.
SGLang: rest = total x mem_fraction_static - weights; tokens = rest // cell (see memory.py).
"""

from __future__ import annotations

from calc.capacity import activation_dtype
from calc.presets import resolve_model
from calc.results import Result
from calc.serving import memory as m
from calc.serving.engine import SglangConfig, VllmConfig, engine_config
from calc.serving.hardware import HardwareSpec, resolve_hardware
from calc.serving.layout import kv_layout
from calc.serving.overheads import non_torch_bytes, overheads
from calc.serving.quant_weights import plan_weights
from calc.spec import ModelSpec

GIB = 2**30
# Before this release the one-request check (and its "estimated maximum model length") counted
# every layer of the model, not the rank's own (vllm#34076, reported on 0.15.2rc1); the
# per-rank check is what kv_cache_utils.get_kv_cache_configs does again from 0.17.0 (PyPI sdists:
# 0.14.0 - 0.16.0 check the global groups; 0.13.0 and before check each worker's own spec).
PP_CHECK_PER_RANK_FROM = (0, 17, 0)


class EnginePlan(Result):
    """The engine's start-up figures for one deployment; sizes per GPU (the limiting rank)."""

    engine: str
    version: str
    model: str
    gpu: str
    tensor_parallel_size: int
    pipeline_parallel_size: int
    max_model_len: int
    max_num_batched_tokens: int | None  # vLLM: the profile run's batch
    kv_cache_dtype: str
    source: str  # "derived", "given" (available_kv_gib) or "calibrated"
    total_memory_bytes: int
    weights_bytes: int
    weights_gib: float
    activation_bytes: int | None
    non_torch_bytes: int | None
    cudagraph_bytes: int | None
    available_kv_cache_bytes: int
    available_kv_cache_gib: float
    kv_groups: int
    page_bytes: int  # vLLM: one block of one layer; SGLang: one token of every layer (cell)
    num_gpu_blocks: int  # SGLang: max_total_num_tokens / page_size
    gpu_kv_cache_tokens: int  # SGLang: max_total_num_tokens
    max_concurrency: float
    refusal: str | None
    k_size_gib: float | None = None  # SGLang
    log_lines: list[str]

    @property
    def fits(self) -> bool:
        return self.refusal is None


def prepare(
    model: str | ModelSpec,
    gpu: str | HardwareSpec,
    engine: str = "vllm",
    *,
    config: VllmConfig | SglangConfig | None = None,
    calibration: dict | None = None,
    weight_dtype: str = "bf16",
    **settings,
):
    """Everything a plan needs that no memory figure changes: the resolved config, the KV
    layout, the weights of each pipeline rank."""
    spec, hw = resolve_model(model), resolve_hardware(gpu)
    part = settings.pop("pp_layer_partition", None)
    part = tuple(part) if part else None
    if config is None:
        config = engine_config(
            engine,
            gpu_memory_gib=hw.total_memory_bytes / GIB,
            gpu_name=hw.name,
            model_max_len=spec.max_position_embeddings,
            **settings,
        )
    tp, pp = config.tensor_parallel_size, config.pipeline_parallel_size
    ep = tp * config.data_parallel_size if config.enable_expert_parallel else 1
    weights, wd = plan_weights(spec, config, weight_dtype, tp, pp, ep, part, hw.name)
    kd = config.kv_dtype(activation_dtype(wd))
    hybrid = chunked = True
    if config.engine == "vllm":
        hybrid = not config.disable_hybrid_kv_cache_manager
        chunked = config.allow_chunked_local_attn_hybrid
    state_dtype = activation_dtype(wd)  # the model dtype: a linear layer's state
    lay = kv_layout(
        spec, tp, pp, kd, config.engine, config.version_tuple, part, hybrid, chunked, state_dtype
    )
    total = hw.total_memory_bytes
    if calibration and "total_memory_bytes" in calibration:
        total = int(calibration["total_memory_bytes"])
    return spec, hw, config, lay, weights, kd, wd, total


def engine_plan(
    model: str | ModelSpec,
    gpu: str | HardwareSpec,
    engine: str = "vllm",
    *,
    config: VllmConfig | SglangConfig | None = None,
    available_kv_gib: float | None = None,
    calibration: dict | None = None,
    weight_dtype: str = "bf16",
    **settings,
) -> EnginePlan:
    """The start-up report of `engine` (its settings: EngineConfig's fields, or `config`;
    pp_layer_partition: VLLM_PP_LAYER_PARTITION as a tuple)."""
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
        return _sglang(spec, hw, config, lay, weights, kd, total, available_kv_gib, calibration)
    return _vllm(spec, hw, config, lay, weights, kd, wd, total, available_kv_gib, calibration)


def _vllm(spec, hw, config, lay, weights, kd, wd, total, given_gib, calibration) -> EnginePlan:
    B, L = lay.block_size(config.block_size), config.max_model_len
    page = lay.page_bytes(B)
    if given_gib is not None:
        act = nt = cg = None
        avail = [int(given_gib * GIB)] * len(weights)
        source = "given"
    else:
        act, nt, cg = overheads(spec, config, wd, calibration)
        u = config.gpu_memory_utilization
        avail = [m.vllm_available_bytes(total, u, w, act, nt, cg) for w in weights]
        source = "calibrated" if calibration else "derived"
    blocks = [m.vllm_num_blocks(a, page, lay.rank_group_size(r)) for r, a in enumerate(avail)]
    rank = min(range(len(blocks)), key=blocks.__getitem__)
    n, a = blocks[rank], avail[rank]
    groups = len(lay.groups)
    lines = [f"Model loading took {weights[rank] / GIB:.4f} GiB"]
    if config.is_v1:
        tokens = m.vllm_gpu_kv_cache_tokens(n, lay.report_block(B, L), groups)
        per_req = lay.blocks_per_request(L, B, config.max_num_batched_tokens)
        conc = m.vllm_max_concurrency(n, per_req, tokens, L)
        layers = lay.rank_group_size(rank)
        if config.pipeline_parallel_size > 1 and config.version_tuple < PP_CHECK_PER_RANK_FROM:
            layers = sum(lay.rank_layers) if groups == 1 else layers
        needed = per_req * page * layers
        longest = m.vllm_longest_fitting_len(a, page, layers * groups, B)
        refusal = m.vllm_v1_refusal(L, needed, a, longest)
        lines += [
            f"Available KV cache memory: {a / GIB:.2f} GiB",
            f"GPU KV cache size: {tokens:,} tokens",
            f"Maximum concurrency for {L:,} tokens per request: {conc:.2f}x",
        ]
    else:
        tokens = n * B
        conc = tokens / L
        refusal = m.vllm_v0_refusal(L, n, B)
        lines += [
            f"KV cache memory: {a / GIB:.2f} GiB",
            f"# GPU blocks: {n}",
            f"Maximum concurrency for {L} tokens per request: {conc:.2f}x",
        ]
    if refusal:
        lines.append(f"ValueError: {refusal}")
    return EnginePlan(
        engine="vllm",
        version=config.version,
        model=spec.name,
        gpu=hw.name,
        tensor_parallel_size=config.tensor_parallel_size,
        pipeline_parallel_size=config.pipeline_parallel_size,
        max_model_len=L,
        max_num_batched_tokens=config.max_num_batched_tokens,
        kv_cache_dtype=kd,
        source=source,
        total_memory_bytes=total,
        weights_bytes=max(weights),
        weights_gib=round(max(weights) / GIB, 4),
        activation_bytes=act,
        non_torch_bytes=nt,
        cudagraph_bytes=cg,
        available_kv_cache_bytes=a,
        available_kv_cache_gib=round(a / GIB, 2),
        kv_groups=groups,
        page_bytes=page,
        num_gpu_blocks=n,
        gpu_kv_cache_tokens=tokens,
        max_concurrency=conc,
        refusal=refusal,
        log_lines=lines,
    )


def _sglang(spec, hw, config, lay, weights, kd, total, given_gib, calibration) -> EnginePlan:
    cell = lay.cell_bytes()
    P, L = config.page_size, config.max_model_len
    lay.check_page(P)
    cal = calibration or {}
    w = max(weights)
    if given_gib is not None:
        rest, source = int(given_gib * GIB), "given"
        init_used = None
    else:
        init_used = int(cal.get("init_used_bytes", non_torch_bytes(config.tensor_parallel_size, 1)))
        sg_total = total - init_used  # SGLang's "total": free memory after its start-up
        rest = m.sglang_rest_bytes(sg_total - w, sg_total, config.mem_fraction_static)
        source = "calibrated" if calibration else "derived"
    tokens = m.sglang_max_total_tokens(rest, cell, P)
    layers = max(lay.rank_layers)
    lines = [f"Load weight end. mem usage={w / GIB:.2f} GB"]
    if lay.mla:  # MLATokenToKVPool (NSATokenToKVPool: + the indexer keys): "KV size"
        k_size = lay.sglang_pool_bytes(tokens, P, logged=True)
        lines.append(f"KV Cache is allocated. #tokens: {tokens}, KV size: {k_size / GIB:.2f} GB")
    elif lay.sglang_swa:  # SWAKVPool: the full layers' and the sliding layers' pools
        full, swa = m.sglang_swa_tokens(tokens, *lay.sglang_swa, config.swa_full_tokens_ratio)
        lines.append(
            f"Use Sliding window memory pool. full_layer_tokens={full}, swa_layer_tokens={swa}"
        )
        tokens, k_size = full, None
    else:
        k_size = m.sglang_k_size_bytes(tokens, P, lay.kv_heads, lay.head_size, layers, lay.kv_bytes)
        lines.append(
            f"KV Cache is allocated. #tokens: {tokens}, K size: {k_size / GIB:.2f} GB, "
            f"V size: {k_size / GIB:.2f} GB"
        )
    conc = tokens / L
    if config.max_running_requests:
        conc = min(conc, config.max_running_requests)
    refusal = m.sglang_refusal(tokens)
    lines.append(
        f"max_total_num_tokens={tokens}, chunked_prefill_size={config.chunked_prefill_size}, "
        f"context_len={L}"
    )
    if refusal:
        lines.append(f"RuntimeError: {refusal}")
    return EnginePlan(
        engine="sglang",
        version=config.version,
        model=spec.name,
        gpu=hw.name,
        tensor_parallel_size=config.tensor_parallel_size,
        pipeline_parallel_size=config.pipeline_parallel_size,
        max_model_len=L,
        max_num_batched_tokens=None,
        kv_cache_dtype=kd,
        source=source,
        total_memory_bytes=total,
        weights_bytes=w,
        weights_gib=round(w / GIB, 2),
        activation_bytes=None,
        non_torch_bytes=init_used,
        cudagraph_bytes=None,
        available_kv_cache_bytes=rest,
        available_kv_cache_gib=round(rest / GIB, 2),
        kv_groups=1,
        page_bytes=cell,
        num_gpu_blocks=tokens // P,
        gpu_kv_cache_tokens=tokens,
        max_concurrency=conc,
        refusal=refusal,
        k_size_gib=None if k_size is None else round(k_size / GIB, 2),
        log_lines=lines,
    )
