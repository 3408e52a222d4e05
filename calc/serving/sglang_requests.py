"""SGLang's max_running_requests: how many requests its scheduler runs at once, by release.

SGLang prints it in the scheduler's start-up line ("max_total_num_tokens=T, chunked_prefill_size=
C, max_prefill_tokens=16384, max_running_requests=N, context_len=L, available_gpu_mem=X GB";
chunked_prefill_size from 0.4.2, available_gpu_mem from 0.4.7: the memory left after the CUDA
graphs, which kvcalc does not compute; managers/scheduler.py in the 0.4.0 - 0.5.23 wheels). With
G the given --max-running-requests, dp the DP-attention width (1 without --enable-dp-attention;
a given G is divided by it from 0.4.1.post7, absent from the 0.4.1.post6 wheel) and
E = clamp(int(T' / L x 512), 2048, 4096):

- 0.4.0 - 0.5.9 (ModelRunner.init_memory_pool, then TpModelWorker / ModelRunner:
  min(T // 2 or G // dp, req_to_token_pool.size)): the request pool holds P = G or E slots, + 1
  before 0.4.7 (ReqToTokenPool(size=max_num_reqs + 1) in the 0.4.6.post5 wheel, size=max_num_reqs
  in 0.4.7), so N = min(T // 2 (G // dp when given), P). E is taken from T' = the count
  profile_max_num_token returned, before the page rounding and the sliding-window split (T is
  after both), and before --max-total-tokens from 0.4.1.post4 (up to 0.4.1.post3 after it:
  calc.serving.sglang_token_cap). The three 2049s of the 0.4.1 / 0.4.2 logs are E + 1.
- 0.5.10 - 0.5.13 (_resolve_max_num_reqs in model_runner_kv_cache_mixin.py of the 0.5.10 -
  0.5.13 wheels, T' = T, the finalized capacity): N = min(G // dp, E) when given, else
  min(E, T // 2).
- 0.5.14 on (the same function, from 0.5.16 KVCacheConfigurator.resolve_max_num_reqs, to the
  0.5.23 wheel): N = min(G // dp, T // 2) when given (at least 1 from 0.5.23), else
  min(E, T // 2).

Linear-attention models (the mamba state pool, sglang_hybrid.py) cap the pool at
max_mamba_cache_size // r, the slots a running request may hold (P above, N from 0.5.10), r:
- 1 with --disable-radix-cache, and 0.5.2 - 0.5.3.post1 (radix cache forced off);
- 3 from 0.5.3.post2 (MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO, sglang #11214);
- 5 in 0.5.7: 3 + MAMBA_CACHE_V2_ADDITIONAL_RATIO_OVERLAP (2) whenever the extra buffer is not
  combined with speculative decoding (model_runner_kv_cache_mixin.py in the 0.5.7 wheel);
  0.5.8 adds the 2 only with the extra buffer, and --mamba-scheduler-strategy auto resolves to
  no_buffer up to 0.5.13 (server_args.py in the 0.5.7 - 0.5.13 wheels);
- from 0.5.14 auto picks extra_buffer with the overlap scheduler on (the default) for the
  architectures of _MAMBA_EXTRA_BUFFER_ARCHS (ServerArgs._support_mamba_cache_extra_buffer in
  the 0.5.14 wheel, arg_groups/overrides.py from 0.5.15: Qwen3-Next, Qwen3.5's VL
  architectures, NemotronH, GraniteMoeHybrid; Qwen3_5(Moe)ForCausalLM from 0.5.19) when
  --linear-attn-backend is triton (the default): r = 3 + 2 ping-pong slots
  (get_mamba_tracking_slots from 0.5.22); for the others no_buffer, r = 3, and the overlap
  scheduler is turned off.
SGLANG_OPT_MAMBA_SKIP_DECODE_LOCK (0.5.17 on) is off by default; the overlap scheduler, the
strategy and speculative decoding are not kvcalc settings (their defaults are assumed). With
pipeline parallelism each rank takes E from its own count before the ranks agree on the
minimum T (0.4.x - 0.5.9); kvcalc takes it from the limiting rank's.
N = 0 is refused: "max_running_request is zero" (TpModelWorker, from 0.4.5.post3; absent from
the 0.4.5.post2 wheel), with a mamba pool from 0.5.13 "Hybrid (mamba/linear-attention) state
cache is too small to serve any requests." Before 0.4.5.post3 the server starts and runs
nothing (concurrency 0).
"""

from __future__ import annotations

import numpy as np

from calc.plan_core import floor_int, maximum, minimum
from calc.serving.sglang_hybrid import RATIO_FROM

PLUS_ONE_UNTIL = (0, 4, 7, 0)  # ReqToTokenPool(size=max_num_reqs + 1) until 0.4.6.post5
DP_DIVIDE_FROM = (0, 4, 1, 7)  # G // dp with DP attention (tp_worker.py, 0.4.1.post7 wheel)
RESOLVE_FROM = (0, 5, 10, 0)  # _resolve_max_num_reqs
GIVEN_HALF_FROM = (0, 5, 14, 0)  # a given G capped by T // 2, not by E
GIVEN_AT_LEAST_ONE_FROM = (0, 5, 23, 0)
RATIO_5_IN = ((0, 5, 7, 0), (0, 5, 8, 0))  # [from, until)
EXTRA_BUFFER_FROM = (0, 5, 14, 0)
QWEN35_TEXT_EXTRA_FROM = (0, 5, 19, 0)
MAX_PREFILL_TOKENS = 16384  # ServerArgs.max_prefill_tokens, every release read
ZERO = "max_running_request is zero"
ZERO_FROM = (0, 4, 5, 3)
MAMBA_ZERO = "Hybrid (mamba/linear-attention) state cache is too small to serve any requests."
MAMBA_ZERO_FROM = (0, 5, 13, 0)


