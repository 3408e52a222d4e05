"""An engine's start-up figures from its memory, once for a single plan and for grids of plans.

`engine_plan` (calc.serving.plan) evaluates these functions at one point with Python numbers;
`engine_plan_grid` (calc.serving.grid) over numpy arrays of the grid's settings
(gpu_memory_utilization, mem_fraction_static, max_model_len, a logged available memory). The
arithmetic itself is calc.serving.memory's, one formula per function; this module only chains
it: available memory per pipeline rank -> the limiting rank's blocks -> tokens, concurrency.
No other module repeats the chain: tests/test_plan_unified.py checks that both paths agree.
"""

from __future__ import annotations

from typing import NamedTuple

from calc.plan_core import minimum
from calc.serving import memory as m
from calc.serving.defaults_sglang import sglang_version
from calc.serving.sglang_budget import mm_reserve_bytes
from calc.serving.sglang_hybrid import sglang_mamba_pool
from calc.serving.sglang_memory import sglang_init_used_bytes, sglang_load_extra_bytes
from calc.serving.sglang_multimodal import sglang_multimodal
from calc.serving.sglang_requests import mamba_cap, requests_and_pool_size, requests_refusal
from calc.serving.sglang_spec_pool import draft_weight_bytes, headroom_tokens, pool_cell_bytes
from calc.serving.sglang_swa import check_swa_args, sglang_swa_pools, swa_pool_refusal
from calc.serving.sglang_token_cap import CONFIGURATOR_FROM, capped, e_count
from calc.serving.vllm_extensible import blocks_within, measured_kv_bytes
from calc.serving.vllm_mamba import check_align_block
from calc.serving.vllm_refusal import NULL_BLOCK_CHECK_FROM

GIB = 2**30
# In these releases the one-request check (and its "estimated maximum model length") counted
# every layer of the model, not the rank's own (vllm#34076, reported on 0.15.2rc1): PyPI sdists
# of vllm/v1/core/kv_cache_utils.py, 0.14.0 - 0.16.0 check the global groups; 0.13.0 and before
# check each worker's own spec, as get_kv_cache_configs does again from 0.17.0.
PP_CHECK_ALL_LAYERS_FROM = (0, 14, 0)
PP_CHECK_PER_RANK_FROM = (0, 17, 0)
# --num-gpu-blocks-override: vLLM allocates that many blocks; up to 0.20.x the one-request check
# still planned against the profiled memory (may_override_num_blocks after the check), from
# 0.21.0 get_kv_cache_configs sets each worker's memory to override x bytes per block first
# ("Reflect that in `available_memory` here", kv_cache_utils.py, 0.21.0 - 0.34.0 sdists)
OVERRIDE_MEMORY_FROM = (0, 21, 0)


def _is_array(x) -> bool:
    return getattr(x, "ndim", 0) > 0


def given_bytes(available_kv_gib):
    """A logged 'Available KV cache memory: X GiB' in bytes (truncated, as int())."""
    if _is_array(available_kv_gib):
        import numpy as np

        return (np.asarray(available_kv_gib) * GIB).astype(np.int64)
    return int(available_kv_gib * GIB)


def _limiting(values, blocks):
    """(rank, its blocks, values[rank]): the rank with the fewest blocks (the first on ties),
    per grid point for arrays."""
    if not any(_is_array(b) for b in blocks):
        rank = min(range(len(blocks)), key=blocks.__getitem__)
        return rank, blocks[rank], values[rank]
    import numpy as np

    stacked = np.stack(np.broadcast_arrays(*blocks))
    rank = np.argmin(stacked, axis=0)  # the first minimum, as min() above
    picked = np.stack([np.broadcast_to(v, stacked.shape[1:]) for v in values])

    def at_rank(a):
        return np.take_along_axis(a, rank[None], 0)[0]

    return rank, at_rank(stacked), at_rank(picked)


