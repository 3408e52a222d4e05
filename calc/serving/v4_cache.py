"""vLLM's KV cache for DeepSeek-V4 (model_type deepseek_v4, DeepseekV4ForCausalLM).

Read in the PyPI sdists 0.20.0 (the first with DeepseekV4ForCausalLM in
model_executor/models/registry.py; 0.19.0 has none), 0.21.0, 0.22.0, 0.22.1 and 0.23.0; lines
cited are 0.22.0's. Per decoder layer i (compress_ratio = max(1, compress_ratios[i]),
models/deepseek_v4/nvidia/model.py:702; the MTP layer, i >= num_hidden_layers, gets 1):
- every layer: a sliding-window cache, DeepseekV4SWACache (v1/attention/backends/mla/
  sparse_swa.py:75-88): SlidingWindowMLASpec, block 64 whatever --block-size, window
  sliding_window, 584 B a token (kv_cache_interface.py:518: 448 fp8 NoPE + 128 B bf16 RoPE + 8 B
  UE8M0 scales), the page padded up to a multiple of 576 (alignment, :301-308).
- ratio 4 (C4A, with the lightning indexer, nvidia/model.py:781): the compressed latent,
  MLAAttentionSpec(block_size, compress_ratio 4) of block_size / 4 x 584 B (attention.py:704-718,
  kv_cache_interface.py:350-359); the indexer keys, MLAAttentionSpec of block_size / 4 x
  (index_head_dim + index_head_dim / 128 x 4) B (attention.py:837, :751-762; fp8 + fp32 scale,
  also with the MXFP4 indexer cache, which "allocate[s] the same amount of memory"); and two
  compressor states (models/deepseek_v4/compressor.py:120-170, :236-241): SlidingWindowMLASpec
  of block 4, window 2 x 4, 2 x 2 x head fp32 values a token (head 512, then index_head_dim).
- ratio 128 (C128A): the latent, block_size / 128 x 584 B, and one state: block 8, window 128,
  2 x 512 fp32 values a token.
Only the fp8_ds_mla format exists: attention.py:671 asserts the cache dtype starts with "fp8"
and turns it into "fp8_ds_mla" (0.23.0 adds a FlashInfer path for bf16 / per-tensor fp8 rows,
only with --attention-backend FLASHINFER_MLA_SPARSE_DSV4: not modelled). The FlashMLA V4
backend's kernel block is 256 (nvidia/flashmla.py:81-82), the SWA backend prefers 256.
No TP/EP term: num_kv_heads is 1 and every rank holds every layer's caches whole.

Grouping: calc.serving.v4_groups (release by release). One request of L tokens needs
(_max_memory_usage_bytes_from_groups, 0.22.0 :1741-1801) sum over groups of n' x pages x T, n'
the largest most-common count after splitting, T the sum of the distinct full pages, pages
cdiv(L, block) (full) or cdiv(min(window - 1 + in-flight tokens, L), block) + 1 (sliding,
kv_cache_interface.py:463-495). Blocks (:1179-1233): available // (T x n'); from 0.23.0
available // sum over page sizes of page x its most slots in any group
(_bucket_layers_by_page_size). The refusal and its binary search: :691-729, :1804-1836.

Later releases (sdists 0.24.0 - 0.33.0 read; file:line of the release named):
- 0.24.0: the allocator is renamed _get_kv_cache_config_packed (kv_cache_utils.py:1282), same
  divisor; SM 12.x GPUs default to DeepseekV4FlashInferSM120Attention (nvidia/model.py:746-768),
  which keeps the fp8_ds_mla layout (nvidia/flashinfer_sparse.py:513, use_fp8_ds_mla_layout
  True through 0.33.0) and kernel block [256] (:65-66): the same pages. Only the SM100
  FlashInfer class picked by --attention-backend FLASHINFER_MLA_SPARSE_DSV4 stores plain rows
  (use_fp8_ds_mla_layout False): not modelled (kvcalc has no attention-backend setting).
- 0.25.0: non-fp8_ds_mla pages align to 512 B (compressor.py:165, attention.py:621, :659); the
  fp8_ds_mla pages keep 576: no change here.
- 0.26.0: the sliding admission counts vllm_config.max_in_flight_tokens (kv_cache_interface.py
  :567-596) = max_concurrent_batches x max_num_batched_tokens (config/vllm.py:512-533): 2 with
  async scheduling (the default unless a non-EAGLE/MTP drafter or an executor without it
  disables it, :1059-1107) and PP 1, else PP (1).
- 0.27.0: sliding pages are no longer padded (v4_groups); the pool's block is the largest
  group's sum of pages (_get_packed_kv_cache_layout :1283-1306, num_blocks :1342); the
  concurrency is num_blocks / sum over groups of their pages per request
  (get_max_concurrency_for_kv_cache_config :937-960). 0.27.1 and 0.28.0 change nothing here
  (0.28.0's page formula heads x block / compress x content, kv_cache_interface.py:251, gives
  the same pages; extra_retained_tokens, :560-568, is 0 without multi-module MTP).
- 0.29.0: _get_packed_kv_cache_groups (v4_groups); one request needs the block bytes x the sum
  over groups of their pages (_max_memory_usage_bytes_from_groups :2041-2071); the one-request
  check plans against the memory less the null block (get_kv_cache_configs :2316-2336), the
  blocks are still available // block (get_kv_cache_config_from_groups :1437-1440).
- 0.30.0 - 0.33.0 change nothing V4 on FlashMLA reaches: 0.30.0's HiSparse / host groups /
  GLM-5 branches need a hisparse_config or Mamba layers (kv_cache_utils.py get_kv_cache_groups,
  _get_kv_cache_bytes_per_block); V4's SWA keeps 584 B / 576 (sparse_swa.py:81-83, the new
  arguments are V4.1's); 0.31.0's spec fields (dcp_sharded, max_tp_shards, bounded_replay) do
  not size pages; 0.32.0 rounds the block up to each layer's block_stride_alignment
  (_get_kv_cache_bytes_per_block), which customize_attention_spec (v1/worker/utils.py:476-487)
  sets to 1 here: the FlashMLA V4 and indexer backends take [256] = the block, the SWA and
  compressor backends MultipleOf(32) / MultipleOf(1); 0.33.0 moves the planner to
  v1/core/kv_cache_planning.py (same functions, :574-606, :914-1042, :1253-1286, :1536-1579)
  behind DefaultKVCacheConfigBuilder, which no V4 model overrides.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from calc.serving.memory import TOKENS_FROM_CONCURRENCY, cdiv, vllm_tokens_from_concurrency
from calc.serving.v4_groups import (
    PACKED_GROUPS_FROM,
    UNPADDED_SLIDING_FROM,
    V4Group,
    packed_groups,
    tuple_groups,
)
from calc.serving.vllm_refusal import vllm_v1_refusal

V4_FROM = (0, 20, 0)  # registry.py: DeepseekV4ForCausalLM (absent in 0.19.0)
V4_READ_UNTIL = (0, 34, 0)  # releases read: 0.20.0 - 0.33.0; later ones are refused
NULL_BLOCK_FROM = (0, 29, 0)  # the refusal plans against the memory less one block
BUCKET_BLOCKS_FROM = (0, 23, 0)  # _get_kv_cache_config_deepseek_v4: per-page-size buckets
IN_FLIGHT_FROM = (0, 26, 0)  # sliding admission: max_in_flight_tokens
FP8_DS_MLA_ROW = 584  # kv_cache_interface.py:359 (head_dim 512, rope 64)
ALIGN = 576  # FlashMLA alignment of every V4 page
SWA_BLOCK = 64  # sparse_swa.py:75
STATE_BLOCK = {4: 4, 128: 8}  # compressor.py:150-153
KERNEL_BLOCK = 256  # nvidia/flashmla.py:82 (FlashMLA V4) and the SWA backend's preference
INDEX_QUANT_BLOCK = 128  # attention.py:820
KV_DTYPES = ("fp8", "fp8_e4m3", "fp8_e5m2", "fp8_ds_mla")  # all become fp8_ds_mla


@dataclass(frozen=True)
class V4Attention:
    """The config fields that size vLLM's DeepSeek-V4 caches (config.json names)."""

    compress_ratios: tuple[int, ...]  # one per decoder layer (num_hidden_layers entries)
    head_dim: int = 512
    qk_rope_head_dim: int = 64
    index_head_dim: int = 128
    sliding_window: int = 128
    mtp_layers: int = 0  # MTP speculative layers built (each one more SWA cache)


