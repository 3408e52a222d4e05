"""The attention page's tables: calc.attention_cost over a grid of context lengths, wide and long.

Like data.py, no formulas: one wide row per context length from calc.attention_cost, melted into
one row per (seq_len, series) for attention_charts.py. Split from data.py.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

import calc
from dashboard.data import _HASH, GIB, arrow_safe

ATTN_SERIES = {
    "prefill attention, full mask": "prefill_attention_flops_full",
    "prefill attention, causal": "prefill_attention_flops_causal",
    "prefill forward, whole model": "prefill_forward_flops",
    "decode attention, 1 token": "decode_attention_flops",
    "decode forward, 1 token": "decode_forward_flops",
}
MEMORY_SERIES = {
    "materialized scores (B·H·n²)": "score_matrix_bytes",
    "fused kernel (output + row stats)": "fused_attention_bytes",
}


@st.cache_data(hash_funcs=_HASH, max_entries=64, show_spinner=False)
def attention_frame(
    spec: calc.ModelSpec, seq_lens: tuple[int, ...], batch: int, dtype: str
) -> pd.DataFrame:
    """calc.attention_cost at each context length: one wide row per n."""
    rows = [calc.attention_cost(spec, n, batch, dtype).model_dump() for n in seq_lens]
    df = arrow_safe(pd.DataFrame(rows))
    df["beyond_context"] = df["seq_len"] > spec.max_position_embeddings
    return df


SHARE_SERIES = {"prefill (causal)": "attention_share_prefill", "decode": "attention_share_decode"}


@st.cache_data(hash_funcs=_HASH, max_entries=64, show_spinner=False)
def attention_long_frames(
    spec: calc.ModelSpec, seq_lens: tuple[int, ...], batch: int, dtype: str
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """FLOPs, one layer's memory (bytes and GiB) and attention's share, one row per
    (seq_len, series), each marked beyond_context past the model's own context."""
    df = attention_frame(spec, seq_lens, batch, dtype)
    flops = long_form(df, ATTN_SERIES, "flops")
    mem = long_form(df, MEMORY_SERIES, "bytes")
    mem["GiB"] = mem["bytes"] / GIB
    share = long_form(df, SHARE_SERIES, "share")
    for frame in (flops, mem, share):
        frame["beyond_context"] = frame["seq_len"] > spec.max_position_embeddings
    return flops, mem, share


def long_form(df: pd.DataFrame, series: dict[str, str], value: str) -> pd.DataFrame:
    """Wide columns -> one row per (seq_len, series) for a multi-line chart."""
    out = df[["seq_len", *series.values()]].melt(
        id_vars="seq_len", var_name="column", value_name=value
    )
    out.insert(1, "series", out["column"].map({c: s for s, c in series.items()}))
    return out.drop(columns="column")
