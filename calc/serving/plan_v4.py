"""vLLM's start-up report for DeepSeek-V4, given the available KV-cache memory.

The cache is calc.serving.v4_cache's (vLLM 0.20.0 - 0.29.x: one full-attention group of
compressed latents and indexer keys, sliding groups of window and compressor-state pages, the
layer-tuple packing). The weights per GPU ("Model loading took") are calc.serving.v4_weights'
where it models the GPU and release (else None: check_v4_vllm says why). The rest of the
non-KV memory is not: the profile run's activation peak (hyper-connections' 4 streams, the
compressors and the indexer, Marlin's fp4 MoE workspace), which calc.serving.overheads
estimates for other models' forward passes only, and no V4 log gives it. So a plan needs the
available memory from a log (`available_kv_gib`) or the run's --kv-cache-memory-bytes
(calc.serving.vllm_kv_memory), and SGLang is refused by name.
"""

from __future__ import annotations

from calc.serving import figures as f
from calc.serving.engine import engine_config
from calc.serving.figures import GIB
from calc.serving.v4_cache import KERNEL_BLOCK, V4Attention, v4_layout
from calc.serving.v4_weights import check_v4_vllm, vllm_v4_weight_bytes
from calc.serving.vllm_extensible import init_free_bytes
from calc.serving.vllm_kv_memory import check_one_memory, oom_refusal, reserved_line, sets_memory
from calc.serving.vllm_lines import gib_text, load_line
from calc.spec import ModelSpec

V2_V4_FROM = (0, 28, 0)  # DeepseekV4ForCausalLM on Model Runner V2's list (calc.serving.vllm_v2)


def v4_attention(spec: ModelSpec) -> V4Attention:
    """The config fields vLLM sizes V4's caches by: per decoder layer its compression (0 for a
    window-only layer, else compress_rate_csa / compress_rate_hca)."""
    rate = {
        "sliding_attention": 0,
        "compressed_sparse_attention": spec.compress_rate_csa,
        "heavily_compressed_attention": spec.compress_rate_hca,
    }
    return V4Attention(
        compress_ratios=tuple(rate[t] for t in spec.attention_types),
        head_dim=spec.head_dim,
        qk_rope_head_dim=spec.qk_rope_head_dim,
        index_head_dim=spec.index_head_dim,
        sliding_window=spec.sliding_window,
    )


def v4_engine_plan(spec: ModelSpec, hw, engine, given_gib, settings: dict, unset: dict):
    """The config and the memory figures of a DeepSeek-V4 plan (calc.serving.plan.engine_plan's
    V4 path adds what was planned);
    `unset`: engine_plan's arguments this path has no use for, refused by name when given."""
    for name, value in unset.items():
        if value is not None:
            raise ValueError(f"'{name}' is not modelled for DeepSeek-V4's plan: got {value!r}")
    if engine != "vllm":
        raise ValueError(
            f"'engine' {engine!r}: DeepSeek-V4's KV cache is modelled for vLLM only "
            "(calc.serving.v4_cache)"
        )
    chosen = settings.get("block_size") is None
    if chosen:  # platforms/interface.py update_block_size_for_backend (0.22.0: 489-500): the
        # backend's preferred size when --block-size is not given, V4's FlashMLA kernel block
        settings = {**settings, "block_size": KERNEL_BLOCK}
    config = engine_config(
        "vllm",
        gpu_memory_gib=hw.total_memory_bytes / GIB,
        gpu_name=hw.name,
        gpu_vendor=hw.vendor,
        model_max_len=spec.max_position_embeddings,
        model_name=spec.name,
        **settings,
    )
    if config.decode_context_parallel_size > 1:  # vllm_dcp: V4's groups are not modelled with it
        raise ValueError(
            "'decode_context_parallel_size' > 1 is not modelled for DeepSeek-V4's cache groups: "
            f"got {config.decode_context_parallel_size}"
        )
    weights, note = _weights(spec, config, hw.name)
    check_one_memory(given_gib, config)
    kv_set = sets_memory(config)  # --kv-cache-memory-bytes: the memory itself (vllm_kv_memory)
    if given_gib is None and not kv_set:
        w = f"{weights / GIB:.2f} GiB a GPU" if weights is not None else note
        raise ValueError(
            "'available_kv_gib' (or 'kv_cache_memory_bytes') must be given for DeepSeek-V4: its "
            "weights per GPU are modelled "
            f"({w}) but not its profile run's activation peak, so the available memory cannot "
            "be derived"
        )
    hybrid = not config.disable_hybrid_kv_cache_manager
    lay = v4_layout(
        v4_attention(spec),
        config.version_tuple,
        config.kv_cache_dtype,  # "auto" is refused there: vLLM asserts an fp8 cache for V4
        config.block_size,
        config.pipeline_parallel_size,
        hybrid=hybrid,
    )
    L, mbt = config.max_model_len, config.max_num_batched_tokens
    a = config.kv_cache_memory_bytes if kv_set else f.given_bytes(given_gib)
    n = lay.num_blocks(a)
    tokens = lay.gpu_kv_cache_tokens(n, L, mbt)
    conc = lay.max_concurrency(n, L, mbt)
    refusal = lay.refusal(a, L, mbt)
    lines = [f"Setting kv cache block size to {KERNEL_BLOCK} for V4_FLASHMLA_SPARSE backend."]
    lines = lines if chosen else []
    if weights is not None:  # V2 runs V4 from 0.28.0 (calc.serving.vllm_v2)
        lines.append(load_line(config, weights, config.version_tuple >= V2_V4_FROM))
    v = config.version_tuple
    memory, extra, oom = f"Available KV cache memory: {gib_text(a, v)} GiB", {}, None
    if kv_set:
        free = init_free_bytes(hw.total_memory_bytes, config.gpus_per_replica, hw)
        memory = reserved_line(config.version_tuple, free, a)
        extra = {"initial_free_bytes": free}
        if refusal is None and weights is not None:
            refusal = oom = oom_refusal(a, weights, free)
    lines += [
        memory,
        f"GPU KV cache size: {tokens:,} tokens",
        f"Maximum concurrency for {L:,} tokens per request: {conc:.2f}x",
    ]
    if refusal:
        lines.append(f"{'torch.OutOfMemoryError' if oom else 'ValueError'}: {refusal}")
    fields = dict(
        max_num_batched_tokens=mbt,
        weights_bytes=weights,
        weights_gib=round(weights / GIB, 2) if weights is not None else None,
        activation_bytes=None,
        non_torch_bytes=None,
        cudagraph_bytes=None,
        available_kv_cache_bytes=a,
        available_kv_cache_gib=round(a / GIB, 2),
        kv_groups=len(lay.groups),
        page_bytes=lay.block_bytes(),
        num_gpu_blocks=n,
        gpu_kv_cache_tokens=tokens,
        max_concurrency=conc,
        refusal=refusal,
        log_lines=lines,
        **extra,
    )
    return config, fields


def _weights(spec: ModelSpec, config, gpu: str) -> tuple[int | None, str]:
    """(vLLM's weights per GPU or None, why not): calc.serving.v4_weights for this run."""
    tp, ep = config.tensor_parallel_size, config.expert_parallel_size
    try:
        check_v4_vllm(spec, config.version_tuple, gpu, config.pipeline_parallel_size)
    except ValueError as e:
        return None, f"not modelled here: {e}"
    return vllm_v4_weight_bytes(spec, tp, ep, config.max_num_batched_tokens,
                                config.version_tuple, gpu), ""  # fmt: skip
