"""Chart builders: pure `DataFrame -> alt.Chart`, no Streamlit, no calc.

Each builder draws the columns data.py produces; every mark has a tooltip, every axis names its
unit, one convention per quantity (as calc.units prints them): memory in GiB (2^30 B), KV bytes
per token in KiB (2^10 B), parameters with K / M / B / T = 10^3 / 10^6 / 10^9 / 10^12, tokens on
log axes with K = 1024, M = 2^20, token counts on linear axes in full with thousands separators,
FLOPs with SI prefixes. Charts keep a fixed plot height (the legend goes below it, not into it);
up to 20 series get distinct colours, the second ten also dashed; a model's context limit is
marked. Capacity charts are in capacity_charts.py, the attention page's in attention_charts.py.
Tested in tests/test_dashboard_charts.py.

>>> import pandas as pd
>>> df = pd.DataFrame({"seq_len": [1, 2], "kv_cache_GiB": [1.0, 2.0], "label": ["a", "a"]})
>>> kv_context_chart(df).to_dict()["layer"][0]["encoding"]["x"]["scale"]
{'base': 2, 'type': 'log'}
"""

from __future__ import annotations

import altair as alt
import pandas as pd

HEIGHT = 320  # px of plot area, whatever the legend needs
# fit-x: the width follows the page; the height is the plot's, legends are added below it
AUTOSIZE = alt.AutoSizeParams(type="fit-x", contains="padding")
# Token axes tick at powers of two and read 128, 1K, 4K, 128K, 1M (K = 1024 tokens).
TOKEN_LABEL = (
    "datum.value >= 1048576 ? format(datum.value / 1048576, '~g') + 'M' : "
    "datum.value >= 1024 ? format(datum.value / 1024, '~g') + 'K' : format(datum.value, '~g')"
)
# Parameter counts read as the tiles do: 68.98B; K/M/B/T are powers of 1000.
COUNT_LABEL = (
    "abs(datum.value) >= 1e12 ? format(datum.value / 1e12, '~g') + 'T' : "
    "abs(datum.value) >= 1e9 ? format(datum.value / 1e9, '~g') + 'B' : "
    "abs(datum.value) >= 1e6 ? format(datum.value / 1e6, '~g') + 'M' : "
    "abs(datum.value) >= 1e3 ? format(datum.value / 1e3, '~g') + 'K' : format(datum.value, '~g')"
)
# 20 distinct colours: Tableau 10, then the light halves of Tableau 20 (drawn dashed)
SERIES_COLORS = (
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
    "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#79706e",
    "#a0cbe8", "#ffbe7d", "#ff9d9a", "#499894", "#8cd17d",
    "#b6992d", "#d4a6c8", "#fabfd2", "#d7b5a6", "#bab0ac",
)  # fmt: skip
SHAPES = ("circle", "square", "triangle-up", "diamond", "cross", "triangle-down", "wedge")
PALETTE = alt.Scale(range=list(SERIES_COLORS))


def token_axis(df: pd.DataFrame, x: str = "seq_len") -> alt.Axis:
    lo, hi = int(df[x].min()), int(df[x].max())
    ticks = [2**k for k in range(max(lo, 1).bit_length() - 1, hi.bit_length()) if lo <= 2**k <= hi]
    return alt.Axis(values=ticks, labelExpr=TOKEN_LABEL, title="context length (tokens, log scale)")


def log_ticks(lo: float, hi: float) -> list[float]:
    """Tick values 1, 2, 5 x 10^k from lo to hi (only 10^k when that would be > 12 ticks)."""
    lo, hi = max(float(lo), 1e-300), max(float(hi), 1e-300)
    k0, k1 = int(f"{lo:e}".split("e")[1]), int(f"{hi:e}".split("e")[1])
    ticks = [m * 10.0**k for k in range(k0, k1 + 1) for m in (1, 2, 5) if lo <= m * 10.0**k <= hi]
    if len(ticks) > 12:
        ticks = [t for t in ticks if f"{t:e}".startswith("1")]
    return ticks or [lo]


