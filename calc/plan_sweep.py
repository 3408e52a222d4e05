"""Capacity plans over a whole grid at once: `sweep_plans`.

`sweep_plans` computes `plan`'s numbers (calc.plan) over models x GPUs x tp x weight dtypes x KV dtypes
x context lengths x batches with numpy, no Python loop per row: per-(model, tp, dtype)
constants come from the same functions `plan` uses, the per-row arithmetic is the same
formulas, vectorized (including the closed-form sum over decode steps). Each row equals
`calc.plan.plan(...)` for its inputs with gpus = tp; the sweep has no pipeline stages and no
max_context_tokens column.

>>> df = sweep_plans(["llama-2-7b"], ["a100-80gb", "h100-sxm"], seq_lens=[4096, 8192])
>>> df["weight_bytes"].tolist()   # 6,738,415,616 bf16 parameters x 2 B, in every row
[13476831232, 13476831232, 13476831232, 13476831232]
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Sequence

from calc import capacity as cap
from calc import sharding as sh
from calc.dtypes import canonical_dtype, dtype_bits
from calc.errors import check_count, check_fraction, check_non_negative
from calc.hardware import HardwareSpec, resolve_hardware
from calc.layers import KINDS
from calc.params import matmul_params
from calc.plan import DEFAULT_OUTPUT_TOKENS
from calc.presets import resolve_model
from calc.sharding import check_parallel
from calc.spec import ModelSpec

# the module: `calc.roofline` as an attribute of the package is the function roofline()
rl = importlib.import_module("calc.roofline")


# --- the vectorized sweep ---------------------------------------------------------------------


def _sum_affine_v(np, lo, hi, x0, x1):
    n = np.maximum(hi - lo + 1, 0)
    return n * x0 + x1 * (lo + hi) * n / 2


def _sum_max_affine_v(np, lo, hi, a0, a1, b0, b1):
    """calc.roofline._sum_max_affine over arrays, one branch: name p the line with the larger
    slope (the larger intercept on equal slopes); it is the max from ceil(crossing) on."""
    swap = (a1 < b1) | ((a1 == b1) & (a0 < b0))
    p0, p1 = np.where(swap, b0, a0), np.where(swap, b1, a1)
    q0, q1 = np.where(swap, a0, b0), np.where(swap, a1, b1)
    dp = p1 - q1  # >= 0
    with np.errstate(divide="ignore", invalid="ignore"):
        x = np.where(dp > 0, (q0 - p0) / np.where(dp > 0, dp, 1.0), -np.inf)
    m = np.minimum(np.maximum(np.ceil(x), lo), hi + 1)
    s = _sum_affine_v(np, lo, m - 1, q0, q1) + _sum_affine_v(np, m, hi, p0, p1)
    return np.where(hi < lo, 0.0, s)


def _config_constants(spec: ModelSpec, tp: int, wd: str, opts: dict) -> dict:
    """Everything about (model, tp, weight dtype) that no GPU, KV dtype or length changes."""
    wb = sh.weight_bytes_per_gpu(
        spec, tp, 1, wd, opts["group_size"], opts["scale_bytes"], opts["zero_point_bits"]
    )
    return {
        "weights": sum(wb.values()),
        "experts": wb["mlp"],
        "act": cap.activation_bytes_per_gpu(
            spec,
            tp,
            opts["max_num_batched_tokens"],
            opts["max_num_seqs"],
            cap.activation_dtype(wd),
        ),
        "kvh": sh.kv_heads_per_gpu(spec, tp),
        "mm": matmul_params(spec),
        "a": dtype_bits(cap.activation_dtype(wd)) // 8,
        "n_ar": rl.allreduces_per_step(spec),
    }


def sweep_plans(
    models: Iterable[str | ModelSpec],
    gpus: Iterable[str | HardwareSpec],
    tps: Sequence[int] = (1,),
    weight_dtypes: Sequence[str] = ("bf16",),
    kv_dtypes: Sequence[str] = ("bf16",),
    seq_lens: Sequence[int] = (4096,),
    batches: Sequence[int] = (1,),
    *,
    output_tokens: int | None = None,
    group_size: int = sh.DEFAULT_GROUP_SIZE,
    scale_bytes: int = sh.DEFAULT_SCALE_BYTES,
    zero_point_bits: int = 0,
    gpu_memory_utilization: float = cap.DEFAULT_GPU_MEMORY_UTILIZATION,
    runtime_reserve_bytes: int | None = None,
    max_num_batched_tokens: int = cap.DEFAULT_MAX_NUM_BATCHED_TOKENS,
    max_num_seqs: int = cap.DEFAULT_MAX_NUM_SEQS,
    block_size: int = cap.DEFAULT_BLOCK_SIZE,
    mfu: float = rl.DEFAULT_MFU,
    bandwidth_efficiency: float = rl.DEFAULT_BANDWIDTH_EFFICIENCY,
    interconnect_efficiency: float = rl.DEFAULT_INTERCONNECT_EFFICIENCY,
    allreduce_latency_s: float = rl.DEFAULT_ALLREDUCE_LATENCY_S,
):
    """One DataFrame row per (model, gpu, tp, weight dtype, KV dtype, seq_len, batch).

    A tp the model cannot use (it must divide the query heads and divide or be a multiple of
    the KV heads) is skipped for that model. Columns: model, gpu, tp, weight_dtype, kv_dtype,
    seq_len, batch, output_tokens, weight_bytes, activation_bytes, reserve_bytes,
    kv_budget_bytes, kv_blocks, kv_tokens, max_concurrent_seqs, fits, shortfall_bytes, ttft_s,
    tpot_s, e2e_s, tokens_per_s_total (sizes per GPU, as in `plan`).
    """
    import numpy as np
    import pandas as pd

    specs = [resolve_model(m) for m in models]
    hws = [resolve_hardware(g) for g in gpus]
    wds = [canonical_dtype(d) for d in weight_dtypes]
    kds = [canonical_dtype(d) for d in kv_dtypes]
    tps = [check_count("tp", t) for t in tps]
    ns = [check_count("seq_len", n) for n in seq_lens]
    bs_ = [check_count("batch", b) for b in batches]
    for name, values in (
        ("models", specs),
        ("gpus", hws),
        ("tps", tps),
        ("weight_dtypes", wds),
        ("kv_dtypes", kds),
        ("seq_lens", ns),
        ("batches", bs_),
    ):
        if not values:
            raise ValueError(f"'{name}' must not be empty")
    if min(ns) < 2:
        raise ValueError(
            f"'seq_lens' must be >= 2 (a prompt token and an output token): got {min(ns)}"
        )
    if output_tokens is not None:
        output_tokens = check_count("output_tokens", output_tokens)
        if output_tokens >= min(ns):
            raise ValueError(
                f"'output_tokens' must be < every seq_len (min {min(ns)}): got {output_tokens}"
            )
    # the same checks plan() makes, once
    u = check_fraction("gpu_memory_utilization", gpu_memory_utilization)
    mfu = check_fraction("mfu", mfu)
    eff = check_fraction("bandwidth_efficiency", bandwidth_efficiency)
    ieff = check_fraction("interconnect_efficiency", interconnect_efficiency)
    lat = check_non_negative("allreduce_latency_s", allreduce_latency_s)
    bsz = check_count("block_size", block_size)
    opts = dict(
        group_size=group_size,
        scale_bytes=scale_bytes,
        zero_point_bits=zero_point_bits,
        max_num_batched_tokens=max_num_batched_tokens,
        max_num_seqs=max_num_seqs,
    )

    # --- per configuration (model, tp, weight dtype) and per (config, gpu) constants ----------
    cfg, per_gpu = [], []  # cfg: (model index, tp, wd index, constants); per_gpu: [cfg][gpu]
    for mi, spec in enumerate(specs):
        for tp in tps:
            try:
                check_parallel(spec, tp, 1)
            except ValueError:
                continue  # this model cannot use this tp
            for wi, wd in enumerate(wds):
                cfg.append((mi, tp, wi, _config_constants(spec, tp, wd, opts)))
                per_gpu.append([_gpu_constants(hw, wd, tp, runtime_reserve_bytes) for hw in hws])
    if not cfg:
        raise ValueError(f"no tp in {tps} divides the heads of any model given")

    C, G, K, S, Bn = len(cfg), len(hws), len(kds), len(ns), len(bs_)

    def col(values, dtype):
        return np.asarray(values, dtype=dtype)

    # config-level arrays [C]
    spec_of = [specs[c[0]] for c in cfg]
    c_model = col([c[0] for c in cfg], np.int64)
    c_tp = col([c[1] for c in cfg], np.int64)
    c_wd = col([c[2] for c in cfg], np.int64)
    c_w = col([c[3]["weights"] for c in cfg], np.int64)
    c_exp = col([c[3]["experts"] for c in cfg], np.float64)
    c_act = col([c[3]["act"] for c in cfg], np.int64)
    c_kvh = col([c[3]["kvh"] for c in cfg], np.int64)
    c_mm = col([c[3]["mm"] for c in cfg], np.float64)
    c_a = col([c[3]["a"] for c in cfg], np.float64)
    c_nar = col([c[3]["n_ar"] for c in cfg], np.float64)
    c_L = col([s.num_hidden_layers for s in spec_of], np.int64)
    c_Lf = col([s.n_full_layers for s in spec_of], np.int64)
    c_Ls = col([s.n_sliding_layers for s in spec_of], np.int64)
    c_win = col([s.sliding_window or 0 for s in spec_of], np.int64)
    c_d = col([s.head_dim for s in spec_of], np.int64)
    # QK^T + AV FLOPs per (query, key) pair per layer: calc.layers, the one home of the formula
    c_pair = col([KINDS["full_attention"].flops_per_pair(s) for s in spec_of], np.float64)
    c_h = col([s.hidden_size for s in spec_of], np.float64)
    c_E = col([s.num_local_experts for s in spec_of], np.float64)
    c_k = col([s.num_experts_per_tok for s in spec_of], np.float64)
    # (config, gpu) arrays [C, G]
    g_total = col([[g["total"] for g in row] for row in per_gpu], np.int64)
    g_reserve = col([[g["reserve"] for g in row] for row in per_gpu], np.int64)
    g_peak = col([[g["peak"] for g in row] for row in per_gpu], np.float64)
    g_bw = col([[g["bw"] for g in row] for row in per_gpu], np.float64)
    g_link = col([[g["link"] for g in row] for row in per_gpu], np.float64)
    k_bits = col([dtype_bits(d) for d in kds], np.int64)

    # the grid, C order over [C, G, K, S, B]
    ci, gi, ki, si, bi = (a.ravel() for a in np.indices((C, G, K, S, Bn), dtype=np.int64))
    n = col(ns, np.int64)[si]
    B = col(bs_, np.int64)[bi]
    tp = c_tp[ci]
    Lf, Ls, L, win = c_Lf[ci], c_Ls[ci], c_L[ci], c_win[ci]

    # --- memory (calc.capacity.memory_plan) ---------------------------------------------------
    total = g_total[ci, gi]
    budget = np.floor(total * float(u)).astype(np.int64)
    reserve = g_reserve[ci, gi]
    kv_budget = budget - c_w[ci] - c_act[ci] - reserve
    kvl = -(-2 * c_kvh[ci] * c_d[ci] * k_bits[ki] // 8)  # one token, one layer, one GPU
    block = bsz * (Lf + Ls) * kvl
    room = np.maximum(kv_budget, 0)
    blocks = room // block
    seq_blocks = Lf * -(-n // bsz) + Ls * -(-np.minimum(n, np.where(win > 0, win, n)) // bsz)
    seq_kv = seq_blocks * bsz * kvl
    max_seqs = room // seq_kv
    target = B * seq_kv
    fits = kv_budget >= target

    # --- roofline (calc.roofline.roofline) ----------------------------------------------------
    if output_tokens is None:
        n_out = np.minimum(DEFAULT_OUTPUT_TOKENS, n // 2)  # default_output_tokens, per row
    else:
        n_out = np.full_like(n, output_tokens)
    P = n - n_out
    Bf, Pf, tpf = B.astype(np.float64), P.astype(np.float64), tp.astype(np.float64)
    peak_eff = g_peak[ci, gi] * mfu
    bw_eff = g_bw[ci, gi] * eff
    E, kk = c_E[ci], c_k[ci]

    def weights_read(tokens):
        share = np.where(E > 1, (E * (1.0 - (1.0 - kk / E) ** tokens)) / E, 1.0)
        return c_w[ci] - c_exp[ci] * (1.0 - share)

    a_bytes, h, n_ar = c_a[ci], c_h[ci], c_nar[ci]

    def comm(tokens):
        ring = 2 * (tpf - 1) / tpf * tokens * h * a_bytes
        return np.where(tp > 1, n_ar * (lat + ring / (g_link[ci, gi] * ieff)), 0.0)

    per_pair = c_pair[ci]
    causal = Pf * (Pf + 1) / 2
    wf = win.astype(np.float64)
    wpairs = np.where(Pf <= wf, causal, wf * (wf + 1) / 2 + (Pf - wf) * wf)
    pairs = Lf * causal + Ls * wpairs
    pre_flops = (2 * Bf * Pf * c_mm[ci] + Bf * per_pair * pairs) / tpf
    pre_bytes = weights_read(Bf * Pf) + Bf * Pf * L * kvl
    ttft = np.maximum(pre_flops / peak_eff, pre_bytes / bw_eff) + comm(Bf * Pf)

    mm2 = 2 * Bf * c_mm[ci] / tpf
    attn = Bf * c_pair[ci] / tpf
    wdec = weights_read(Bf) + Bf * kvl * L
    step_comm = comm(Bf)
    lo, hi = P + 1, P + n_out - 1
    full = Ls == 0
    # piece 1: up to the window (all of it for models without sliding layers)
    hi1 = np.where(full, hi, np.minimum(hi, win))
    slope1 = (Lf + Ls).astype(np.float64)
    dec = _sum_max_affine_v(
        np,
        lo,
        hi1,
        mm2 / peak_eff,
        attn * slope1 / peak_eff,
        wdec / bw_eff,
        Bf * kvl * slope1 / bw_eff,
    )
    # piece 2: past the window, sliding layers hold w keys
    lo2 = np.where(full, hi + 1, np.maximum(lo, win + 1))
    const2 = (Ls * win).astype(np.float64)
    dec = dec + _sum_max_affine_v(
        np,
        lo2,
        hi,
        (mm2 + attn * const2) / peak_eff,
        attn * Lf / peak_eff,
        (wdec + Bf * kvl * const2) / bw_eff,
        Bf * kvl * Lf / bw_eff,
    )
    dec = dec + (n_out - 1) * step_comm
    keys1 = Lf * lo + Ls * np.minimum(lo, np.where(win > 0, win, lo))
    first = np.maximum((mm2 + attn * keys1) / peak_eff, (wdec + Bf * kvl * keys1) / bw_eff)
    tpot = np.where(n_out > 1, dec / np.maximum(n_out - 1, 1), first + step_comm)

    names = [s.name for s in specs]
    return pd.DataFrame(
        {
            "model": pd.Categorical.from_codes(c_model[ci], names),
            "gpu": pd.Categorical.from_codes(gi, [hw.name for hw in hws]),
            "tp": tp,
            "weight_dtype": pd.Categorical.from_codes(c_wd[ci], wds),
            "kv_dtype": pd.Categorical.from_codes(ki, kds),
            "seq_len": n,
            "batch": B,
            "output_tokens": n_out,
            "weight_bytes": c_w[ci],
            "activation_bytes": c_act[ci],
            "reserve_bytes": reserve,
            "kv_budget_bytes": kv_budget,
            "kv_blocks": blocks,
            "kv_tokens": blocks * bsz,
            "max_concurrent_seqs": max_seqs,
            "fits": fits,
            "shortfall_bytes": np.where(fits, 0, target - kv_budget),
            "ttft_s": ttft,
            "tpot_s": tpot,
            "e2e_s": ttft + dec,
            "tokens_per_s_total": Bf / tpot,
        }
    )


def _gpu_constants(hw: HardwareSpec, wd: str, tp: int, reserve: int | None) -> dict:
    return {
        "total": hw.total_memory_bytes,
        "reserve": cap.reserve_bytes_per_gpu(tp, reserve),
        "peak": hw.peak_flops_per_s(rl.default_compute_dtype(wd, hw)),
        "bw": hw.hbm_bandwidth_bytes_per_s,
        "link": hw.interconnect_bytes_per_s,
    }
