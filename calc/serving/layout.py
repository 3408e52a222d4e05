"""The KV-cache layout one engine builds for one model: layer groups, page and cell sizes.

Per layer kind, one token's cache is calc.layers' `kv_elems_per_token(spec, "engine")` (K and V
of G heads; MLA one latent of kv_lora_rank + qk_rope_head_dim, on every TP rank alike: vLLM's
MLAAttentionSpec has num_kv_heads 1); a TP rank keeps its share of the KV heads.

vLLM V1 groups the attention layers (kv_cache_utils.get_kv_cache_groups): one group when every
layer has the same spec; with several kinds of one page size (the hybrid allocator, from 0.9.1:
_get_kv_cache_config_uniform_page_size, absent in the 0.9.0 sdist, which unifies every spec to
full attention), groups of `group_size` layers, group_size = the smallest layer count of the
kinds (0.9.1 - 0.11.x), or the largest when it is under 1.25 x (0.12.0 - 0.17.x) / 1.5 x
(0.18.0 on, read up to 0.33.0) the smallest, each kind padded to whole groups. Every group
shares one block pool, so a block costs page x group_size bytes and "GPU KV
cache size" divides the blocks among the groups (x the smallest block size of the groups).
Per request (each spec's max_memory_usage_bytes, kv_cache_interface.py): a full-attention layer
needs ceil(L / block) blocks; a sliding one ceil(min(window - 1 + max_num_batched_tokens, L) /
block) + 1 (SlidingWindowSpec); a chunked one ceil(min(chunk + max_num_batched_tokens, L) /
block) (ChunkedLocalAttentionSpec); a linear-attention one its state: one page before 0.26.0,
then the prefix-cache mode's pages (MambaSpec; calc.serving.vllm_mamba.StatePages).
Linear layers (vllm/model_executor/models/config.py HybridAttentionMambaModelConfig; the state:
calc.serving.vllm_mamba, its dtypes vllm_state_dtype): the attention block is raised to 16 x
ceil(state / (16 x attention bytes per token)) when larger than block_size, and the state page
padded to the attention page (mamba_page_size_padded; 0.33.0 does the same arithmetic in
Platform._align_hybrid_block_size, platforms/interface.py). Mamba-2 layers (Nemotron-H, Granite
4.0-H) are planned the same way with their own state; "none" blocks hold no cache.
Chunked layers: a spec of their own (ChunkedLocalAttentionSpec) from 0.10.0, full attention
before; from 0.10.1 vLLM disables the hybrid allocator for them unless VLLM_ALLOW_CHUNKED_LOCAL_
ATTN_WITH_HYBRID_KV_CACHE=1 (VllmConfig.__post_init__; absent in 0.10.0's envs.py, False from
0.10.1), and then sizes every layer as full attention.
With the hybrid manager disabled, or before it (V0), every layer is sized as full attention.
DeepSeek-V3.2's indexed layers in vLLM: one group of latent and indexer keys (calc.serving.indexed).
SGLang keeps one token pool over all layers (MLA: MLATokenToKVPool, the latent only; DeepSeek-V3.2's
indexed layers: NSATokenToKVPool, see `nsa_token_bytes`); gpt-oss (GptOssForCausalLM,
model_config.is_hybrid_swa_model) gets the sliding-window pool: see memory.py.
Qwen3-Next's linear layers (a mamba state pool beside the full layers' token pool) and Llama 4's
chunked layers (full attention, or the sliding-window pool from 0.5.8): calc.serving.sglang_hybrid.
"""

from __future__ import annotations

import functools

from calc.dtypes import dtype_bits
from calc.layers import KINDS
from calc.layout import STATE_TYPES as STATE_KINDS  # a MambaSpec page a sequence
from calc.serving.indexed import (
    VLLM_SPARSE_BLOCK,
    VLLM_V32_UNTIL,
    check_vllm_v32_version,
    nsa_token_bytes,
    vllm_sparse_token_bytes,
)
from calc.serving.layout_record import Group, KVLayout
from calc.serving.memory import cdiv
from calc.serving.sglang_fp4 import FP4_E2M1
from calc.serving.sglang_hybrid import sglang_hybrid_fields
from calc.serving.shard_layers import check_engine_parallel
from calc.serving.sharding import rank_layers
from calc.serving.vllm_mamba import StateArgs, vllm_state_bytes, vllm_state_pages
from calc.serving.vllm_nvfp4 import NVFP4
from calc.serving.vllm_nvfp4 import full_dim as nvfp4_full_dim
from calc.serving.vllm_spec import Speculation, conv_columns, state_spec_pages
from calc.sharding import kv_heads_per_gpu
from calc.spec import ModelSpec