def series_legend(n: int, columns: int | None = None) -> alt.Legend:
    """Below the plot, in up to 4 columns (`columns` for a narrow chart)."""
    cols = max(1, min(4, n)) if columns is None else columns
    return alt.Legend(orient="bottom", columns=cols, labelLimit=260, title=None, symbolOpacity=1)


def _series(
    df: pd.DataFrame, field: str, columns: int | None = None
) -> tuple[alt.Color, alt.StrokeDash, alt.Shape]:
    """Colour, dash and point shape per series, all three with one merged legend."""
    names = list(dict.fromkeys(df[field]))
    n = len(names)
    legend = series_legend(n, columns)
    colors = [SERIES_COLORS[i % len(SERIES_COLORS)] for i in range(n)]
    dashes = [[1, 0] if i < 10 else [6, 3] for i in range(n)]
    shapes = [SHAPES[i % len(SHAPES)] for i in range(n)]
    return (
        alt.Color(f"{field}:N", scale=alt.Scale(domain=names, range=colors), legend=legend),
        alt.StrokeDash(f"{field}:N", scale=alt.Scale(domain=names, range=dashes), legend=legend),
        alt.Shape(f"{field}:N", scale=alt.Scale(domain=names, range=shapes), legend=legend),
    )


def _finish(chart, height: int = HEIGHT):
    return chart.properties(height=height, autosize=AUTOSIZE)


def context_rule(df: pd.DataFrame, context: int | None, x: str = "seq_len") -> list[alt.Chart]:
    """A dashed vertical line at the model's context limit, labelled, when it is in range."""
    if context is None or not df[x].min() <= context <= df[x].max():
        return []
    base = alt.Chart().transform_aggregate(n="count()")  # one row, whatever the data
    rule = base.mark_rule(color="#333", strokeDash=[4, 4]).encode(x=alt.XDatum(context))
    # the label on the side with room: left of a limit in the right half of the (log) axis
    lo, hi = float(df[x].min()), float(df[x].max())
    right_half = context * context > lo * hi
    text = base.mark_text(
        align="right" if right_half else "left",
        dx=-4 if right_half else 4,
        baseline="top",
        color="#333",
    ).encode(
        x=alt.XDatum(context), y=alt.YValue(2), text=alt.TextDatum(f"model context {context:,}")
    )
    return [rule, text]


def _log_lines(
    df: pd.DataFrame,
    y: str,
    y_title: str,
    color: str,
    tooltip: list,
    *,
    context: int | None = None,
    x: str = "seq_len",
    y_scale: alt.Scale | None = None,
    y_format: str = "~s",
    legend_columns: int | None = None,
) -> alt.LayerChart:
    """Lines over a log2 token axis (y log unless `y_scale` says otherwise), one per `color`
    value; points beyond a model's own context (a `beyond_context` column) fade, and `context`
    draws its limit."""
    y_scale = alt.Scale(type="log") if y_scale is None else y_scale
    col, dash, shape = _series(df, color, legend_columns)
    inside = "datum.beyond_context != true"
    faded = alt.Chart().mark_line(opacity=0.3)  # the whole curve, faint: so it stays past the limit
    solid = alt.Chart().mark_line().transform_filter(inside)
    points = (
        alt.Chart()
        .mark_point(filled=True, size=40)
        .encode(
            shape=shape,
            opacity=alt.Opacity(  # typed channels: alt.condition(...) costs ~7 ms to validate
                "beyond_context:N",
                scale=alt.Scale(domain=[False, True], range=[1.0, 0.3]),
                legend=None,
            ),
        )
    )
    lines = alt.layer(faded, solid, points).encode(  # shared by the three: one copy in the spec
        x=alt.X(f"{x}:Q", scale=alt.Scale(type="log", base=2), axis=token_axis(df, x)),
        y=alt.Y(f"{y}:Q", scale=y_scale, axis=alt.Axis(title=y_title, format=y_format)),
        color=col,
        strokeDash=dash,
        tooltip=tooltip,
    )
    return _finish(alt.layer(lines, *context_rule(df, context, x), data=df))


