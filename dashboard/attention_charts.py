"""The attention page's charts: FLOPs, one layer's memory and attention's share of the forward,
over a log2 token axis (charts._log_lines draws them). Split from charts.py; same conventions.
"""

from __future__ import annotations

import altair as alt
import pandas as pd

from dashboard.charts import _log_lines


def flops_chart(df: pd.DataFrame, context: int | None = None) -> alt.LayerChart:
    """Long form: seq_len, series, flops."""
    tips = [alt.Tooltip("series:N"), alt.Tooltip("seq_len:Q", format=",~f")]
    tips.append(alt.Tooltip("flops:Q", title="FLOPs", format=".4~e"))
    return _log_lines(
        df, "flops", "FLOPs (log scale, SI prefixes)", "series", tips, context=context
    )


def memory_chart(df: pd.DataFrame, context: int | None = None) -> alt.LayerChart:
    """Long form: seq_len, series, bytes, GiB (one layer's attention memory)."""
    tips = [alt.Tooltip("series:N"), alt.Tooltip("seq_len:Q", format=",~f")]
    tips += [alt.Tooltip("GiB:Q", format=",.4f"), alt.Tooltip("bytes:Q", format=",~f")]
    title = "one layer (GiB, log scale)"
    return _log_lines(
        df, "GiB", title, "series", tips, y_format="~g", context=context, legend_columns=1
    )


def share_chart(df: pd.DataFrame, context: int | None = None) -> alt.LayerChart:
    """Long form: seq_len, series, share (0..1) of attention in the forward FLOPs."""
    tips = [alt.Tooltip("series:N"), alt.Tooltip("seq_len:Q", format=",~f")]
    tips.append(alt.Tooltip("share:Q", format=".2%"))
    title = "attention share of forward FLOPs"
    domain = alt.Scale(domain=[0, 1])
    return _log_lines(
        df,
        "share",
        title,
        "series",
        tips,
        context=context,
        y_scale=domain,
        y_format="%",
        legend_columns=1,
    )