def mamba_ratio(text_qwen35: bool, v: tuple[int, ...], disable_radix_cache: bool) -> int:
    """The mamba state slots SGLang reserves per running request (module docstring);
    `text_qwen35`: a Qwen3_5(Moe)ForCausalLM (no vision tower)."""
    if disable_radix_cache or v < RATIO_FROM:  # before 0.5.3.post2 the radix cache was off
        return 1
    if RATIO_5_IN[0] <= v < RATIO_5_IN[1]:
        return 5
    if v < EXTRA_BUFFER_FROM:
        return 3
    return 3 if text_qwen35 and v < QWEN35_TEXT_EXTRA_FROM else 5


def mamba_cap(state, v: tuple[int, ...], config, slots) -> tuple:
    """(max_mamba_cache_size, r) for max_running_requests: `state` the layout's MambaState,
    `slots` the pool's size (planned, or a log's)."""
    return slots, mamba_ratio(state.text_qwen35, v, config.disable_radix_cache)


def estimated_pool(tokens, context_len):
    """E: int(T / L x 512) clamped to [2048, 4096] (int or array)."""
    return minimum(maximum(floor_int(tokens / context_len * 512), 2048), 4096)


def max_running_requests(
    v: tuple[int, ...], tokens, context_len, config, mamba=None, profiled=None
):
    """SGLang's max_running_requests (per DP worker) for `tokens` (max_total_num_tokens, int or
    array); `mamba`: (max_mamba_cache_size, r) for linear-attention models; `profiled`: the
    count before the page rounding and the sliding-window split, which E reads before 0.5.10
    (module docstring; default `tokens`)."""
    if v < RESOLVE_FROM:
        pool = request_pool_size(v, tokens, context_len, config, mamba, profiled)
        return _capped_by_pool(v, tokens, config, pool)
    given = config.max_running_requests
    dp = config.data_parallel_size if config.enable_dp_attention else 1
    half = tokens // 2
    est = estimated_pool(tokens, context_len)
    cap = None if mamba is None else mamba[0] // mamba[1]
    if given is None:
        n = minimum(est, half)
    else:
        per_worker = given // dp
        if v >= GIVEN_AT_LEAST_ONE_FROM:
            per_worker = max(1, per_worker)
        n = minimum(per_worker, est if v < GIVEN_HALF_FROM else half)
    return n if cap is None else minimum(n, cap)


def _capped_by_pool(v: tuple[int, ...], tokens, config, pool):
    """Before 0.5.10: min(T // 2, P), or the given G (// dp from 0.4.1.post7) against P."""
    given = config.max_running_requests
    if given is None:
        return minimum(tokens // 2, pool)
    dp = config.data_parallel_size if config.enable_dp_attention else 1
    return minimum(given // (dp if v >= DP_DIVIDE_FROM else 1), pool)


def requests_and_pool_size(v, tokens, context_len, config, mamba=None, profiled=None) -> tuple:
    """(max_running_requests, ReqToTokenPool's size), each worked out once (arguments as
    max_running_requests')."""
    if v >= RESOLVE_FROM:
        n = max_running_requests(v, tokens, context_len, config, mamba, profiled)
        return n, n
    pool = request_pool_size(v, tokens, context_len, config, mamba, profiled)
    return _capped_by_pool(v, tokens, config, pool), pool


def request_pool_size(v: tuple[int, ...], tokens, context_len, config, mamba=None, profiled=None):
    """ReqToTokenPool's size: before 0.5.10 P, the given G or E (capped by the mamba states, + 1
    before 0.4.7); from 0.5.10 max_running_requests itself (_init_pools builds the pool of the
    resolved count; from 0.5.11 it allocates one padding row more: calc.serving.sglang_pool_end).
    Arguments as max_running_requests'."""
    if v >= RESOLVE_FROM:
        return max_running_requests(v, tokens, context_len, config, mamba, profiled)
    given = config.max_running_requests
    early = profiled is not None
    pool = estimated_pool(profiled if early else tokens, context_len) if given is None else given
    if mamba is not None:
        pool = minimum(pool, mamba[0] // mamba[1])
    return pool + 1 if v < PLUS_ONE_UNTIL else pool


def requests_refusal(v: tuple[int, ...], n, mamba=None) -> str | None:
    """The start-up's refusal of max_running_requests = n <= 0 (module docstring); `mamba`:
    (max_mamba_cache_size, r) as for max_running_requests."""
    if getattr(n, "ndim", 0) == 0 and n > 0 or not np.any(np.asarray(n) <= 0):
        return None
    if mamba is not None and v >= MAMBA_ZERO_FROM:
        if getattr(n, "ndim", 0):  # a grid: the sentence without the figures
            return MAMBA_ZERO
        size, r = mamba
        return f"{MAMBA_ZERO} max_mamba_cache_size={size}, mamba_ratio={r}, resulting max_num_reqs={n}."
    return ZERO if v >= ZERO_FROM else None


def scheduler_line(v: tuple[int, ...], tokens: int, config, n: int, context_len: int) -> str:
    """The scheduler's start-up line, up to context_len (available_gpu_mem is not computed)."""
    chunk = f"chunked_prefill_size={config.chunked_prefill_size}, " if v >= (0, 4, 2, 0) else ""
    return (
        f"max_total_num_tokens={tokens}, {chunk}max_prefill_tokens={MAX_PREFILL_TOKENS}, "
        f"max_running_requests={n}, context_len={context_len}"
    )
