"""Capacity-planner tables for the dashboard: cached calls into calc.capacity / calc.plan.

Every number is a calc result (plan, sweep_plans, fit_table); grids of one deployment
(context lengths x batches) are one calc.sweep_plans call, the same arithmetic as plan() run
over arrays (calc.plan_core), laid out one row per point; results are cached per input.
Sizes: bytes, plus GiB (2^30) and GB (10^9) columns for axes and tooltips.
The Engine section's figures are calc.serving's (engine_plan, inverse), laid out the same way.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import streamlit as st

import calc
from calc.capacity import memory_plan
from calc.fit import fit_table
from calc.hardware import HardwareSpec, list_hardware, load_hardware
from calc.plan import Plan, plan
from calc.plan_sweep import sweep_plans
from calc.tp import pick_tp
from calc.units import iec_bytes
from dashboard.data import GB, GIB

_HASH = {
    calc.ModelSpec: lambda s: s.model_dump_json(),
    HardwareSpec: lambda h: h.model_dump_json(),
}
CUSTOM_GPU = "custom"
BATCHES = tuple(2**k for k in range(9))  # 1 .. 256 sequences


def gpu_options() -> list[str]:
    return [*list_hardware(), CUSTOM_GPU]


def memory_source(hw: HardwareSpec) -> str:
    """Where a GPU's memory figure comes from: CUDA's total, the driver's, or the nominal size."""
    if hw.cuda_total_gib is not None:
        smi = f", nvidia-smi {hw.driver_total_mib:,} MiB" if hw.driver_total_mib else ""
        return f"CUDA total {hw.cuda_total_gib:g} GiB (the driver keeps the rest{smi})"
    if hw.driver_total_mib is not None:
        return f"nvidia-smi total {hw.driver_total_mib:,} MiB"
    nominal = hw.memory_published or f"{hw.memory_size:g} {hw.memory_unit}"
    return (
        f"nominal {nominal} read as {hw.memory_size:g} {hw.memory_unit} (no driver total published)"
    )


def gpu_label(name: str) -> str:
    """'NVIDIA H100 SXM5 80GB: 79.19 GiB (CUDA total)': the memory a plan uses, and whence."""
    if name == CUSTOM_GPU:
        return "custom GPU"
    hw = load_hardware(name)
    return f"{hw.label}: {iec_bytes(hw.total_memory_bytes)} ({hw.total_memory_source})"


def custom_gpu(memory_gib: float, bandwidth_gb_per_s: float, bf16_tflops: float, link_gb_per_s):
    """A HardwareSpec from four published-style figures (dense bf16 TFLOP/s)."""
    return HardwareSpec(
        name=CUSTOM_GPU,
        display_name=f"custom GPU ({memory_gib:g} GiB)",
        memory_size=memory_gib,
        memory_unit="GiB",
        hbm_bandwidth_gb_per_s=bandwidth_gb_per_s,
        peak_tflops={"bf16": bf16_tflops, "fp16": bf16_tflops},
        interconnect_gb_per_s=link_gb_per_s,
    )


@st.cache_data(hash_funcs=_HASH, max_entries=128, show_spinner=False)
def one_plan(spec, hw, seq_len: int, batch: int, **opts) -> Plan:
    return plan(spec, hw, seq_len=seq_len, batch=batch, **opts)


def breakdown_frame(p: Plan) -> pd.DataFrame:
    """Per-GPU memory by category (MemoryPlan.to_frame), in bytes, GiB and GB."""
    df = p.memory.to_frame()
    df["GiB"] = df["bytes"] / GIB
    df["GB"] = df["bytes"] / GB
    df.insert(0, "gpu", p.memory.gpu)
    return df


