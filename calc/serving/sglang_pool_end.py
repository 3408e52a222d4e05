"""SGLang's "Memory pool end. avail mem=X GB": what init_memory_pool takes from the device.

ModelRunner.init_memory_pool (model_runner.py up to 0.5.9, model_runner_kv_cache_mixin.py
0.5.10 - 0.5.15, mem_cache/kv_cache_configurator.py from 0.5.16) builds its pools between the
"Load weight end. avail mem=A GB" and "Memory pool end. avail mem=B GB" lines; both read
get_available_gpu_memory, which empties torch's cache and asks cudaMemGetInfo (utils.py, from
0.5 utils/common.py), so A - B is what the pools' live tensors reserve: each in the caching
allocator's segments (calc.serving.allocator: a request of 10 MiB or more rounds up to 2 MiB, a
smaller one shares 20 MiB or 2 MiB segments; the simulator, on a fresh device). The tensors
(the wheels of every release 0.4.0 - 0.5.23, for a text model with one MHA or MLA token pool):
1. from 0.5.6, before the pools (ModelRunner.load_model after its "Load weight end" line,
   utils/common.py reserve_rope_cache_for_long_sequences): each RoPE table shorter than R =
   ceil128(context_len + 256) rows (SGLANG_ROPE_CACHE_SAFETY_MARGIN, _ALIGN) is rebuilt at R
   rows by torch.cat (RotaryEmbedding._ensure_cos_sin_cache_length), float32 on CUDA (the
   table is cast to the model dtype only off CUDA), and the old one freed: the new table's
   segment less the old one's (tables: calc.serving.sharding.rotary_tables);
2. ReqToTokenPool.req_to_token, int32 (rows, context_len + 4): rows = the pool's size
   (calc.serving.sglang_requests.request_pool_size) + 1 from 0.5.11 (its padding row 0);
3. the token pool, one tensor a layer of the rank: K and V (T + P, kv heads, head_dim) each
   (MHATokenToKVPool; from 0.5.23 one (2, T + P, kv heads, head_dim) tensor a layer with K and
   V as views), MLA one (T + P, 1, kv_lora_rank + qk_rope_head_dim) (MLATokenToKVPool); T
   max_total_num_tokens, P page_size (up to 0.4.3.post4 T + 1 rows, no pages); then the tiny
   device tables: MHA from 0.4.7.post1 data_ptrs (2L, uint64) and data_strides (2L, int64),
   from 0.4.10.post1 k_data_ptrs and v_data_ptrs (L each) beside them; MLA from 0.4.10.post1
   data_ptrs (L);
4. the allocator's free list on the device from 0.4.4 (up to 0.4.3.post4 an int32 CPU tensor):
   int64 arange(1, T + 1) (TokenToKVPoolAllocator, P = 1) or arange(1, T / P + 1)
   (PagedTokenToKVPoolAllocator), with a one-element int64 ret_values from 0.4.4 to 0.5.2.
The measurement, the same function at both lines in every release, empties the cache first; the
pools are built in ModelRunner.init_memory_pool up to 0.5.13, ModelRunner.alloc_memory_pool
(from the scheduler) 0.5.14 - 0.5.15, KVCacheConfigurator from 0.5.16, with no other device
tensor between the lines on this path (TorchMemorySaver, Mooncake's MemPool and the CUDA VMM
arena of 0.5.16 are off by default). What the weights' partly used segments could take of the
tiny tables is not known: they are counted as a fresh 2 MiB small segment.
A dense pool, an MLA pool and the sliding-window pools kvcalc plans (0.5.8 on: calc.serving.
sglang_swa_pool_end) are modelled; the others (mamba, DSA / NSA indexer, nvfp4 / fp4 scales,
speculative decoding's draft pool and copy buffers, pipeline stages, DP attention, multimodal
models) are not: their plans carry no pool-end figure.
"""

from __future__ import annotations

import bisect
import functools

from calc.serving.allocator import MIN_BLOCK, MIN_LARGE_ALLOC, SMALL_SIZE, allocation_size
from calc.serving.sglang_spec import speculation
from calc.serving.sharding import rotary_tables

