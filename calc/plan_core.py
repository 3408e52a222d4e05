"""The capacity planner's arithmetic, written once: the memory plan and the roofline latency.

Every function takes Python numbers or numpy arrays (broadcast together). The scalar planners,
`memory_plan` (calc.capacity), `roofline` (calc.roofline) and `plan` (calc.plan), evaluate them
at one point with Python numbers (exact integers, no numpy import); `sweep_plans`
(calc.plan_sweep) evaluates them over a whole grid at once with arrays. No other module repeats
these formulas: tests/test_plan_unified.py checks that a change here reaches both.

Per-configuration constants (weights per GPU, the activation peak, KV heads per GPU, matmul
parameters, attention FLOPs of a prefill) come from their own homes (calc.sharding,
calc.capacity, calc.params, calc.attention) and are passed in.
"""

from __future__ import annotations

import math

UNBOUNDED = -1  # max_context_tokens of a model whose every layer slides and whose window fits


# --- scalar-or-array helpers ------------------------------------------------------------------


_SCALARS = frozenset({int, float, bool})


def _arrays(*xs) -> bool:
    """Is any argument a numpy array (of one or more dimensions)?"""
    for x in xs:
        if type(x) not in _SCALARS and getattr(x, "ndim", 0):
            return True
    return False


def where(cond, a, b):
    if _arrays(cond, a, b):
        import numpy as np

        return np.where(cond, a, b)
    return a if cond else b


def maximum(a, b):
    if _arrays(a, b):
        import numpy as np

        return np.maximum(a, b)
    return max(a, b)


def minimum(a, b):
    if _arrays(a, b):
        import numpy as np

        return np.minimum(a, b)
    return min(a, b)


def floor_int(x):
    """floor(x) as an integer (int64 for arrays)."""
    if _arrays(x):
        import numpy as np

        return np.floor(x).astype(np.int64)
    return math.floor(x)


def ceil(x):
    if _arrays(x):
        import numpy as np

        return np.ceil(x)
    return math.ceil(x)