def vllm_figures(lay, config, available, max_model_len, measured=None) -> dict:
    """vLLM's figures from the available KV memory of each pipeline rank (`available`: one
    value per rank). V1: blocks of the limiting rank, 'GPU KV cache size' tokens, 'Maximum
    concurrency', the bytes one request of max_model_len needs and the longest that fits;
    V0: '# GPU blocks' and tokens / max_model_len. `measured`: with 0.34.0's extensible KV
    cache, each rank's measured KV bytes (calc.serving.vllm_extensible), whose blocks within the
    capacity `available` gives are the ones the engine keeps."""
    B, L = lay.block_size(config.block_size), max_model_len
    check_align_block(lay, B, config.max_num_batched_tokens, config.version_tuple)
    page = lay.page_bytes(B)
    per_rank = [lay.rank_group_size(r) for r in range(len(available))]
    blocks = [m.vllm_num_blocks(a, page, g) for a, g in zip(available, per_rank, strict=True)]
    capacity = _limiting(blocks, blocks)[1]  # the reserved blocks: the fewest of any rank
    override, profiled, logged = config.num_gpu_blocks_override, None, available
    if override is not None:  # may_override_num_blocks; from 0.21.0 the memory planned is too
        profiled = capacity
        if config.version_tuple >= OVERRIDE_MEMORY_FROM:
            available = [override * page * g for g in per_rank]
        blocks = [override] * len(blocks)
    if measured is not None:
        blocks = [
            blocks_within(k, page, g, capacity) for k, g in zip(measured, per_rank, strict=True)
        ]
    rank, n, a = _limiting(available, blocks)
    groups = len(lay.groups)
    out = {"block_size": B, "page_bytes": page, "rank": rank, "num_gpu_blocks": n}
    out |= {"available_bytes": a, "kv_groups": groups, "capacity_blocks": capacity}
    # what determine_available_memory logged (the profiled memory, before an override)
    out |= {"profiled_blocks": profiled, "logged_available": _limiting(logged, blocks)[2]}
    tokens, conc, per_req = vllm_concurrency(lay, config, n, L)
    out |= {"tokens": tokens, "max_concurrency": conc}
    if not config.is_v1:
        return out
    layers = rank_layers = _limiting(per_rank, blocks)[2]
    pp_all = PP_CHECK_ALL_LAYERS_FROM <= config.version_tuple < PP_CHECK_PER_RANK_FROM
    if config.pipeline_parallel_size > 1 and pp_all:
        layers = sum(lay.rank_layers) if groups == 1 else layers
    dcp = config.decode_context_parallel_size  # a block holds dcp x its tokens (vllm_dcp)
    # the memory the one-request check plans against: less the null block from 0.29.0
    null = page * rank_layers if config.version_tuple >= NULL_BLOCK_CHECK_FROM else 0
    check = a - null
    after = (n - 1) * null if measured is not None else None  # shrink_kv_cache_configs
    return out | {
        "needed_bytes": per_req * page * layers,
        "check_bytes": check,
        "after_warmup_bytes": after,
        "longest_len": m.vllm_longest_fitting_len(check, page, layers * groups, B) * dcp,
        "longest_after_len": None
        if after is None
        else m.vllm_longest_fitting_len(after, page, layers * groups, B) * dcp,
    }


def vllm_concurrency(lay, config, num_blocks, max_model_len):
    """(tokens, concurrency, blocks one request needs) for `num_blocks` blocks: V1's 'GPU KV
    cache size' and 'Maximum concurrency'; V0's blocks x block_size and tokens / max_model_len
    (no per-request blocks: None)."""
    B, L = lay.block_size(config.block_size), max_model_len
    if not config.is_v1:
        tokens = num_blocks * B
        return tokens, tokens / L, None
    dcp = config.decode_context_parallel_size
    per_req = lay.blocks_per_request(L, B, config.max_num_batched_tokens, dcp)
    conc = m.vllm_max_concurrency(num_blocks, per_req, None, L)
    if config.version_tuple >= m.TOKENS_FROM_CONCURRENCY:
        return m.vllm_tokens_from_concurrency(conc, L), conc, per_req
    tokens = m.vllm_gpu_kv_cache_tokens(num_blocks, lay.report_block(B, L), len(lay.groups))
    return tokens * dcp, conc, per_req  # "Multiplying the GPU KV cache size by ..." (vllm_dcp)


def vllm_available(config, weights, total, act, nt, cg, utilization) -> list:
    """determine_available_memory per pipeline rank (each rank's own weights)."""
    return [m.vllm_available_bytes(total, utilization, w, act, nt, cg) for w in weights]


def vllm_set_memory(config, weights) -> list:
    """--kv-cache-memory-bytes: every pipeline rank's available memory (calc.serving.
    vllm_kv_memory)."""
    return [config.kv_cache_memory_bytes] * len(weights)


def vllm_derived_memory(config, weights, total, act, nt, cg, utilization, hw, calibration):
    """(available memory per pipeline rank, each rank's (kv, headroom, requested) of 0.34.0's
    extensible-cache measurement or None). The extensible cache's profile makes no CUDA-graph
    estimate; the captured graphs are resident when it is measured (vllm_extensible)."""
    ext = config.enable_extensible_kv_cache
    avail = vllm_available(config, weights, total, act, nt, 0 if ext else cg, utilization)
    if not ext:
        return avail, None
    ranks = config.tensor_parallel_size * config.pipeline_parallel_size
    u, cal = utilization, calibration
    return avail, [measured_kv_bytes(total, u, w, act, nt, cg, ranks, hw, cal) for w in weights]


def sglang_init_used(config, calibration, hw) -> int:
    """Memory SGLang's start-up takes before it measures what is free: a calibration's, else
    the CUDA context and the distributed set-up of the TP x PP world on `hw` (a HardwareSpec;
    calc.serving.sglang_memory)."""
    cal = calibration or {}
    if "init_used_bytes" in cal:
        return int(cal["init_used_bytes"])
    world = config.tensor_parallel_size * config.pipeline_parallel_size
    return sglang_init_used_bytes(world, hw)


