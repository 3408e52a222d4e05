"""The Model page's section for a quantized checkpoint (a config.json with a quantization_config):
its method and schemes, the bytes it stores by component and part (calc.weight_bytes_breakdown)
and the total beside the same model in bf16 (calc.weight_bytes).

Tables only arrange calc's results as text (no formula here). Module names in the skip list come
from the user's file, so they are shown with st.text (never Markdown) and escaped in tables.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

import calc
from calc import units
from dashboard import tables, ui

PART_NAMES = {  # calc.quant.PARTS, as a reader says them
    "packed": "packed weights",
    "scales": "scales",
    "zeros": "zero points",
    "g_idx": "g_idx (act order)",
    "meta": "bookkeeping",  # quant_map / quant_state JSON, weight_shape, weight_format
    "act_scales": "activation scales",
    "bias": "bias",
}


def _granularity(s) -> str:
    if s.strategy == "block" and s.block_size:
        return f"block {s.block_size[0]} x {s.block_size[1]}"
    if s.strategy in ("group", "tensor_group"):
        return f"group {s.group_size}" if s.group_size else "channel (one group a row)"
    return s.strategy


def _scale_dtype(s) -> str:
    if s.layout == "bnb-4bit" and s.double_quant:  # absmax codes + float32 nested_absmax
        return "uint8 + fp32 nested"
    return s.scale_dtype


def _details(s) -> str:
    bits = []
    if s.quant_type:
        bits.append(s.quant_type)
    if s.layout == "bnb-4bit":
        bits.append("double quant" if s.double_quant else "no double quant")
        bits.append(f"storage {s.storage_dtype}")
    if s.input_scale:
        bits.append(f"static input scales ({s.input_scale})")
    if s.targets != ("Linear",):
        bits.append("targets " + ", ".join(s.targets))
    return "; ".join(bits) or tables.DASH


def scheme_table(q: calc.quant.QuantConfig) -> pd.DataFrame:
    """One row per scheme: layout, bits, granularity, zero points, act order, scale dtype."""
    rows = [
        (
            s.layout,
            str(s.bits),
            _granularity(s),
            tables.yes_no(not s.symmetric),
            tables.yes_no(s.act_order),
            _scale_dtype(s),
            _details(s),
        )
        for s in q.schemes
    ]
    cols = ["layout", "bits", "scales per", "zero points", "act order", "scale dtype", "details"]
    return pd.DataFrame(rows, columns=cols)


def parts_table(spec: calc.ModelSpec) -> pd.DataFrame:
    """component | stored as | bytes | GB | GiB, one row per non-zero label of
    calc.weight_bytes_breakdown, then the total (calc.weight_bytes)."""
    q = spec.quantization
    base = q.dtype if q is not None else "bf16"
    rows = []
    for label, n in calc.weight_bytes_breakdown(spec).items():
        if not n:
            continue
        component, _, part = label.partition(":")
        how = PART_NAMES.get(part, part) if part else f"unquantized ({base})"
        if part == "bias":
            how = f"bias ({base})"
        if label == "kv_scales":
            how = "KV-cache scales"
        rows.append((component, how, n))
    rows.append(("total", "", calc.weight_bytes(spec)))
    return pd.DataFrame(
        [(c, h, tables.num(n), units.si_bytes(n), units.iec_bytes(n)) for c, h, n in rows],
        columns=["component", "stored as", "bytes", "GB", "GiB"],
    )


def totals_table(spec: calc.ModelSpec) -> pd.DataFrame:
    """The checkpoint as stored beside the same model in bf16, in bytes, GB and GiB."""
    stored = calc.weight_bytes(spec)
    bf16 = calc.weight_bytes(spec.replace(quantization=None), "bf16")
    rows = [("as stored", stored), ("in bf16", bf16)]
    out = [(w, tables.num(n), units.si_bytes(n), units.iec_bytes(n)) for w, n in rows]
    out.append(("stored / bf16", units.percent(stored / bf16), "", ""))
    return pd.DataFrame(out, columns=["checkpoint", "bytes", "GB", "GiB"])


def show(spec: calc.ModelSpec) -> None:
    """The section; nothing for an unquantized model. Errors: one st.error naming the field."""
    q = spec.quantization
    if q is None:
        return
    with ui.guarded():
        st.subheader(f"Quantized checkpoint: {q.method}", anchor=False)
        ui.caption(
            f"Weights stored as {q.method} (base dtype {q.dtype} for everything left "
            "unquantized); bytes are what the checkpoint's safetensors hold (calc.weight_bytes)."
        )
        ui.table(scheme_table(q), right=("bits",))
        skipped = q.ignore or ()
        left, right = st.columns([2, 3])
        with left:
            st.markdown("**Total beside bf16**")
            ui.table(totals_table(spec), right=("bytes", "GB", "GiB"))
        with right:
            with st.expander(f"Modules kept unquantized by the config ({len(skipped)})"):
                st.text("\n".join(skipped) if skipped else "none listed")
        st.markdown("**Stored bytes by component and part** (sum = total)")
        ui.table(parts_table(spec), right=("bytes", "GB", "GiB"))
