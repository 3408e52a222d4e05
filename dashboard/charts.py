"""Chart builders: pure `DataFrame -> alt.Chart`, no Streamlit, no calc.

Each builder draws the columns data.py produces; every mark has a tooltip, every axis names its
unit (GiB = 2^30 bytes; FLOPs are counts, 2 per multiply-add). Tested in
tests/test_dashboard_charts.py against the encodings they promise (log axes, tooltips).

>>> import pandas as pd
>>> df = pd.DataFrame({"seq_len": [1, 2], "kv_cache_GiB": [1.0, 2.0], "label": ["a", "a"]})
>>> kv_context_chart(df).to_dict()["encoding"]["x"]["scale"]
{'base': 2, 'type': 'log'}
"""

from __future__ import annotations

import altair as alt
import pandas as pd

# Token axes tick at powers of two and read 128, 1K, 4K, 128K, 1M (K = 1024 tokens).
TOKEN_LABEL = (
    "datum.value >= 1048576 ? format(datum.value / 1048576, '~g') + 'M' : "
    "datum.value >= 1024 ? format(datum.value / 1024, '~g') + 'K' : format(datum.value, '~g')"
)
PALETTE = alt.Scale(scheme="tableau10")  # distinct hues; the default theme's blues blur


def token_axis(df: pd.DataFrame, x: str = "seq_len") -> alt.Axis:
    lo, hi = int(df[x].min()), int(df[x].max())
    ticks = [2**k for k in range(max(lo, 1).bit_length() - 1, hi.bit_length()) if lo <= 2**k <= hi]
    return alt.Axis(values=ticks, labelExpr=TOKEN_LABEL, title="context length (tokens, log scale)")


def _log_lines(
    df: pd.DataFrame,
    y: str,
    y_title: str,
    color: str,
    tooltip: list,
    *,
    x: str = "seq_len",
    log_y: bool = True,
    y_format: str = "~s",
    legend_columns: int = 3,
) -> alt.Chart:
    y_scale = alt.Scale(type="log") if log_y else alt.Scale(zero=True)
    return (
        alt.Chart(df)
        .mark_line(point=True)
        .encode(
            x=alt.X(f"{x}:Q", scale=alt.Scale(type="log", base=2), axis=token_axis(df, x)),
            y=alt.Y(f"{y}:Q", scale=y_scale, axis=alt.Axis(title=y_title, format=y_format)),
            color=alt.Color(
                f"{color}:N",
                title=None,
                scale=PALETTE,
                sort=None,
                legend=alt.Legend(orient="bottom", columns=legend_columns, labelLimit=320),
            ),
            tooltip=tooltip,
        )
    )


# --- model ------------------------------------------------------------------------------------


def params_chart(df: pd.DataFrame) -> alt.Chart:
    """Columns: component, params, share. One horizontal bar per component."""
    return (
        alt.Chart(df)
        .mark_bar()
        .encode(
            x=alt.X("params:Q", axis=alt.Axis(title="parameters", format="~s")),
            y=alt.Y("component:N", sort=list(df["component"]), title=None),
            tooltip=[
                alt.Tooltip("component:N"),
                alt.Tooltip("params:Q", format=","),
                alt.Tooltip("share:Q", format=".2%"),
            ],
        )
    )


# --- KV cache ---------------------------------------------------------------------------------


def kv_context_chart(df: pd.DataFrame) -> alt.Chart:
    """Columns: seq_len, kv_cache_GiB, label (+ kv_cache_bytes, kv_cache_GB for tooltips)."""
    tips = [alt.Tooltip("label:N", title="model"), alt.Tooltip("seq_len:Q", format=",")]
    tips += [
        alt.Tooltip(f"{c}:Q", format=f)
        for c, f in (("kv_cache_GiB", ",.3f"), ("kv_cache_GB", ",.3f"), ("kv_cache_bytes", ","))
        if c in df
    ]
    return _log_lines(df, "kv_cache_GiB", "KV cache (GiB, log scale)", "label", tips, y_format="~g")