class SglangBudget(NamedTuple):
    """profile_max_num_token's budget and the free memory it is read from (the heaviest rank)."""

    rest: object  # the pool's budget, bytes (an array over a grid's fractions)
    pre: int  # SGLang's "total": free after its start-up, before the weights
    available: int  # free after the weights, the load extra and the draft's weights
    held: int  # the draft worker's weights (from 0.5.14; 0 otherwise)


def sglang_derived_budget(spec, config, weights, total, init_used, mem_fraction_static):
    """The budget derived on the heaviest rank (calc.serving.sglang_budget): the free memory
    after the weights, what the load takes beside them (sglang_memory.sglang_load_extra_bytes)
    and the draft worker's weights from 0.5.14 (sglang_spec_pool.draft_weight_bytes), minus the
    (1 - mem_fraction_static) reserve and, from 0.5.18, a multimodal model's reservation."""
    held = draft_weight_bytes(config)
    pre = total - init_used
    available = pre - max(weights) - sglang_load_extra_bytes() - held
    multimodal = sglang_multimodal(spec, config.version, config.enable_multimodal) is not None
    rest = m.sglang_rest_bytes(available, pre, mem_fraction_static)
    reserve = mm_reserve_bytes(config.version, multimodal, config.mm_feature_transport)
    return SglangBudget(rest - reserve, pre, available, held)


def sglang_figures(lay, config, rest, max_model_len) -> dict:
    """SGLang's figures from the KV budget: max_total_num_tokens (the full layers' pool with
    sliding-window pools; after the mamba state pool for linear layers; with speculative
    decoding's headroom; capped by --max-total-tokens: sglang_token_cap), the K buffer size,
    pages, max_running_requests (calc.serving.sglang_requests) and the concurrency: requests of
    max_model_len the pool holds, at most max_running_requests."""
    cell, P = lay.cell_bytes(), config.page_size
    lay.check_page(P)
    v, limit = sglang_version(config.version), config.max_total_tokens
    mamba = None
    if lay.sglang_mamba:  # the mamba state pool leaves the budget first (sglang_hybrid)
        mamba = sglang_mamba_pool(lay.sglang_mamba, config, rest)
        rest = mamba["rest"]
    # speculative decoding (sglang_spec_pool): the draft's layers in the cell from 0.5.14, the
    # draft and verify tokens' headroom up to 0.5.6.post2
    cell_spec = pool_cell_bytes(cell, config, max(lay.rank_layers))
    profiled = rest // cell_spec  # profile_max_num_token's count, before the page rounding
    head = headroom_tokens(config)
    tokens = m.sglang_max_total_tokens(rest, cell_spec, P, head)
    seen = tokens if v >= CONFIGURATOR_FROM else profiled + head  # what the cap compares with
    tokens = capped(tokens, limit, P)
    k_size = swa = first = None
    if lay.mla:  # MLATokenToKVPool (NSATokenToKVPool: + the indexer keys): "KV size"
        k_size = lay.sglang_pool_bytes(tokens, P, logged=True)
    elif lay.sglang_swa:  # SWAKVPool: the full layers' and the sliding layers' pools
        check_swa_args(config)
        tokens, swa, first = sglang_swa_pools(v, lay, config, rest, tokens)
        seen = seen if first is None else first[0]
    else:
        layers = max(lay.rank_layers)
        head = lay.logged_head_size or lay.head_size  # fp4_e2m1: its values only
        k_size = m.sglang_k_size_bytes(tokens, P, lay.kv_heads, head, layers, lay.kv_bytes)
        k_size = k_size + (tokens + P) * (lay.shared_token_bytes // 2)  # nvfp4's workspace
    cap = None  # a running request holds several mamba states (sglang_requests)
    if mamba is not None:
        cap = mamba_cap(lay.sglang_mamba, v, config, mamba["slots"])
    e_in = e_count(v, profiled, limit)
    n, pool_size = requests_and_pool_size(v, tokens, max_model_len, config, cap, e_in)
    # validate_swa_pool_size raises before max_running_requests is resolved
    refusal = lay.sglang_swa and swa_pool_refusal(v, lay, P, first and first[1], swa)
    return {
        "mamba": mamba,
        "max_running_requests": n,
        "request_pool_size": pool_size,
        "requests_refusal": refusal or requests_refusal(v, n, cap),
        "cell_bytes": cell,
        "tokens": tokens,
        "swa_tokens": swa,
        "k_size_bytes": k_size,
        "num_gpu_blocks": tokens // P,
        "max_concurrency": minimum(tokens / max_model_len, n),
        "cap_seen": seen,  # the count --max-total-tokens is compared with (its warning)
        "swa_profiled": first,  # from 0.5.11 the sliding pools logged before the cap
    }