GIB = 2**30
INT32, INT64 = 4, 8
ROPE_REGROW_FROM = (0, 5, 6, 0)  # reserve_rope_cache_for_long_sequences
ROPE_MARGIN, ROPE_ALIGN = 256, 128
PADDING_ROW_FROM = (0, 5, 11, 0)  # ReqToTokenPool allocates size + 1 rows
DEVICE_FREE_LIST_FROM = (0, 4, 4, 0)  # the allocator's free list on the device
RET_VALUES = ((0, 4, 4, 0), (0, 5, 3, 0))  # PagedTokenToKVPoolAllocator.ret_values [from, until)
MHA_TABLES_FROM = (0, 4, 7, 1)  # data_ptrs, data_strides
SPLIT_TABLES_FROM = (0, 4, 10, 1)  # + k_data_ptrs, v_data_ptrs; MLA's data_ptrs
FUSED_KV_FROM = (0, 5, 23, 0)  # one (2, T + P, H, D) tensor a layer
POOL_END_CHANGES = (  # the releases where the pools' tensors change (the dashboard's list)
    DEVICE_FREE_LIST_FROM, MHA_TABLES_FROM, SPLIT_TABLES_FROM, RET_VALUES[1], ROPE_REGROW_FROM,
    PADDING_ROW_FROM, FUSED_KV_FROM,
)  # fmt: skip


def not_modelled(spec, lay, config) -> str | None:
    """Why kvcalc has no pool-end figure for this deployment (None: it has one)."""
    for cause, why in (
        (lay.sglang_swa and lay.sglang_swa[1] == 0, "a pool of sliding layers only"),
        (lay.sglang_mamba, "a mamba state pool"),
        (lay.index_bytes, "an NSA indexer pool"),
        (lay.shared_token_bytes or lay.logged_head_size, f"a {config.kv_cache_dtype} pool"),
        (speculation(config), "speculative decoding's pools"),
        (config.pipeline_parallel_size > 1, "pipeline stages"),
        (config.enable_dp_attention, "DP attention"),
        (spec.vision is not None, "a multimodal model"),
    ):
        if cause:
            return why
    return None