# Each vLLM boundary below was read in the PyPI sdists of the releases on either side of it.
HYBRID_ALLOCATOR_FROM = (0, 9, 1)  # KV-cache groups for sliding + full layers in V1
GROUP_SIZE_RATIO = (((0, 18, 0), 1.5), ((0, 12, 0), 1.25))  # largest count when under ratio x min
CHUNKED_SPEC_FROM = (0, 10, 0)  # ChunkedLocalAttentionSpec (before: FullAttentionSpec)
CHUNKED_HYBRID_OPT_IN_FROM = (0, 10, 1)  # VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE
ATTENTION = ("full_attention", "sliding_attention", "chunked_attention")
DRAFT = "draft_attention"  # an MTP drafter's full-attention layers in a group of their own
# sglang PR #11309 "[DeepSeek-V3.2] Include indexer kv cache when estimating kv cache size"
# (a4b424c, first in v0.5.3.post1: the oldest version bump that has it as an ancestor in
# sglang's history, read in the kvcache-ai/sglang_awq fork): profile_max_num_token
# counts the indexer keys in the cell, and "KV size" includes them. Before it the pool still
# allocated them, uncounted (the PR's log: 54.52 GB printed, 65.49 GB with the indexer).
NSA_INDEXER_COUNTED_FROM = (0, 5, 3, 1)


def token_bytes(spec: ModelSpec, tp: int, kv_dtype: str) -> int:
    """One token of one softmax layer on one TP rank."""
    elems = KINDS["full_attention"].kv_elems_per_token(spec, "engine")
    if not spec.is_mla:  # a rank keeps its KV heads (one, replicated, when tp > G)
        elems = elems // spec.n_kv_heads * kv_heads_per_gpu(spec, tp)
    return elems * dtype_bits(kv_dtype) // 8


def _refuse(spec: ModelSpec, why: str):
    raise ValueError(f"'model' {spec.name!r}: {why}, which kvcalc does not model yet")