# --- model ------------------------------------------------------------------------------------


def params_chart(df: pd.DataFrame) -> alt.Chart:
    """Columns: component, params, share. One horizontal bar per component."""
    return (
        alt.Chart(df)
        .mark_bar()
        .encode(
            x=alt.X("params:Q", axis=alt.Axis(title="parameters", labelExpr=COUNT_LABEL)),
            y=alt.Y("component:N", sort=list(df["component"]), title=None),
            tooltip=[
                alt.Tooltip("component:N"),
                alt.Tooltip("params:Q", format=",~f"),
                alt.Tooltip("share:Q", format=".2%"),
            ],
        )
        .properties(height=alt.Step(28), autosize=AUTOSIZE)
    )


# --- KV cache ---------------------------------------------------------------------------------


def kv_context_chart(df: pd.DataFrame) -> alt.LayerChart:
    """Columns: seq_len, kv_cache_GiB, label (+ kv_cache_bytes, kv_cache_GB, context_tokens,
    beyond_context for tooltips and fading)."""
    tips = [alt.Tooltip("label:N", title="model"), alt.Tooltip("seq_len:Q", format=",~f")]
    tips += [
        alt.Tooltip(f"{c}:Q", format=f, title=t)
        for c, f, t in (
            ("kv_cache_GiB", ",.3f", "KV cache (GiB)"),
            ("kv_cache_GB", ",.3f", "KV cache (GB)"),
            ("kv_cache_bytes", ",", "KV cache (bytes)"),
            ("context_tokens", ",", "model context (tokens)"),
        )
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
        .properties(height=HEIGHT, autosize=AUTOSIZE)
    )


# --- compare ----------------------------------------------------------------------------------


def bars_by_model(
    df: pd.DataFrame, value: str, title: str, fmt: str = ",", label_expr: str | None = None
) -> alt.Chart:
    """Columns: label, `value`. One horizontal bar per model; `label_expr` formats the axis
    (COUNT_LABEL for parameters), else full numbers with thousands separators."""
    axis = (
        alt.Axis(title=title, labelExpr=label_expr)
        if label_expr
        else alt.Axis(title=title, format=",~f")
    )
    return (
        alt.Chart(df)
        .mark_bar()
        .encode(
            x=alt.X(f"{value}:Q", axis=axis),
            y=alt.Y("label:N", sort="-x", title=None),
            tooltip=[alt.Tooltip("label:N", title="model"), alt.Tooltip(f"{value}:Q", format=fmt)],
        )
        .properties(height=alt.Step(24), autosize=AUTOSIZE)
    )


def context_dots(df: pd.DataFrame) -> alt.LayerChart:
    """Columns: label, max_context_tokens, context_tokens. Per model, a dot at the longest
    context memory allows and a black tick at the model's own context limit (log2 axis)."""
    tips = [
        alt.Tooltip("label:N", title="model"),
        alt.Tooltip("max_context_tokens:Q", title="memory allows (tokens)", format=",~f"),
        alt.Tooltip("context_tokens:Q", title="model context (tokens)", format=",~f"),
    ]
    lo = int(min(df["max_context_tokens"].min(), df["context_tokens"].min()))
    hi = int(max(df["max_context_tokens"].max(), df["context_tokens"].max()))
    axis = token_axis(pd.DataFrame({"t": [max(lo, 1), max(hi, 2)]}), "t")
    axis.title = "tokens, one sequence (log scale)"
    x_scale = alt.Scale(type="log", base=2)
    y = alt.Y("label:N", sort="-x", title=None)
    base = alt.Chart().encode(y=y, tooltip=tips)
    dots = base.mark_point(filled=True, size=90, color=SERIES_COLORS[0]).encode(
        x=alt.X("max_context_tokens:Q", scale=x_scale, axis=axis)
    )
    ticks = base.mark_tick(color="#222", thickness=2, size=18).encode(
        x=alt.X("context_tokens:Q", scale=x_scale)
    )
    return alt.layer(ticks, dots, data=df).properties(height=alt.Step(28), autosize=AUTOSIZE)