def rope_delta_bytes(spec, v: tuple[int, ...], context_len: int) -> int:
    """What the RoPE tables' rebuild from 0.5.6 adds between the lines (module docstring, 1)."""
    if v < ROPE_REGROW_FROM:
        return 0
    reserve = -(-(context_len + ROPE_MARGIN) // ROPE_ALIGN) * ROPE_ALIGN
    out = 0
    for rows, dim in rotary_tables(spec):
        if reserve > rows:
            out += segment_bytes(reserve * dim * 4) - segment_bytes(rows * dim * 4)
    return out


def request_table_bytes(v: tuple[int, ...], size: int, context_len: int) -> int:
    """ReqToTokenPool.req_to_token (module docstring, 2); `size`: the request pool's size."""
    return (size + (1 if v >= PADDING_ROW_FROM else 0)) * (context_len + 4) * INT32


def mha_tensors(v: tuple[int, ...], row: int, tokens: int, page_size: int, layers: int) -> list:
    """One MHATokenToKVPool of `layers` layers and `tokens` rows (+ page_size) of `row` bytes
    (a token's K of one layer): its K / V buffers and pointer tables (module docstring, 3),
    (bytes, count) pairs."""
    k = (tokens + page_size) * row
    out = [(2 * k, layers) if v >= FUSED_KV_FROM else (k, 2 * layers)]
    if v >= SPLIT_TABLES_FROM:
        out += [(layers * 8, 2), (2 * layers * 8, 2)]
    elif v >= MHA_TABLES_FROM:
        out.append((2 * layers * 8, 2))
    return out


def free_list_bytes(tokens: int, page_size: int) -> int:
    """An allocator's int64 free list: arange(1, T + 1) of slots (TokenToKVPoolAllocator, page
    1) or arange(1, T / P + 1) of pages (PagedTokenToKVPoolAllocator)."""
    return tokens // page_size * INT64


def pool_tensors(v: tuple[int, ...], lay, page_size: int, tokens: int, size: int, context_len: int):
    """The pools' device tensors in allocation order, (bytes, count) pairs (module docstring,
    2 - 4); `size`: the request pool's size."""
    P, T = page_size, tokens
    layers = max(lay.rank_layers)
    out = [(request_table_bytes(v, size, context_len), 1)]
    if lay.mla:
        out.append(((T + P) * lay.head_size * lay.kv_bytes, layers))
        if v >= SPLIT_TABLES_FROM:
            out.append((layers * 8, 1))
    else:
        out += mha_tensors(v, lay.kv_heads * lay.head_size * lay.kv_bytes, T, P, layers)
    if v >= DEVICE_FREE_LIST_FROM:
        out.append((free_list_bytes(T, P), 1))
        if P > 1 and RET_VALUES[0] <= v < RET_VALUES[1]:
            out.append((INT64, 1))
    return out


def pool_bytes(
    v: tuple[int, ...], spec, lay, config, tokens: int, size: int, context_len: int, swa=None
):
    """What the device loses between "Load weight end" and "Memory pool end" (the RoPE rebuild
    and the pools' segments), or None where not modelled (not_modelled); `swa`: the sliding
    layers' pool's tokens (calc.serving.sglang_swa_pool_end)."""
    if not_modelled(spec, lay, config) or tokens <= 0:
        return None
    if lay.sglang_swa and swa is None:
        raise ValueError("'swa': the sliding layers' tokens are needed for a sliding-window pool")
    if lay.sglang_swa:
        from calc.serving.sglang_swa_pool_end import swa_reserved_bytes

        pools = swa_reserved_bytes(v, lay, config.page_size, tokens, swa, size, context_len)
    else:
        pools = reserved_bytes(pool_tensors(v, lay, config.page_size, tokens, size, context_len))
    return rope_delta_bytes(spec, v, context_len) + pools


def reserved_bytes(tensors) -> int:
    """reserved_segments of `tensors` (a list or tuple of (bytes, count) pairs), cached: a
    plan's pools repeat while the dashboard redraws or a grid's cell is planned again."""
    return reserved_segments(tuple(tensors))


@functools.lru_cache(maxsize=4096)
def reserved_segments(tensors: tuple[tuple[int, int], ...]) -> int:
    """The segments `tensors` ((bytes, count) pairs, in allocation order) reserve on a device
    whose pools hold no free block: calc.serving.allocator's rules (round to 512 B, best fit
    among the free blocks of the pool, else a new segment; a large block's remainder over 1 MiB
    split off and kept) without frees, so copies that no free block fits are counted at once
    (a 10 MiB+ tensor's remainder is under 2 MiB: never fits the next copy). Free blocks are
    kept as {size: count} with their sorted sizes."""
    reserved = 0
    sizes: dict[bool, list[int]] = {True: [], False: []}  # small pool, large pool
    counts: dict[bool, dict[int, int]] = {True: {}, False: {}}
    for nbytes, count in tensors:
        size = max(MIN_BLOCK, -(-nbytes // MIN_BLOCK) * MIN_BLOCK)
        small = size <= SMALL_SIZE
        pool, held = sizes[small], counts[small]
        while count > 0:
            i = bisect.bisect_left(pool, size)
            if i < len(pool):
                block = pool[i]
                held[block] -= 1
                if not held[block]:
                    del held[block], pool[i]
            elif size < MIN_LARGE_ALLOC:  # a 2 or 20 MiB segment the next copies may share
                block = allocation_size(size)
                reserved += block
            else:  # a segment of its own for every remaining copy, each leaving the same tail
                block = allocation_size(size)
                reserved += count * block
                if block - size > SMALL_SIZE:
                    _keep(pool, held, block - size, count)
                break
            count -= 1
            rest = block - size
            if rest >= MIN_BLOCK if small else rest > SMALL_SIZE:
                _keep(pool, held, rest, 1)
    return reserved


def segment_bytes(nbytes: int) -> int:
    """The segment one tensor of `nbytes` takes on its own (reserved_bytes of one tensor)."""
    return allocation_size(max(MIN_BLOCK, -(-nbytes // MIN_BLOCK) * MIN_BLOCK))


def _keep(pool: list[int], held: dict[int, int], size: int, n: int) -> None:
    if size not in held:
        bisect.insort(pool, size)
        held[size] = 0
    held[size] += n


def pool_end_line(free_bytes: int) -> str:
    return f"Memory pool end. avail mem={free_bytes / GIB:.2f} GB"
