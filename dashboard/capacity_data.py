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
from calc.serving import inverse
from calc.serving.defaults import TOKENS_LINE_FROM, V1_DEFAULT_FROM, V1_XL_BATCH_FROM, VLLM_NEWEST
from calc.serving.defaults_sglang import SGLANG_NEWEST
from calc.serving.defaults_sglang import release_name as sglang_release_name
from calc.serving.defaults_sglang_2026 import GRAPH_BS_MRR_CAP_FROM, PCG_ON_FROM, SMALL_GPU_FROM
from calc.serving.engine import DEFAULT_VERSION
from calc.serving.layout import HYBRID_ALLOCATOR_FROM, MAMBA_HYBRID_FROM
from calc.serving.overheads import CUDAGRAPH_SUBTRACTED_FROM
from calc.serving.plan import (
    PP_CHECK_PER_RANK_FROM,
    EnginePlan,
    engine_plan,
)
from calc.sharding import unplannable
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


# --- the Engine section (calc.serving) ----------------------------------------------------------

ENGINES = {"vllm": "vLLM", "sglang": "SGLang", "kvcalc": "kvcalc's generic plan (above)"}
_V = ".".join  # (0, 8, 0) -> "0.8.0"


# the releases where calc.serving changes a rule (the constants it keys on), its default, and
# the V0 release of the committed start-up logs; a release between two behaves as the one before
ENGINE_VERSIONS = {
    "vllm": sorted(
        {
            "0.6.4",
            "0.11.0",  # the release of many committed logs
            DEFAULT_VERSION["vllm"],
            *(
                _V(map(str, v))
                for v in (
                    TOKENS_LINE_FROM,
                    V1_DEFAULT_FROM,
                    HYBRID_ALLOCATOR_FROM,
                    MAMBA_HYBRID_FROM,
                    PP_CHECK_PER_RANK_FROM,
                    CUDAGRAPH_SUBTRACTED_FROM,
                    V1_XL_BATCH_FROM,
                    VLLM_NEWEST,
                )
            ),
        },
        key=lambda t: tuple(map(int, t.split("."))),
    ),
    # the releases where SGLang's defaults change (calc/serving/defaults_sglang*.py): the tp
    # table, #7054's reserve, #10975's general rule, the prefill CUDA graph, the 20-35 GiB
    # tier, the graph batch capped by max_running_requests, and the newest read
    "sglang": ["0.4.6", "0.4.7.post1", "0.5.3.post1", "0.5.6.post2"]
    + [
        sglang_release_name(v)
        for v in (PCG_ON_FROM, SMALL_GPU_FROM, GRAPH_BS_MRR_CAP_FROM, SGLANG_NEWEST)
    ],
}


@st.cache_data(hash_funcs=_HASH, max_entries=128, show_spinner=False)
def generic_refusal(spec) -> str | None:
    """Why kvcalc's generic plan (the page above the Engine section) does not plan `spec`, in
    words that point to the engines' plans, or None when it does (calc.sharding)."""
    why = unplannable(spec)
    if why is None:
        return None
    return (
        f"{spec.label} has {why}, which kvcalc's generic plan does not model: this page plans "
        "it as vLLM or SGLang do, in the Engine section below (each engine's own rules)."
    )


def one_engine_plan(spec, hw, engine: str, **settings) -> EnginePlan:
    """calc.serving.plan.engine_plan for the page's settings (None: the version's default)."""
    return engine_plan(spec, hw, engine, **settings)


def engine_stack_frame(p: EnginePlan) -> pd.DataFrame:
    """Per-GPU memory as the engine accounts it: weights, activation peak, non-torch memory,
    CUDA graphs (when the version subtracts them), the KV cache, and the rest of the GPU's
    total ("free": what the engine leaves unused). Terms the plan does not have are left out."""
    parts = [
        ("weights", p.weights_bytes),
        ("activation peak", p.activation_bytes),
        ("non-torch", p.non_torch_bytes),
        ("CUDA graphs", p.cudagraph_bytes or None),
        ("KV cache", p.available_kv_cache_bytes),
    ]
    rows = [(c, int(b)) for c, b in parts if b is not None]
    rows.append(("free", p.total_memory_bytes - sum(b for _, b in rows)))
    df = pd.DataFrame(rows, columns=["category", "bytes"])
    df["GiB"] = df["bytes"] / GIB
    df["GB"] = df["bytes"] / GB
    df.insert(0, "gpu", p.gpu)
    return df


@st.cache_data(hash_funcs=_HASH, max_entries=64, show_spinner=False)
def engine_inverse_frame(spec, hw, engine: str, concurrency: float, **settings) -> pd.DataFrame:
    """calc.serving.inverse: the one setting that, changed alone, reaches `concurrency`
    requests of settings["max_model_len"] tokens (None: no value does)."""
    key = "gpu_memory_utilization" if engine == "vllm" else "mem_fraction_static"
    rows = [
        (key, inverse.utilization_for(spec, hw, engine, concurrency, **settings)),
        ("max_model_len", inverse.max_model_len_for(spec, hw, engine, concurrency, **settings)),
        ("tensor_parallel_size", inverse.tp_for(spec, hw, engine, concurrency, **settings)),
    ]
    return pd.DataFrame(rows, columns=["setting", "value"])