def _sweep(
    spec, hw, seq_lens, batches, *, gpus=1, tp=None, weight_dtype="bf16", kv_dtype="bf16", **opts
) -> pd.DataFrame:
    """calc.sweep_plans for one deployment (the page's gpus, tp, dtypes) over seq_lens x
    batches: one vectorized evaluation of the plan, rows in that order."""
    tp = gpus if tp is None else tp
    if gpus % tp:  # what plan() says; sweep_plans only knows tp and pp
        raise ValueError(f"'gpus' must be a multiple of tp={tp} (pp = gpus / tp): got {gpus}")
    return sweep_plans(
        [spec],
        [hw],
        tps=[tp],
        pps=[gpus // tp],
        weight_dtypes=[weight_dtype],
        kv_dtypes=[kv_dtype],
        seq_lens=list(seq_lens),
        batches=list(batches),
        **opts,
    )


@st.cache_data(hash_funcs=_HASH, max_entries=64, show_spinner=False)
def concurrency_frame(spec, hw, seq_lens: tuple[int, ...], **opts) -> pd.DataFrame:
    """How many sequences of each context length fit at once (calc.sweep_plans over lengths)."""
    df = _sweep(spec, hw, seq_lens, (1,), **opts)
    return df[["seq_len", "max_concurrent_seqs", "kv_tokens"]].reset_index(drop=True)


@st.cache_data(hash_funcs=_HASH, max_entries=64, show_spinner=False)
def fit_grid_frame(
    spec, hw, seq_lens: tuple[int, ...], batches: tuple[int, ...], **opts
) -> pd.DataFrame:
    """Fit / no fit for each context x batch (calc.sweep_plans over the grid)."""
    df = _sweep(spec, hw, seq_lens, batches, **opts)
    return pd.DataFrame(
        {
            "seq_len": df["seq_len"],
            "batch": df["batch"],
            "fits": df["fits"].map({True: "fits", False: "no fit"}),
            "kv_cache_GiB": df["kv_cache_bytes"] / GIB,
            "shortfall_GiB": df["shortfall_bytes"] / GIB,
            "kv_cache_bytes": df["kv_cache_bytes"],
            "shortfall_bytes": df["shortfall_bytes"],
        }
    )


@st.cache_data(hash_funcs=_HASH, max_entries=64, show_spinner=False)
def throughput_frame(spec, hw, seq_len: int, batches: Sequence[int], **opts) -> pd.DataFrame:
    """Roofline TTFT, TPOT and tokens/s at each batch (calc.sweep_plans over batches)."""
    df = _sweep(spec, hw, (seq_len,), tuple(batches), **opts)
    return pd.DataFrame(
        {
            "batch": df["batch"],
            "ttft_ms": 1000 * df["ttft_s"],
            "tpot_ms": 1000 * df["tpot_s"],
            "tokens_per_s_total": df["tokens_per_s_total"],
            "decode_bound": df["decode_last_bound"].astype(str),
            "fits": df["fits"].map({True: "fits", False: "no fit"}),
        }
    )


@st.cache_data(hash_funcs=_HASH, max_entries=64, show_spinner=False)
def fewest_frame(spec, hws: tuple[HardwareSpec, ...], seq_len: int, batch: int, **opts):
    """Fewest GPUs of each kind that hold batch x seq_len (calc.fit.fit_table)."""
    df = fit_table(spec, seq_len=seq_len, batch=batch, gpus=list(hws), **opts).to_frame()
    df.insert(1, "label", [h.label for h in hws])
    df["weights_GiB_per_gpu"] = df["weight_bytes"] / GIB
    return df


@st.cache_data(hash_funcs=_HASH, max_entries=64, show_spinner=False)
def max_context_frame(specs: tuple, hw, gpus: int, kv_dtype: str, weight_dtype: str):
    """Longest single-sequence context each model fits on `gpus` x `hw`, at the largest tensor
    parallelism that model allows there (calc.tp.pick_tp; the rest pipeline stages)."""
    rows = []
    for s in specs:
        tp = pp = None
        try:
            tp, _ = pick_tp(s, gpus)
            pp = gpus // tp
            m = memory_plan(
                s,
                hw,
                gpus=gpus,
                tp=tp,
                batch=1,
                seq_len=1,
                kv_dtype=kv_dtype,
                weight_dtype=weight_dtype,
            )
            ctx, note = (
                m.max_context_tokens,
                ("unbounded (every layer slides)" if m.max_context_tokens is None else ""),
            )
        except ValueError as e:
            ctx, note = None, calc.format_error(e)
        rows.append(
            {
                "model": s.name,
                "label": s.label,
                "tp": tp,
                "pp": pp,
                "max_context_tokens": ctx,
                "context_tokens": s.max_position_embeddings,
                "note": note,
            }
        )
    return pd.DataFrame(rows)