def cdiv(a, b):
    return -(-a // b)


# --- memory (vLLM's accounting, calc.capacity) ------------------------------------------------


def sequence_kv_bytes(n, lf, ls, window, kv_bytes_per_layer, block_size):
    """One sequence of n tokens on one GPU, whole blocks per layer (sliding layers cap at the
    window; `window` 0 for a model without one)."""
    blocks = lf * cdiv(n, block_size)
    blocks = blocks + ls * cdiv(minimum(n, where(window > 0, window, n)), block_size)
    return blocks * block_size * kv_bytes_per_layer


def max_context_tokens(kv_budget, batch, lf, ls, window, kv_bytes_per_layer, block_size):
    """Longest context each of `batch` sequences can have; UNBOUNDED when every layer slides
    and the window fits."""
    per = block_size * kv_bytes_per_layer
    q = maximum(kv_budget, 0) // batch // per  # layer-blocks one sequence may use
    lf1, ls1 = maximum(lf, 1), maximum(ls, 1)
    cw = cdiv(window, block_size)  # a full window, in blocks
    only_full = q // lf1 * block_size
    only_sliding = where(ls * cw <= q, UNBOUNDED, q // ls1 * block_size)
    k = (q - ls * cw) // lf1  # assume the context reaches past the window
    past = (k >= 0) & (k * block_size >= window)
    mixed = where(past, k * block_size, q // maximum(lf + ls, 1) * block_size)
    out = where(ls == 0, only_full, where(lf == 0, only_sliding, mixed))
    return where(kv_budget <= 0, 0, out)


def memory(
    *,
    total,
    utilization,
    weights,
    activation,
    reserve,
    lf,
    ls,
    window,
    kv_bytes_per_layer,
    block_size,
    seq_len,
    batch,
) -> dict:
    """Per-GPU budget, KV pool and what fits (the numbers of calc.capacity.MemoryPlan)."""
    budget = floor_int(total * utilization)
    kv_budget = budget - weights - activation - reserve
    per_token = (lf + ls) * kv_bytes_per_layer
    block = block_size * per_token
    room = maximum(kv_budget, 0)
    blocks = room // block
    seq_kv = sequence_kv_bytes(seq_len, lf, ls, window, kv_bytes_per_layer, block_size)
    target = batch * seq_kv
    fits = kv_budget >= target
    return {
        "budget_bytes": budget,
        "kv_budget_bytes": kv_budget,
        "kv_bytes_per_token": per_token,
        "kv_block_bytes": block,
        "kv_blocks": blocks,
        "kv_tokens": blocks * block_size,
        "seq_kv_bytes": seq_kv,
        "kv_cache_bytes": target,
        "free_bytes": total - weights - activation - reserve - target,
        "max_concurrent_seqs": where(seq_kv > 0, room // maximum(seq_kv, 1), 0),
        "max_context_tokens": max_context_tokens(
            kv_budget, batch, lf, ls, window, kv_bytes_per_layer, block_size
        ),
        "fits": fits,
        "shortfall_bytes": where(fits, 0, target - kv_budget),
    }


# --- latency (the roofline, calc.roofline) ----------------------------------------------------


def experts_touched(num_experts, experts_per_token, tokens):
    """Expected distinct experts per layer that `tokens` tokens are routed to (uniform routing)."""
    E, k = num_experts, experts_per_token
    return where(E > 1, E * (1.0 - (1.0 - k / E) ** tokens), 1.0)


def sum_affine(lo, hi, x0, x1):
    """sum of x0 + x1 * c for integer c in [lo, hi] (0 for an empty range)."""
    n = maximum(hi - lo + 1, 0)
    return n * x0 + x1 * (lo + hi) * n / 2


def sum_max_affine(lo, hi, a0, a1, b0, b1):
    """sum over integer c in [lo, hi] of max(a0 + a1 c, b0 + b1 c): name p the line with the
    larger slope (the larger intercept on equal slopes); it is the max from ceil(crossing) on."""
    swap = (a1 < b1) | ((a1 == b1) & (a0 < b0))
    p0, p1 = where(swap, b0, a0), where(swap, b1, a1)
    q0, q1 = where(swap, a0, b0), where(swap, a1, b1)
    dp = p1 - q1  # >= 0; 0: p is the max everywhere
    x = where(dp > 0, (q0 - p0) / where(dp > 0, dp, 1.0), lo)
    m = minimum(maximum(ceil(x), lo), hi + 1)
    s = sum_affine(lo, m - 1, q0, q1) + sum_affine(m, hi, p0, p1)
    return where(hi < lo, 0.0, s)


def phase(flops, nbytes, comm, peak, bandwidth) -> dict:
    """One phase on one GPU: max(compute, memory) + communication."""
    c, m = flops / peak, nbytes / bandwidth
    return {
        "flops": flops,
        "bytes": nbytes,
        "compute_s": c,
        "memory_s": m,
        "comm_s": comm,
        "time_s": maximum(c, m) + comm,
        "compute_bound": c >= m,
    }


def latency(
    *,
    tp,
    batch,
    prompt_tokens,
    output_tokens,
    weights,
    expert_weights,
    num_experts,
    experts_per_token,
    matmul_params,
    flops_per_pair,
    prefill_attention_flops,
    layers,
    lf,
    ls,
    window,
    kv_bytes_per_layer,
    hidden,
    act_bytes,
    allreduces,
    peak,
    bandwidth,
    link,
    latency_s,
) -> dict:
    """Prefill, first and last decode steps, and the closed-form sum over the decode steps.

    `peak`, `bandwidth` and `link` are the effective rates (x mfu, x efficiencies);
    `prefill_attention_flops` is one sequence's QK^T + AV FLOPs over the prompt (calc.attention);
    `window` is 0 for a model without sliding layers.
    """
    B, P, n_out, kvl = batch, prompt_tokens, output_tokens, kv_bytes_per_layer

    def weights_read(tokens):
        share = experts_touched(num_experts, experts_per_token, tokens) / num_experts
        return weights - expert_weights * (1.0 - share)

    def comm(tokens):
        ring = 2 * (tp - 1) / tp * tokens * hidden * act_bytes  # bytes each GPU sends
        return where(tp > 1, allreduces * (latency_s + ring / where(tp > 1, link, 1.0)), 0.0)

    # prefill: 2 FLOPs per matmul parameter and token, plus attention; weights once, K, V written
    pre_flops = (2 * B * P * matmul_params + B * prefill_attention_flops) / tp
    pre_bytes = weights_read(B * P) + B * P * layers * kvl
    prefill = phase(pre_flops, pre_bytes, comm(B * P), peak, bandwidth)

    # decode: a step at cache length c attends keys(c) = Lf c + Ls min(c, w) keys per sequence
    mm2 = 2 * B * matmul_params / tp
    attn = B * flops_per_pair / tp  # per attended key and layer
    wdec = weights_read(B) + B * kvl * layers  # weights, and the new token's K and V
    step_comm = comm(B)

    def step(c):
        keys = lf * c + ls * minimum(c, where(window > 0, window, c))
        return phase(mm2 + attn * keys, wdec + B * kvl * keys, step_comm, peak, bandwidth)

    lo, hi = P + 1, P + n_out - 1  # cache lengths of the n_out - 1 decode steps
    first, last = step(lo), step(maximum(lo, hi))
    # two affine pieces: keys(c) = (Lf + Ls) c up to the window, Lf c + Ls w past it
    full = ls == 0
    hi1 = where(full, hi, minimum(hi, window))
    decode = (n_out - 1) * step_comm  # the order of calc.roofline's sum before numpy
    decode = decode + sum_max_affine(
        lo,
        hi1,
        mm2 / peak,
        attn * (lf + ls) / peak,
        wdec / bandwidth,
        B * kvl * (lf + ls) / bandwidth,
    )
    lo2 = where(full, hi + 1, maximum(lo, window + 1))
    const2 = ls * window
    decode = decode + sum_max_affine(
        lo2,
        hi,
        (mm2 + attn * const2) / peak,
        attn * lf / peak,
        (wdec + B * kvl * const2) / bandwidth,
        B * kvl * lf / bandwidth,
    )
    tpot = where(n_out > 1, decode / maximum(n_out - 1, 1), first["time_s"])
    return {
        "prefill": prefill,
        "decode_first": first,
        "decode_last": last,
        "decode_first_context": lo,
        "decode_last_context": maximum(lo, hi),
        "ttft_s": prefill["time_s"],
        "decode_s": decode,
        "tpot_s": tpot,
        "e2e_s": prefill["time_s"] + decode,
        "tokens_per_s_per_seq": 1.0 / tpot,
        "tokens_per_s_total": B / tpot,
    }
