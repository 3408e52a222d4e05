"""Capacity plans over a whole grid at once: `sweep_plans`.

`sweep_plans` computes `plan`'s numbers (calc.plan) over models x GPUs x tp (x pp) x weight
dtypes x KV dtypes x context lengths x batches with numpy, no Python loop per row: per-(model,
tp, pp, dtype) constants come from the same functions `plan` uses, and the per-row arithmetic
is calc.plan_core's `memory` and `latency`, the very functions `memory_plan` and `roofline`
evaluate at one point, here over arrays. Each row equals `calc.plan.plan(...)` for its inputs
with gpus = tp x pp; the sweep has no max_context_tokens column.

>>> df = sweep_plans(["llama-2-7b"], ["a100-80gb", "h100-sxm"], seq_lens=[4096, 8192])
>>> df["weight_bytes"].tolist()   # 6,738,415,616 bf16 parameters x 2 B, in every row
[13476831232, 13476831232, 13476831232, 13476831232]
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Sequence

from calc import activation as ac
from calc import plan_core as core
from calc import sharding as sh
from calc.attention import prefill_attention_flops
from calc.dtypes import canonical_dtype, dtype_bits
from calc.errors import check_count, check_fraction, check_non_negative
from calc.hardware import HardwareSpec, resolve_hardware
from calc.layers import KINDS
from calc.params import matmul_params
from calc.plan import default_output_tokens
from calc.presets import resolve_model
from calc.sharding import check_parallel
from calc.spec import ModelSpec

# the module: `calc.roofline` as an attribute of the package is the function roofline()
rl = importlib.import_module("calc.roofline")

MEMORY_COLUMNS = (
    "kv_budget_bytes",
    "kv_cache_bytes",
    "kv_blocks",
    "kv_tokens",
    "max_concurrent_seqs",
    "fits",
    "shortfall_bytes",
)
LATENCY_COLUMNS = ("ttft_s", "tpot_s", "e2e_s", "tokens_per_s_total")


def _config_constants(spec: ModelSpec, tp: int, pp: int, wd: str, opts: dict) -> dict:
    """Everything about (model, tp, pp, weight dtype) that no GPU, KV dtype or length changes:
    the memory plan holds the heaviest pipeline stage, the roofline reads every stage's weights
    (calc.capacity.memory_plan, calc.roofline.roofline)."""
    quant = opts["group_size"], opts["scale_bytes"], opts["zero_point_bits"]
    wb = sh.weight_bytes_per_gpu(spec, tp, 1, wd, *quant)
    stage = wb if pp == 1 else sh.weight_bytes_per_gpu(spec, tp, pp, wd, *quant)
    lf, ls = ac.kv_layers_per_gpu(spec, pp)
    return {
        "stage_weights": sum(stage.values()),
        "lf": lf,
        "ls": ls,
        "weights": sum(wb.values()),
        "experts": wb["mlp"],
        "act": ac.activation_bytes_per_gpu(
            spec,
            tp,
            opts["max_num_batched_tokens"],
            opts["max_num_seqs"],
            ac.activation_dtype(wd),
        ),
        "a": dtype_bits(ac.activation_dtype(wd)) // 8,
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
    pps: Sequence[int] = (1,),
    output_tokens: int | None = None,
    group_size: int = sh.DEFAULT_GROUP_SIZE,
    scale_bytes: int = sh.DEFAULT_SCALE_BYTES,
    zero_point_bits: int = 0,
    gpu_memory_utilization: float = ac.DEFAULT_GPU_MEMORY_UTILIZATION,
    runtime_reserve_bytes: int | None = None,
    max_num_batched_tokens: int = ac.DEFAULT_MAX_NUM_BATCHED_TOKENS,
    max_num_seqs: int = ac.DEFAULT_MAX_NUM_SEQS,
    block_size: int = ac.DEFAULT_BLOCK_SIZE,
    mfu: float = rl.DEFAULT_MFU,
    bandwidth_efficiency: float = rl.DEFAULT_BANDWIDTH_EFFICIENCY,
    interconnect_efficiency: float = rl.DEFAULT_INTERCONNECT_EFFICIENCY,
    allreduce_latency_s: float = rl.DEFAULT_ALLREDUCE_LATENCY_S,
):
    """One DataFrame row per (model, gpu, tp, pp, weight dtype, KV dtype, seq_len, batch).

    A tp the model cannot use (it must divide the query heads and divide or be a multiple of
    the KV heads), or a pp it cannot (more stages than layers), is skipped for that model;
    a row is `plan(..., gpus=tp * pp, tp=tp)`. Columns: model, gpu, tp, pp, weight_dtype,
    kv_dtype, seq_len, batch, output_tokens, weight_bytes, activation_bytes, reserve_bytes,
    kv_budget_bytes, kv_cache_bytes, kv_blocks, kv_tokens, max_concurrent_seqs, fits,
    shortfall_bytes, ttft_s, tpot_s, e2e_s, tokens_per_s_total, decode_last_bound (sizes per
    GPU, as in `plan`).
    """
    import numpy as np
    import pandas as pd

    specs = [resolve_model(m) for m in models]
    hws = [resolve_hardware(g) for g in gpus]
    wds = [canonical_dtype(d) for d in weight_dtypes]
    kds = [canonical_dtype(d) for d in kv_dtypes]
    tps = [check_count("tp", t) for t in tps]
    pps = [check_count("pp", x) for x in pps]
    ns = [check_count("seq_len", n) for n in seq_lens]
    bs_ = [check_count("batch", b) for b in batches]
    for name, values in (
        ("models", specs),
        ("gpus", hws),
        ("tps", tps),
        ("pps", pps),
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
    latency_s = check_non_negative("allreduce_latency_s", allreduce_latency_s)
    bsz = check_count("block_size", block_size)
    opts = dict(
        group_size=group_size,
        scale_bytes=scale_bytes,
        zero_point_bits=zero_point_bits,
        max_num_batched_tokens=max_num_batched_tokens,
        max_num_seqs=max_num_seqs,
    )

    # --- per configuration (model, tp, weight dtype) and per (config, gpu) constants ----------
    cfg, per_gpu = [], []  # cfg: (model index, tp, pp, wd index, constants); per_gpu: [cfg][gpu]
    for mi, spec in enumerate(specs):
        for tp, pp in ((t, x) for t in tps for x in pps):
            try:
                check_parallel(spec, tp, pp)
            except ValueError:
                continue  # this model cannot use this tp (or pp)
            for wi, wd in enumerate(wds):
                cfg.append((mi, tp, pp, wi, _config_constants(spec, tp, pp, wd, opts)))
                per_gpu.append(
                    [_gpu_constants(hw, wd, tp * pp, runtime_reserve_bytes) for hw in hws]
                )
    if not cfg:
        if pps == [1]:
            raise ValueError(f"no tp in {tps} divides the heads of any model given")
        raise ValueError(f"no tp in {tps} with a pp in {pps} fits any model given")

    C, G, K, S, Bn = len(cfg), len(hws), len(kds), len(ns), len(bs_)

    def col(values, dtype):
        return np.asarray(values, dtype=dtype)

    # config-level arrays [C]
    spec_of = [specs[c[0]] for c in cfg]
    c_model = col([c[0] for c in cfg], np.int64)
    c_tp = col([c[1] for c in cfg], np.int64)
    c_pp = col([c[2] for c in cfg], np.int64)
    c_wd = col([c[3] for c in cfg], np.int64)

    def per_config(key):
        return col([c[4][key] for c in cfg], np.int64)

    def per_spec(fn, dtype=np.int64):
        return col([fn(s) for s in spec_of], dtype)

    # (config, gpu) arrays [C, G]
    def per_config_gpu(key, dtype=np.float64):
        return col([[g[key] for g in row] for row in per_gpu], dtype)

    # the grid, C order over [C, G, K, S, B]
    ci, gi, ki, si, bi = (a.ravel() for a in np.indices((C, G, K, S, Bn), dtype=np.int64))
    n = col(ns, np.int64)[si]
    B = col(bs_, np.int64)[bi]
    tp = c_tp[ci]
    win = per_spec(lambda s: s.sliding_window or 0)[ci]
    # K and V of one token in one layer on one GPU, per (config, KV dtype)
    kvl_tab = col(
        [
            [ac.kv_bytes_per_token_layer_gpu(s, c[1], kd) for kd in kds]
            for s, c in zip(spec_of, cfg, strict=True)
        ],
        np.int64,
    )
    kvl = kvl_tab[ci, ki]
    weights = per_config("weights")[ci]

    mem = core.memory(
        total=per_config_gpu("total", np.int64)[ci, gi],
        utilization=float(u),
        weights=per_config("stage_weights")[ci],
        activation=per_config("act")[ci],
        reserve=per_config_gpu("reserve", np.int64)[ci, gi],
        lf=per_config("lf")[ci],
        ls=per_config("ls")[ci],
        window=win,
        kv_bytes_per_layer=kvl,
        block_size=bsz,
        seq_len=n,
        batch=B,
    )

    # prompt and output per seq_len (default_output_tokens), and one sequence's prefill
    # attention FLOPs per (config, seq_len) from calc.attention, in float64 (no int64 overflow)
    s_n = col(ns, np.int64)
    s_out = col([output_tokens or default_output_tokens(x) for x in ns], np.int64)
    s_prompt = s_n - s_out
    pre_attn = np.stack(
        [
            prefill_attention_flops(s, s_prompt.astype(np.float64), minimum=np.minimum)
            for s in spec_of
        ]
    )
    lat = core.latency(
        tp=tp,
        batch=B.astype(np.float64),  # float64: B x P x layers x bytes can pass 2^63
        prompt_tokens=s_prompt.astype(np.float64)[si],
        output_tokens=s_out[si],
        weights=weights,
        expert_weights=per_config("experts")[ci],
        num_experts=per_spec(lambda s: s.num_local_experts, np.float64)[ci],
        experts_per_token=per_spec(lambda s: s.num_experts_per_tok, np.float64)[ci],
        matmul_params=per_spec(matmul_params, np.float64)[ci],
        flops_per_pair=per_spec(KINDS["full_attention"].flops_per_pair, np.float64)[ci],
        prefill_attention_flops=pre_attn[ci, si],
        layers=per_spec(lambda s: s.num_hidden_layers)[ci],
        lf=per_spec(lambda s: s.n_full_layers)[ci],
        ls=per_spec(lambda s: s.n_sliding_layers)[ci],
        window=win,
        kv_bytes_per_layer=kvl,
        hidden=per_spec(lambda s: s.hidden_size, np.float64)[ci],
        act_bytes=per_config("a")[ci],
        allreduces=per_spec(rl.allreduces_per_step, np.float64)[ci],
        peak=per_config_gpu("peak")[ci, gi] * mfu,
        bandwidth=per_config_gpu("bw")[ci, gi] * eff,
        link=per_config_gpu("link")[ci, gi] * ieff,
        latency_s=latency_s,
    )

    names = [s.name for s in specs]
    return pd.DataFrame(
        {
            "model": pd.Categorical.from_codes(c_model[ci], names),
            "gpu": pd.Categorical.from_codes(gi, [hw.name for hw in hws]),
            "tp": tp,
            "pp": c_pp[ci],
            "weight_dtype": pd.Categorical.from_codes(c_wd[ci], wds),
            "kv_dtype": pd.Categorical.from_codes(ki, kds),
            "seq_len": n,
            "batch": B,
            "output_tokens": s_out[si],
            "weight_bytes": per_config("stage_weights")[ci],
            "activation_bytes": per_config("act")[ci],
            "reserve_bytes": per_config_gpu("reserve", np.int64)[ci, gi],
            **{k: mem[k] for k in MEMORY_COLUMNS},
            **{k: lat[k] for k in LATENCY_COLUMNS},
            "decode_last_bound": pd.Categorical.from_codes(
                np.where(lat["decode_last"]["compute_bound"], 0, 1), ["compute", "memory"]
            ),
        }
    )


def _gpu_constants(hw: HardwareSpec, wd: str, gpus: int, reserve: int | None) -> dict:
    return {
        "total": hw.total_memory_bytes,
        "reserve": ac.reserve_bytes_per_gpu(gpus, reserve),
        "peak": hw.peak_flops_per_s(rl.default_compute_dtype(wd, hw)),
        "bw": hw.hbm_bandwidth_bytes_per_s,
        "link": hw.interconnect_bytes_per_s,
    }
