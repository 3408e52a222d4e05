"""The capacity page's Engine section data (calc.serving): the engines and the releases offered,
one engine plan, the per-GPU memory stack as the engine accounts it, and the inverse queries.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from calc import units
from calc.serving import inverse
from calc.serving import sglang_pool_end as pe
from calc.serving import sglang_requests as sr
from calc.serving import sglang_spec as ss
from calc.serving import sglang_swa as swa
from calc.serving import vllm_dcp as dcp
from calc.serving import vllm_mla_block as mb
from calc.serving import vllm_spec as sd
from calc.serving.defaults import (
    TOKENS_LINE_FROM,
    V1_DEFAULT_FROM,
    V1_XL_BATCH_FROM,
    VLLM_NEWEST,
    sglang_version,
)
from calc.serving.defaults_sglang import SGLANG_NEWEST
from calc.serving.defaults_sglang import release_name as sglang_release_name
from calc.serving.defaults_sglang_2026 import GRAPH_BS_MRR_CAP_FROM, PCG_ON_FROM, SMALL_GPU_FROM
from calc.serving.engine import DEFAULT_VERSION
from calc.serving.layout import HYBRID_ALLOCATOR_FROM
from calc.serving.overheads import CUDAGRAPH_SUBTRACTED_FROM
from calc.serving.plan import ONE_LINE_FROM, PP_CHECK_PER_RANK_FROM, EnginePlan, engine_plan
from calc.serving.sglang_hybrid import GDN_FROM, PADDING_SLOT_FROM, RATIO_FROM
from calc.serving.vllm_mamba import ALIGN_FROM, ALL_CHOICE_UNTIL, ALL_MODE_UNTIL, MODE_FROM
from calc.serving.vllm_mamba import GDN_FROM as VLLM_GDN_FROM
from calc.serving.vllm_v2 import V2_ALL_MODE_FALLBACK
from calc.sharding import unplannable
from dashboard.capacity_data import _HASH
from dashboard.data import GB, GIB

MLA_BLOCK_CHANGES = (
    mb.SM100_FROM, mb.MODULO_FROM, mb.FAMILY_FROM, mb.FLASHINFER_FROM, mb.PREFERRED_FROM,
    mb.PLURAL_FROM,
)  # fmt: skip
DCP_CHANGES = (dcp.GQA_FROM, dcp.TP_CHECK_FROM, dcp.FP8_MLA_UNTIL)
SPEC_CHANGES = (
    sd.MTP_FROM, sd.MAMBA2_CONV_FROM, sd.SPEC_PAGES_FROM, sd.ALL_MODE_SPEC_PAGES_FROM,
    *sd.MTP_FAMILIES.values(),
)  # fmt: skip
REQUESTS_CHANGES = (
    sr.PLUS_ONE_UNTIL, sr.ZERO_FROM, sr.RESOLVE_FROM, sr.MAMBA_ZERO_FROM, sr.GIVEN_HALF_FROM,
    sr.QWEN35_TEXT_EXTRA_FROM, sr.GIVEN_AT_LEAST_ONE_FROM, *sr.RATIO_5_IN,
)  # fmt: skip
ENGINES = {"vllm": "vLLM", "sglang": "SGLang", "kvcalc": "kvcalc's generic plan (above)"}
_V = ".".join  # (0, 8, 0) -> "0.8.0"


# the releases where calc.serving changes a rule (the constants it keys on), its default, and
# the V0 release of the committed start-up logs; a release between two behaves as the one before
ENGINE_VERSIONS = {
    "vllm": sorted(
        {
            "0.6.4",
            "0.11.0",  # the release of many committed logs
            "0.25.1",  # the MTP log's (benchmarks/engine_logs/vllm-niushuai-*)
            "0.33.0",  # the last release of the 16-token block and profile-estimate sizing
            DEFAULT_VERSION["vllm"],
            *(
                _V(map(str, v))
                for v in (
                    TOKENS_LINE_FROM,
                    V1_DEFAULT_FROM,
                    HYBRID_ALLOCATOR_FROM,
                    VLLM_GDN_FROM,
                    ALIGN_FROM,  # linear layers' prefix-cache pages
                    ALL_MODE_UNTIL,
                    MODE_FROM,  # --mamba-cache-mode
                    V2_ALL_MODE_FALLBACK[0],
                    ALL_CHOICE_UNTIL,
                    PP_CHECK_PER_RANK_FROM,
                    CUDAGRAPH_SUBTRACTED_FROM,
                    V1_XL_BATCH_FROM,
                    VLLM_NEWEST,
                    *MLA_BLOCK_CHANGES,  # the dense MLA block (vllm_mla_block)
                    *DCP_CHANGES,  # decode context parallelism (vllm_dcp)
                    *SPEC_CHANGES,  # speculative decoding (vllm_spec)
                    ONE_LINE_FROM,  # the token and concurrency lines joined
                )
            ),
        },
        key=lambda t: tuple(map(int, t.split("."))),
    ),
    # the releases where SGLang's defaults change (calc/serving/defaults_sglang*.py): the tp
    # table, #7054's reserve, #10975's general rule, the prefill CUDA graph, the 20-35 GiB
    # tier, the graph batch capped by max_running_requests, and the newest read; and where its
    # mamba pool changes (calc/serving/sglang_hybrid.py): Qwen3-Next's first, the memory ratio,
    # the pool's padding slot; the pools' tensors and gpt-oss's sliding-window pool
    "sglang": sorted(
        {"0.4.6", "0.4.7.post1", "0.5.3.post1", "0.5.6.post2"}
        | {
            sglang_release_name(v)
            for v in (
                PCG_ON_FROM,
                SMALL_GPU_FROM,
                GRAPH_BS_MRR_CAP_FROM,
                SGLANG_NEWEST,
                GDN_FROM,
                RATIO_FROM,
                PADDING_SLOT_FROM,
                *REQUESTS_CHANGES,  # max_running_requests (sglang_requests)
                *ss.SPEC_CHANGES,  # speculative decoding (sglang_spec)
                *pe.POOL_END_CHANGES,  # the pools' tensors (sglang_pool_end)
                swa.GPT_OSS_SWA_FROM,  # gpt-oss's sliding-window pool (sglang_swa)
                swa.GPT_OSS_TRTLLM_OFF_UNTIL,
            )
        },
        key=sglang_version,
    ),
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


def kv_cache_bytes(p: EnginePlan) -> int:
    """The KV cache the engine keeps: the measured one with vLLM 0.34's extensible cache, the
    pools SGLang allocates under a binding --max-total-tokens."""
    for kept in (p.measured_kv_cache_bytes, p.allocated_kv_cache_bytes):
        if kept is not None:
            return kept
    return p.available_kv_cache_bytes


def pool_tables_bytes(p: EnginePlan) -> int | None:
    """SGLang: what its pools take beyond the KV budget (the request-to-token table, the free
    list, the segments' rounding; from 0.5.6 the RoPE tables' rebuild), out of the memory the
    fraction leaves (calc.serving.sglang_pool_end); None where not modelled."""
    if p.pool_allocated_bytes is None:
        return None
    return p.pool_allocated_bytes - kv_cache_bytes(p)


def kv_cache_help(p: EnginePlan) -> str:
    ext = " (measured after warmup: vLLM's extensible KV cache)" if p.extensible_kv_cache else ""
    if p.allocated_kv_cache_bytes is not None:
        ext = (
            f" (the pools --max-total-tokens leaves, of a {p.available_kv_cache_bytes:,}-byte "
            "budget: the rest stays free)"
        )
    return f"{kv_cache_bytes(p):,} bytes{ext}"


def stack_caption(p: EnginePlan) -> str:
    """What the stack's "free" is, by where the KV memory came from; SGLang's pool tables and
    the free memory its "Memory pool end" line prints, where kvcalc has them."""
    tables = pool_caption(p)
    return f"{_free_caption(p)} {tables}" if tables else _free_caption(p)


def pool_caption(p: EnginePlan) -> str:
    if p.pool_allocated_bytes is None:
        return ""
    out = (
        f"Pool tables: {units.iec_bytes(pool_tables_bytes(p))} beyond the KV budget (the "
        "request-to-token table, the free list, the buffers' 2 MiB segments)"
    )
    if p.pool_end_free_bytes is None:
        return out + "."
    return (
        f'{out}; SGLang\'s "Memory pool end" leaves {p.pool_end_free_bytes / GIB:.2f} GiB '
        "for CUDA graphs and activations."
    )


def _free_caption(p: EnginePlan) -> str:
    if p.allocated_kv_cache_bytes is not None:
        return (
            "KV cache: the pools --max-total-tokens leaves; the rest of the KV budget is free "
            "(SGLang does not allocate it)."
        )
    if p.source == "given":
        return "Planned from the given available memory: free is the rest, not derived."
    if p.source == "kv_cache_memory_bytes":
        return (
            "KV cache as --kv-cache-memory-bytes sets it, not profiled: free is the rest, from "
            "which the activation peak and CUDA graphs must still come."
        )
    return "free: what the engine leaves unused (1 − its memory fraction)."


def inverse_step(p: EnginePlan) -> str:
    return "whole MiB" if p.source == "kv_cache_memory_bytes" else "to 0.01"


def engine_stack_frame(p: EnginePlan) -> pd.DataFrame:
    """Per-GPU memory as the engine accounts it: weights (from SGLang 0.5.14 the draft's too),
    activation peak, non-torch memory, CUDA graphs (when the version subtracts them), the KV
    cache, SGLang's pool tables (pool_tables_bytes: then "free" is its "Memory pool end"
    figure plus the load's own extra), and the rest of the GPU's total ("free": what the engine leaves unused). Terms the
    plan does not have are left out. vLLM 0.34's extensible KV cache: the measured KV cache
    (calc.serving.vllm_extensible), its CUDA graphs resident, the activation peak kept free."""
    parts = [
        ("weights", p.weights_bytes),
        ("draft weights", p.draft_weights_bytes),
        ("activation peak", p.activation_bytes),
        ("non-torch", p.non_torch_bytes),
        ("CUDA graphs", p.cudagraph_bytes or None),
        ("KV cache", kv_cache_bytes(p)),
        ("pool tables", pool_tables_bytes(p)),
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
    rows = [
        inverse.memory_setting_for(spec, hw, engine, concurrency, **settings),
        ("max_model_len", inverse.max_model_len_for(spec, hw, engine, concurrency, **settings)),
        ("tensor_parallel_size", inverse.tp_for(spec, hw, engine, concurrency, **settings)),
    ]
    return pd.DataFrame(rows, columns=["setting", "value"])