@functools.lru_cache(maxsize=4096)
def kv_layout(
    spec: ModelSpec,
    tp: int,
    pp: int,
    kv_dtype: str,
    engine: str = "vllm",
    version: tuple[int, int, int] = (0, 11, 0),
    partition: tuple[int, ...] | None = None,
    hybrid: bool = True,
    chunked_hybrid: bool = False,
    state_dtype: str = "bf16",
    dsa: str = "",
    gpu=None,
    state_args: StateArgs = StateArgs(),  # noqa: B008 (an immutable NamedTuple)
    speculation: Speculation = Speculation(),  # noqa: B008 (an immutable NamedTuple)
) -> KVLayout:
    """`hybrid`: vLLM's hybrid KV-cache manager on (not --disable-hybrid-kv-cache-manager);
    SGLang's hybrid SWA memory on (calc.serving.sglang_swa.hybrid_swa_memory);
    `chunked_hybrid`: VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE=1; `state_dtype`: the
    model dtype; `state_args`: vLLM's settings for it; `dsa`: vLLM's
    latent format for indexed layers (calc.serving.indexed.vllm_dsa_settings); `gpu` the preset name ((vendor, name) off NVIDIA)
    (vLLM's linear layers' prefix-cache layout depends on it from 0.33.0); `speculation`: vLLM's
    MTP layers and speculative tokens (calc.serving.vllm_spec; one pipeline rank)."""
    tp, pp = check_engine_parallel(spec, tp, pp)
    split = rank_layers(spec, pp, partition)
    counts = spec.attention_counts
    if speculation.own_group:  # full attention, but a spec of their own (vllm_draft_group)
        counts = {**counts, DRAFT: speculation.draft_layers}
    elif speculation.draft_layers:  # the drafter's layers: the target's attention (vllm_spec)
        full = counts.get("full_attention", 0) + speculation.draft_layers
        counts = {**counts, "full_attention": full}
    if speculation.draft_layers:
        split = (split[0] + speculation.draft_layers,)
    if "sliding_attention" in counts and "chunked_attention" in counts:
        _refuse(spec, "sliding and chunked layers together (vLLM refuses them too)")
    heads = 1 if spec.is_mla else kv_heads_per_gpu(spec, tp)
    size = spec.kv_lora_rank + spec.qk_rope_head_dim if spec.is_mla else spec.head_dim
    logged = 0  # SGLang's fp4_e2m1 logs its values only (calc.serving.sglang_fp4)
    if kv_dtype == NVFP4:  # bytes of fp4 values and fp8 scales a head, stored as uint8
        size, kb = nvfp4_full_dim(spec.head_dim), 1
        tb = 2 * heads * size
    elif kv_dtype == FP4_E2M1:  # the same packing, of a latent (MLA) or of each K / V head
        logged, size, kb = size // 2, nvfp4_full_dim(size), 1
        tb = size if spec.is_mla else 2 * heads * size
    else:
        tb, kb = token_bytes(spec, tp, kv_dtype), dtype_bits(kv_dtype) // 8
    common = dict(
        sliding_window=spec.sliding_window,
        chunk=spec.attention_chunk_size,
        mla=spec.is_mla,
        kv_bytes=kb,
        kv_heads=heads,
        head_size=size,
        logged_head_size=logged,
        speculation=speculation,
    )
    linear = sum(counts.get(k, 0) for k in STATE_KINDS)
    if "indexed_attention" in counts:
        return _indexed_layout(spec, counts, split, kv_dtype, engine, version, common, dsa)
    if engine == "sglang":
        extra, split = sglang_hybrid_fields(spec, tp, pp, version, split, hybrid)
        common.update(extra)
        group = Group("full_attention", max(split))
        return KVLayout((group,), max(split), split, tb, **common)
    if linear:
        if not hybrid:  # unify_hybrid_kv_cache_specs cannot make one spec of them
            raise ValueError(
                "Hybrid KV cache manager is disabled but failed to convert the KV cache specs "
                "to one unified type."
            )
        extra = conv_columns(spec, version, speculation.tokens)
        common["state_bytes"] = vllm_state_bytes(
            spec, tp, version, state_dtype, state_args[:2], extra
        )
        pc, mode = state_args.enable_prefix_caching, state_args.mamba_cache_mode
        pages = vllm_state_pages(spec, version, gpu, pc, mode)
        more = state_spec_pages(pages.mode, version, speculation.tokens)
        common["state_pages"] = pages._replace(speculative=more)
    kinds = {k: n for k, n in counts.items() if k in ATTENTION or k in STATE_KINDS or k == DRAFT}
    if "chunked_attention" in kinds and version < CHUNKED_SPEC_FROM:
        kinds["full_attention"] = kinds.get("full_attention", 0) + kinds.pop("chunked_attention")
    elif "chunked_attention" in kinds and version >= CHUNKED_HYBRID_OPT_IN_FROM:
        hybrid = hybrid and chunked_hybrid
    grouped = version >= HYBRID_ALLOCATOR_FROM and hybrid
    if DRAFT in kinds and not grouped:  # two full-attention specs that cannot be unified
        raise ValueError(
            "Hybrid KV cache manager is disabled but failed to convert the KV cache specs to one "
            "unified type."
        )
    if len(kinds) > 1 and (grouped or linear):
        if pp > 1:
            raise ValueError(
                "'pipeline_parallel_size' > 1 with several layer kinds is not modelled "
                "yet (vLLM assigns each group's layers to ranks round-robin)"
            )
        size = min(kinds.values())
        ratio = next((r for since, r in GROUP_SIZE_RATIO if version >= since), 1)
        if max(kinds.values()) < size * ratio:
            size = max(kinds.values())
        groups = tuple(Group(k, size) for k, n in kinds.items() for _ in range(cdiv(n, size)))
        padding = tuple((-n % size, n) for n in kinds.values() if n % size)
        return KVLayout(groups, size, split, tb, **common, padding=padding)
    only = next(iter(kinds)) if len(kinds) == 1 else "full_attention"
    group = Group(only, max(split))
    return KVLayout((group,), max(split), split, tb, **common)


def _indexed_layout(spec, counts, split, kv_dtype, engine, version, common, dsa) -> KVLayout:
    """DeepSeek-V3.2 (every layer indexed). SGLang: the NSA pool, latent and indexer keys in one
    token pool. vLLM (calc.serving.indexed): one UniformTypeKVCacheSpecs group of the latent and
    indexer-key layers, block size forced to 64 below 0.18 (from 0.18 the plan's config carries
    it); `token_bytes` is one token of both caches of a layer."""
    if len(counts) > 1:
        _refuse(spec, "indexed layers mixed with other attention kinds")
    group = Group("indexed_attention", max(split))
    if engine != "sglang":
        check_vllm_v32_version(version)
        if len(split) > 1:  # the global UniformTypeKVCacheSpecs page up to 0.16, projected after
            _refuse(spec, "vLLM's DeepSeek-V3.2 caches with pipeline parallelism")
        latent, index = vllm_sparse_token_bytes(spec, kv_dtype, dsa)
        kb = dtype_bits(kv_dtype) // 8
        common = {**common, "head_size": latent // kb, "kv_bytes": kb}
        forced = VLLM_SPARSE_BLOCK if version < VLLM_V32_UNTIL else None
        return KVLayout((group,), max(split), split, latent + index, **common, forced_block=forced)
    latent, index = nsa_token_bytes(spec, kv_dtype)
    kb = (
        dtype_bits(kv_dtype) // 8
    )  # the pool's element: uint8 for fp8 (656 a token), else the dtype
    common = {**common, "head_size": latent // kb, "kv_bytes": kb}
    counted = version >= NSA_INDEXER_COUNTED_FROM
    return KVLayout(
        (group,), max(split), split, latent, **common, index_bytes=index, index_counted=counted
    )