@dataclass(frozen=True)
class V4Layout:
    groups: tuple[V4Group, ...]  # groups[0] is the full-MLA group
    version: tuple[int, int, int]
    in_flight_batches: int = 1  # max_concurrent_batches (0.26.0+); 1 before

    def _tokens(self, max_num_batched_tokens: int) -> int:
        """The in-flight tokens of a sliding group's admission."""
        return self.in_flight_batches * max_num_batched_tokens

    @property
    def tuple_bytes(self) -> int:
        return sum(set(self.groups[0].pages))

    @property
    def num_tuples(self) -> int:
        return max(g.tuples() for g in self.groups)

    def block_bytes(self) -> int:
        """One block of the shared pool (the num_blocks divisor)."""
        if self.version < BUCKET_BLOCKS_FROM:
            return self.tuple_bytes * self.num_tuples
        if self.version >= UNPADDED_SLIDING_FROM:  # the largest group's pages, side by side
            return max(sum(g.pages) for g in self.groups)
        sizes = {p for g in self.groups for p in g.pages}
        return sum(p * max(Counter(g.pages)[p] for g in self.groups) for p in sizes)

    def request_bytes(self, max_model_len: int, max_num_batched_tokens: int) -> int:
        """_max_memory_usage_bytes_from_groups: one request of max_model_len tokens."""
        t = self._tokens(max_num_batched_tokens)
        pages = sum(g.blocks_per_request(max_model_len, t) for g in self.groups)
        if self.version >= PACKED_GROUPS_FROM:
            return self.block_bytes() * pages
        return self.num_tuples * pages * self.tuple_bytes

    def num_blocks(self, available_bytes: int) -> int:
        return max(available_bytes // self.block_bytes(), 0)

    def longest_fitting_len(self, available_bytes, max_model_len, max_num_batched_tokens) -> int:
        """_estimate_max_model_len_from_groups: vLLM's binary search over 1 .. max_model_len."""

        def fits(n):
            return self.request_bytes(n, max_num_batched_tokens) <= available_bytes

        if not fits(1):
            return 0
        left, right, result = 1, max_model_len, 1
        while left <= right:
            mid = (left + right) // 2
            if fits(mid):
                result, left = mid, mid + 1
            else:
                right = mid - 1
        return result

    def refusal(self, available_bytes, max_model_len, max_num_batched_tokens) -> str | None:
        """_check_enough_kv_cache_memory; from 0.29.0 on the memory less the null block the
        BlockPool holds back (get_kv_cache_configs, 0.29.0 kv_cache_utils.py:2316-2336)."""
        if self.version >= NULL_BLOCK_FROM and available_bytes > 0:
            available_bytes -= self.block_bytes()
        needed = self.request_bytes(max_model_len, max_num_batched_tokens)
        longest = 0
        if 0 < available_bytes < needed:
            longest = self.longest_fitting_len(
                available_bytes, max_model_len, max_num_batched_tokens
            )
        return vllm_v1_refusal(max_model_len, needed, available_bytes, longest, self.version)

    def max_concurrency(self, num_blocks, max_model_len, max_num_batched_tokens) -> float:
        """get_max_concurrency_for_kv_cache_config as written for UniformTypeKVCacheSpecs groups:
        a group's page is the sum of its layers' pages, its need the most blocks of a layer;
        from 0.27.0 num_blocks / the sum over groups of their blocks per request."""
        t = self._tokens(max_num_batched_tokens)
        if self.version >= UNPADDED_SLIDING_FROM:
            return num_blocks / sum(g.blocks_per_request(max_model_len, t) for g in self.groups)
        per_group = max(len(g.pages) for g in self.groups)
        usage = sum(g.blocks_per_request(max_model_len, t) * sum(g.pages) for g in self.groups)
        per_block = sum(self.groups[0].pages) * per_group
        return num_blocks / cdiv(per_group * usage, per_block)

    def gpu_kv_cache_tokens(self, num_blocks, max_model_len, max_num_batched_tokens) -> int:
        """The "GPU KV cache size: N tokens" line (_report_kv_cache_config)."""
        if self.version >= TOKENS_FROM_CONCURRENCY:
            c = self.max_concurrency(num_blocks, max_model_len, max_num_batched_tokens)
            return vllm_tokens_from_concurrency(c, max_model_len)
        return num_blocks // len(self.groups) * min(g.block_size for g in self.groups)


def _page(tokens: int, row_bytes: int) -> int:
    """_apply_alignment_padding: the page rounded up to a multiple of 576."""
    return cdiv(tokens * row_bytes, ALIGN) * ALIGN


def _check(m: V4Attention, version, kv_cache_dtype, block_size, pp, dcp, hybrid) -> None:
    v = ".".join(map(str, version[:3]))
    if version < V4_FROM:
        raise ValueError(
            "'version': Model architectures ['DeepseekV4ForCausalLM'] are not supported for "
            f"now (vLLM before 0.20.0); got {v}"
        )
    if version >= V4_READ_UNTIL:
        raise ValueError(
            f"'version' must be below 0.34.0 for vLLM's DeepSeek-V4 caches (releases read: "
            f"0.20.0 - 0.33.0): got {v}"
        )
    if kv_cache_dtype not in KV_DTYPES:
        raise ValueError(
            f"'kv_cache_dtype' must be one of {', '.join(KV_DTYPES)} for DeepSeek-V4 under vLLM "
            f'("DeepseekV4 only supports fp8 kv-cache format for now"): got {kv_cache_dtype!r}'
        )
    if block_size != KERNEL_BLOCK:
        raise ValueError(
            f"'block_size' must be {KERNEL_BLOCK} for vLLM's DeepSeek-V4 caches (the FlashMLA V4 "
            f"kernel block; other sizes are not modelled): got {block_size}"
        )
    for field, want in (("head_dim", 512), ("qk_rope_head_dim", 64), ("index_head_dim", 128)):
        if getattr(m, field) != want:
            raise ValueError(
                f"'{field}' must be {want} for vLLM's DeepSeek-V4 caches (the 584-byte fp8_ds_mla "
                f"row and the compressor kernels assume it): got {getattr(m, field)}"
            )
    bad = sorted({r for r in m.compress_ratios if r not in (0, 1, 4, 128)})
    if bad:
        raise ValueError(f"'compress_ratios' must each be 0, 1, 4 or 128 (vLLM): got {bad}")
    if not any(r > 1 for r in m.compress_ratios):
        raise ValueError("'compress_ratios' must have a compressed (4 or 128) layer for vLLM")
    for field, n in (("pipeline_parallel_size", pp), ("decode_context_parallel_size", dcp)):
        if n != 1:
            raise ValueError(f"'{field}' must be 1 for vLLM's DeepSeek-V4 caches: got {n}")
    if not hybrid:
        raise ValueError(
            "'hybrid' (the hybrid KV-cache manager) must be on for vLLM's DeepSeek-V4 caches: "
            "the disabled path (unify_hybrid_kv_cache_specs) is not modelled"
        )


def v4_layout(
    m: V4Attention,
    version: tuple[int, int, int] = (0, 22, 0),
    kv_cache_dtype: str = "fp8",
    block_size: int = KERNEL_BLOCK,
    pp: int = 1,
    dcp: int = 1,
    hybrid: bool = True,
    async_scheduling: bool = True,
) -> V4Layout:
    """vLLM's KV-cache groups of a DeepSeek-V4 model on one rank (any TP / EP size);
    `async_scheduling`: vLLM's default (from 0.26.0 it doubles the sliding groups' in-flight
    tokens)."""
    version = tuple(version[:3])
    _check(m, version, kv_cache_dtype, block_size, pp, dcp, hybrid)
    ratios = [max(1, r) for r in m.compress_ratios] + [1] * m.mtp_layers
    idx_row = m.index_head_dim + m.index_head_dim // INDEX_QUANT_BLOCK * 4
    full: list[int] = []
    sliding: dict[tuple[int, int], list[int]] = {}
    for r in ratios:
        sliding.setdefault((SWA_BLOCK, m.sliding_window), []).append(
            _page(SWA_BLOCK, FP8_DS_MLA_ROW)
        )
        if r == 1:
            continue
        full.append(_page(block_size // r, FP8_DS_MLA_ROW))
        coff = 1 + (r == 4)
        key = (STATE_BLOCK[r], coff * r)
        sliding.setdefault(key, []).append(_page(STATE_BLOCK[r], 2 * coff * m.head_dim * 4))
        if r == 4:
            full.append(_page(block_size // r, idx_row))
            sliding[key].append(_page(STATE_BLOCK[r], 2 * coff * m.index_head_dim * 4))
    if version >= PACKED_GROUPS_FROM:
        groups = packed_groups(full, sliding, block_size)
    else:
        groups = tuple_groups(full, sliding, block_size, version)
    batches = 1 + (async_scheduling and version >= IN_FLIGHT_FROM)  # PP is 1 here
    return V4Layout(tuple(groups), version, batches)