def variants_chart(df: pd.DataFrame) -> alt.Chart:
    """Columns: variant, kv_heads, kv_cache_GiB, savings. One bar per MHA / GQA / MQA."""
    return (
        alt.Chart(df)
        .mark_bar()
        .encode(
            x=alt.X("variant:N", sort=list(df["variant"]), title=None, axis=alt.Axis(labelAngle=0)),
            y=alt.Y("kv_cache_GiB:Q", axis=alt.Axis(title="KV cache (GiB)")),
            color=alt.Color("variant:N", legend=None, scale=PALETTE, sort=None),
            tooltip=[
                alt.Tooltip("variant:N"),
                alt.Tooltip("kv_heads:Q", title="KV heads"),
                alt.Tooltip("kv_cache_GiB:Q", format=",.3f"),
                alt.Tooltip("savings:Q", title="savings 1 − G/H", format=".2%"),
            ],
        )
    )


# --- attention --------------------------------------------------------------------------------


def flops_chart(df: pd.DataFrame) -> alt.Chart:
    """Long form: seq_len, series, flops."""
    tips = [alt.Tooltip("series:N"), alt.Tooltip("seq_len:Q", format=",")]
    tips.append(alt.Tooltip("flops:Q", title="FLOPs", format=".4~e"))
    return _log_lines(df, "flops", "FLOPs (log scale)", "series", tips)


def memory_chart(df: pd.DataFrame) -> alt.Chart:
    """Long form: seq_len, series, bytes, GiB (one layer's attention memory)."""
    tips = [alt.Tooltip("series:N"), alt.Tooltip("seq_len:Q", format=",")]
    tips += [alt.Tooltip("GiB:Q", format=",.4f"), alt.Tooltip("bytes:Q", format=",")]
    return _log_lines(
        df, "GiB", "one layer (GiB, log scale)", "series", tips, y_format="~g", legend_columns=1
    )


def share_chart(df: pd.DataFrame) -> alt.Chart:
    """Long form: seq_len, series, share (0..1) of attention in the forward FLOPs."""
    tips = [alt.Tooltip("series:N"), alt.Tooltip("seq_len:Q", format=",")]
    tips.append(alt.Tooltip("share:Q", format=".2%"))
    chart = _log_lines(
        df, "share", "attention share of FLOPs", "series", tips, log_y=False, legend_columns=1
    )
    return chart.encode(
        y=alt.Y(
            "share:Q",
            scale=alt.Scale(domain=[0, 1]),
            axis=alt.Axis(title="attention share of forward FLOPs", format="%"),
        )
    )


# --- compare ----------------------------------------------------------------------------------


def bars_by_model(df: pd.DataFrame, value: str, title: str, fmt: str = ",") -> alt.Chart:
    """Columns: label, `value`. One horizontal bar per model."""
    return (
        alt.Chart(df)
        .mark_bar()
        .encode(
            x=alt.X(f"{value}:Q", axis=alt.Axis(title=title, format="~s")),
            y=alt.Y("label:N", sort="-x", title=None),
            tooltip=[alt.Tooltip("label:N", title="model"), alt.Tooltip(f"{value}:Q", format=fmt)],
        )
    )


# --- capacity ---------------------------------------------------------------------------------

FIT = alt.Scale(domain=["fits", "no fit"], range=["#59a14f", "#e15759"])


def memory_breakdown_chart(df: pd.DataFrame) -> alt.Chart:
    """Columns: gpu, category, bytes, GiB, GB. One stacked bar: the GPU's memory, per GPU."""
    order = list(df["category"])
    return (
        alt.Chart(df.assign(order=range(len(df))))
        .mark_bar()
        .encode(
            x=alt.X("GiB:Q", stack="zero", axis=alt.Axis(title="memory per GPU (GiB)")),
            y=alt.Y("gpu:N", title=None),
            color=alt.Color(
                "category:N",
                sort=order,
                scale=PALETTE,
                title=None,
                legend=alt.Legend(orient="bottom", columns=6),
            ),
            order=alt.Order("order:Q"),
            tooltip=[
                alt.Tooltip("category:N"),
                alt.Tooltip("GiB:Q", format=",.2f"),
                alt.Tooltip("GB:Q", format=",.2f"),
                alt.Tooltip("bytes:Q", format=","),
            ],
        )
        .properties(height=alt.Step(56))
    )


def concurrency_chart(df: pd.DataFrame) -> alt.Chart:
    """Columns: seq_len, max_concurrent_seqs (+ kv_tokens)."""
    tips = [alt.Tooltip("seq_len:Q", format=","), alt.Tooltip("max_concurrent_seqs:Q")]
    if "kv_tokens" in df:
        tips.append(alt.Tooltip("kv_tokens:Q", title="KV pool (tokens)", format=","))
    return (
        alt.Chart(df)
        .mark_line(point=True, color="#4e79a7")
        .encode(
            x=alt.X("seq_len:Q", scale=alt.Scale(type="log", base=2), axis=token_axis(df)),
            y=alt.Y(
                "max_concurrent_seqs:Q",
                scale=alt.Scale(type="symlog"),
                axis=alt.Axis(title="max concurrent sequences (symlog)"),
            ),
            tooltip=tips,
        )
    )


