"""vLLM's decode context parallelism (--decode-context-parallel-size, -dcp): the TP group's
GPUs split each request's tokens dcp ways instead of holding a copy each, so one rank stores
cdiv(max_model_len, dcp) tokens of a request.

What changes in the start-up figures (read in the PyPI sdists, 0.10.2 - 0.33.0):
- a full-attention / MLA group needs cdiv(cdiv(L, dcp), block) blocks a request
  (FullAttentionSpec.max_memory_usage_bytes, which MLAAttentionSpec inherits); the one-request
  check and its estimated maximum length follow (a rank's blocks hold dcp x as many tokens);
- "GPU KV cache size" is blocks // groups x block x dcp, after "Multiplying the GPU KV cache
  size by the dcp_world_size N." (kv_cache_utils._report_kv_cache_config, 0.10.2 - 0.11.x;
  "... by the cp_world_size N (pcp_world_size 1 * dcp_world_size N)." 0.12 - 0.20); from 0.21
  the line is int(concurrency x L), which already holds the factor (no multiply line);
- the pages themselves do not change: each rank keeps its TP share of the KV heads (GQA needs
  tp > the KV heads, so a DCP group shares one replicated head).
The engine's own checks, by release:
- the flag exists from 0.10.2 (absent from 0.10.1's ParallelConfig);
- tp_size must be divisible by dcp_size: ParallelConfig from 0.16.0 in these words; before, the
  DCP groups' all_ranks.reshape(-1, dcp) fails (parallel_state.initialize_model_parallel);
- GQA / MQA from 0.12.0 (flash_attn / flashinfer gain can_return_lse_for_decode; 0.10.2 -
  0.11.x run DCP on the MLA backends only), with ModelConfig.verify_with_parallel_config's
  three assertions: tp > total KV heads, dcp <= tp // KV heads, q heads per KV head divisible
  by dcp;
- MLA with an fp8 cache: "DCP not support fp8 kvcache now." (mla common / mla_attention.py,
  0.10.2 - 0.24.x; raised by the first decode, i.e. the CUDA-graph capture at start-up);
- several KV-cache groups: "DCP not support hybrid attn now." (HybridKVCacheCoordinator,
  0.10.2 - 0.25.x), a sliding-window group "DCP not support sliding window."
  (SlidingWindowSpec); from 0.26.0 vLLM shards some of them (AttentionSpec.dcp_sharded in
  0.33.0), which kvcalc does not model: refused by name.
Prefill context parallelism (pcp, 0.12 - 0.20) is not a kvcalc setting (pcp = 1).
"""

from __future__ import annotations

DCP_FROM = (0, 10, 2)
GQA_FROM = (0, 12, 0)
TP_CHECK_FROM = (0, 16, 0)
CP_LINE_FROM = (0, 12, 0)
LINE_UNTIL = (0, 21, 0)  # the multiply line and the multiplied token count
FP8_MLA_UNTIL = (0, 25, 0)
HYBRID_UNTIL = (0, 26, 0)


def check_dcp(spec, version: tuple[int, ...], tp: int, dcp: int, lay, kv_dtype: str) -> None:
    """vLLM's refusals of --decode-context-parallel-size (module docstring), in its words."""
    if dcp == 1:
        return
    if version < DCP_FROM:
        raise ValueError("'decode_context_parallel_size' needs vLLM 0.10.2 or later: got > 1")
    if tp % dcp:
        if version >= TP_CHECK_FROM:
            raise ValueError(f"tp_size={tp} must be divisible bydcp_size={dcp}.")
        raise ValueError(
            f"'decode_context_parallel_size' must divide tensor_parallel_size={tp}: got {dcp}"
        )
    kinds = {g.kind for g in lay.groups}
    if kinds - {"full_attention"} or lay.forced_block:
        if version < HYBRID_UNTIL:
            many = len(lay.groups) > 1
            raise ValueError(
                "DCP not support hybrid attn now." if many else "DCP not support sliding window."
            )
        raise ValueError(
            "'decode_context_parallel_size' > 1 is modelled for full-attention and MLA caches "
            f"only: this model has {', '.join(sorted(kinds))} groups"
        )
    if lay.mla:
        if kv_dtype.startswith("fp8") and version < FP8_MLA_UNTIL:
            raise ValueError("DCP not support fp8 kvcache now.")
        return
    if version < GQA_FROM:
        raise ValueError(
            "'decode_context_parallel_size' > 1 needs MLA before vLLM 0.12.0 (its GQA "
            "backends gain decode context parallelism in 0.12.0)"
        )
    kv, heads = spec.num_key_value_heads, spec.num_attention_heads
    if tp <= kv:
        raise ValueError(
            f"tensor parallel size {tp} must be greater than total num kv heads {kv} when "
            "enable decode context parallel for GQA/MQA"
        )
    if dcp > tp // kv:
        raise ValueError(
            "decode context parallel size must less than or equal to (tensor parallel size "
            f"{tp} // total num kv heads {kv}) = {tp // kv}, but got {dcp}"
        )
    if (heads // kv) % dcp:
        raise ValueError(
            f"Total number of q per kv attn heads ({heads // kv}) must be divisible by dcp world "
            f"size when enable decode context parallel for GQA ({dcp})."
        )


def dcp_line(version: tuple[int, ...], dcp: int) -> str | None:
    """The line before "GPU KV cache size" in 0.10.2 - 0.20.x, when dcp > 1."""
    if dcp == 1 or version >= LINE_UNTIL:
        return None
    if version >= CP_LINE_FROM:
        return (
            f"Multiplying the GPU KV cache size by the cp_world_size {dcp} (pcp_world_size 1 * "
            f"dcp_world_size {dcp})."
        )
    return f"Multiplying the GPU KV cache size by the dcp_world_size {dcp}."