def fit_heatmap(df: pd.DataFrame) -> alt.Chart:
    """Columns: seq_len, batch, fits ("fits" / "no fit"), kv_cache_GiB, shortfall_GiB."""
    return (
        alt.Chart(df)
        .mark_rect(stroke="white", strokeWidth=1)
        .encode(
            x=alt.X("seq_len:O", title="context length (tokens)", axis=alt.Axis(labelAngle=0)),
            y=alt.Y("batch:O", sort="descending", title="batch (sequences)"),
            color=alt.Color("fits:N", scale=FIT, title=None, legend=alt.Legend(orient="bottom")),
            tooltip=[
                alt.Tooltip("batch:O"),
                alt.Tooltip("seq_len:O", title="context"),
                alt.Tooltip("fits:N"),
                alt.Tooltip("kv_cache_GiB:Q", title="KV needed per GPU (GiB)", format=",.2f"),
                alt.Tooltip("shortfall_GiB:Q", title="short per GPU (GiB)", format=",.2f"),
            ],
        )
    )


def throughput_chart(df: pd.DataFrame) -> alt.Chart:
    """Columns: batch, tokens_per_s_total, tpot_ms, ttft_ms, decode_bound, fits.

    Batches that fit draw green, those that do not red (the same line, split where it stops
    fitting).
    """
    return (
        alt.Chart(df)
        .mark_line(point=alt.OverlayMarkDef(size=60, filled=True))
        .encode(
            x=alt.X("batch:Q", scale=alt.Scale(type="log", base=2), title="batch (sequences)"),
            y=alt.Y(
                "tokens_per_s_total:Q",
                scale=alt.Scale(type="log"),
                axis=alt.Axis(title="decode tokens/s, all sequences (log)", format="~s"),
            ),
            color=alt.Color("fits:N", scale=FIT, title=None, legend=alt.Legend(orient="bottom")),
            tooltip=[
                alt.Tooltip("batch:Q"),
                alt.Tooltip("tokens_per_s_total:Q", title="tokens/s", format=",.0f"),
                alt.Tooltip("tpot_ms:Q", title="TPOT (ms)", format=",.2f"),
                alt.Tooltip("ttft_ms:Q", title="TTFT (ms)", format=",.1f"),
                alt.Tooltip("decode_bound:N", title="decode is"),
                alt.Tooltip("fits:N"),
            ],
        )
    )


# --- validation -------------------------------------------------------------------------------


def predicted_vs_measured_chart(df: pd.DataFrame) -> alt.LayerChart:
    """Columns: model, check, label, unit, predicted, measured, rel_error, result.

    Points on the grey diagonal agree exactly; both axes log (params, FLOPs and bytes span
    ten decades).
    """
    base = alt.Chart()  # the data goes on the layer: Altair would hash each layer's copy
    log = alt.Scale(type="log")
    diagonal = base.mark_line(color="#bab0ac", strokeDash=[4, 4]).encode(
        x=alt.X("predicted:Q", scale=log), y=alt.Y("predicted:Q", scale=log)
    )
    points = base.mark_point(filled=True, size=70, opacity=0.8).encode(
        x=alt.X(
            "predicted:Q", scale=log, axis=alt.Axis(title="kvcalc predicted (log)", format="~s")
        ),
        y=alt.Y("measured:Q", scale=log, axis=alt.Axis(title="measured (log)", format="~s")),
        color=alt.Color("check:N", scale=PALETTE, title=None, legend=alt.Legend(orient="bottom")),
        shape=alt.Shape(
            "result:N",
            scale=alt.Scale(domain=["pass", "FAIL"], range=["circle", "cross"]),
            title=None,
        ),
        tooltip=[
            alt.Tooltip("model:N"),
            alt.Tooltip("check:N"),
            alt.Tooltip("label:N"),
            alt.Tooltip("unit:N"),
            alt.Tooltip("predicted:Q", format=","),
            alt.Tooltip("measured:Q", format=","),
            alt.Tooltip("rel_error:Q", title="relative error", format=".2e"),
            alt.Tooltip("result:N"),
        ],
    )
    return alt.layer(diagonal, points, data=df)
