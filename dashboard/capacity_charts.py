"""Capacity-planner charts: pure `DataFrame -> alt.Chart` over capacity_data.py's frames.

Fit and no fit are told apart by colour *and* by a second channel (a ✓ / ✗ in each heatmap
cell, a circle / cross point on the throughput line), so they read without colour. Count axes
are log with ticks at 1, 2, 5 x 10^k; memory in GiB (2^30 B); the model's context limit is
marked on token axes (charts.context_rule).
"""

from __future__ import annotations

import altair as alt
import pandas as pd

from dashboard.charts import AUTOSIZE, HEIGHT, PALETTE, context_rule, log_ticks, token_axis

FIT_DOMAIN = ["fits", "no fit"]
FIT = alt.Scale(domain=FIT_DOMAIN, range=["#59a14f", "#e15759"])
FIT_SHAPE = alt.Scale(domain=FIT_DOMAIN, range=["circle", "cross"])
FIT_MARK = {"fits": "✓", "no fit": "✗"}


def memory_breakdown_chart(df: pd.DataFrame) -> alt.Chart:
    """Columns: gpu, category, bytes, GiB, GB. One stacked bar: the GPU's memory, per GPU."""
    return _memory_bar(df, list(range(len(df))), list(df["category"]), PALETTE)


def _memory_bar(df: pd.DataFrame, order: list[int], sort: list[str], scale) -> alt.Chart:
    """A stacked bar of a GPU's memory by category, stacked by `order`, coloured by `scale`."""
    return (
        alt.Chart(df.assign(order=order))
        .mark_bar()
        .encode(
            x=alt.X("GiB:Q", stack="zero", axis=alt.Axis(title="memory per GPU (GiB = 2³⁰ B)")),
            y=alt.Y("gpu:N", title=None),
            color=alt.Color(
                "category:N",
                sort=sort,
                scale=scale,
                title=None,
                legend=alt.Legend(orient="bottom", columns=6),
            ),
            order=alt.Order("order:Q"),
            tooltip=[
                alt.Tooltip("category:N"),
                alt.Tooltip("GiB:Q", format=",.2f"),
                alt.Tooltip("GB:Q", format=",.2f"),
                alt.Tooltip("bytes:Q", format=",~f"),
            ],
        )
        .properties(height=alt.Step(56), autosize=AUTOSIZE)
    )


def concurrency_chart(df: pd.DataFrame, context: int | None = None) -> alt.LayerChart:
    """Columns: seq_len, max_concurrent_seqs (+ kv_tokens). Log y with 1-2-5 ticks; lengths
    where not one sequence fits are left out (the page says from where)."""
    tips = [
        alt.Tooltip("seq_len:Q", format=",~f"),
        alt.Tooltip("max_concurrent_seqs:Q", format=",~f"),
    ]
    if "kv_tokens" in df:
        tips.append(alt.Tooltip("kv_tokens:Q", title="KV pool (tokens)", format=",~f"))
    positive = df["max_concurrent_seqs"][df["max_concurrent_seqs"] > 0]
    ticks = log_ticks(1, positive.max()) if len(positive) else [1]
    line = (
        alt.Chart()
        .mark_line(point=True, color="#4e79a7")
        .encode(
            x=alt.X("seq_len:Q", scale=alt.Scale(type="log", base=2), axis=token_axis(df)),
            y=alt.Y(
                "max_concurrent_seqs:Q",
                scale=alt.Scale(type="log"),
                axis=alt.Axis(title="max concurrent sequences (log)", values=ticks, format=",~f"),
            ),
            tooltip=tips,
        )
        .transform_filter("datum.max_concurrent_seqs > 0")
    )
    return alt.layer(line, *context_rule(df, context), data=df).properties(
        height=HEIGHT, autosize=AUTOSIZE
    )


def fit_heatmap(df: pd.DataFrame) -> alt.LayerChart:
    """Columns: seq_len, batch, fits ("fits" / "no fit"), kv_cache_GiB, shortfall_GiB."""
    tips = [
        alt.Tooltip("batch:O"),
        alt.Tooltip("seq_len:O", title="context"),
        alt.Tooltip("fits:N"),
        alt.Tooltip("kv_cache_GiB:Q", title="KV needed per GPU (GiB)", format=",.2f"),
        alt.Tooltip("shortfall_GiB:Q", title="short per GPU (GiB)", format=",.2f"),
    ]
    base = alt.Chart().encode(
        x=alt.X("seq_len:O", title="context length (tokens)", axis=alt.Axis(labelAngle=0)),
        y=alt.Y("batch:O", sort="descending", title="batch (sequences)"),
        tooltip=tips,
    )
    cells = base.mark_rect(stroke="white", strokeWidth=1).encode(
        color=alt.Color(
            "fits:N",
            scale=FIT,
            title=None,
            legend=alt.Legend(
                orient="bottom", labelExpr="datum.label == 'fits' ? '✓ fits' : '✗ no fit'"
            ),
        )
    )
    marks = (
        base.mark_text(color="white", fontSize=13, fontWeight="bold")
        .encode(text="mark:N")
        .transform_calculate(mark="datum.fits == 'fits' ? '✓' : '✗'")
    )
    return alt.layer(cells, marks, data=df).properties(height=HEIGHT, autosize=AUTOSIZE)


def throughput_chart(df: pd.DataFrame) -> alt.Chart:
    """Columns: batch, tokens_per_s_total, tpot_ms, ttft_ms, decode_bound, fits.

    Batches that fit are green circles, those that do not red crosses (the same line, split
    where it stops fitting).
    """
    ticks = log_ticks(df["tokens_per_s_total"].min(), df["tokens_per_s_total"].max())
    return (
        alt.Chart(df)
        .mark_line(point=alt.OverlayMarkDef(size=70, filled=True))
        .encode(
            x=alt.X(
                "batch:Q",
                scale=alt.Scale(type="log", base=2),
                axis=alt.Axis(values=list(df["batch"]), format=",~f", title="batch (sequences)"),
            ),
            y=alt.Y(
                "tokens_per_s_total:Q",
                scale=alt.Scale(type="log"),
                axis=alt.Axis(
                    title="decode tokens/s, all sequences (log)", values=ticks, format=",~f"
                ),
            ),
            color=alt.Color("fits:N", scale=FIT, title=None, legend=alt.Legend(orient="bottom")),
            shape=alt.Shape(
                "fits:N", scale=FIT_SHAPE, title=None, legend=alt.Legend(orient="bottom")
            ),
            tooltip=[
                alt.Tooltip("batch:Q"),
                alt.Tooltip("tokens_per_s_total:Q", title="tokens/s", format=",.0f"),
                alt.Tooltip("tpot_ms:Q", title="TPOT (ms)", format=",.2f"),
                alt.Tooltip("ttft_ms:Q", title="TTFT (ms)", format=",.1f"),
                alt.Tooltip("decode_bound:N", title="decode is"),
                alt.Tooltip("fits:N"),
            ],
        )
        .properties(height=HEIGHT, autosize=AUTOSIZE)
    )


ENGINE_PARTS = [
    "weights", "draft weights", "activation peak", "non-torch", "CUDA graphs", "KV cache",
    "pool tables", "free",
]  # fmt: skip
ENGINE_COLORS = alt.Scale(
    domain=ENGINE_PARTS,
    range=["#4e79a7", "#76b7b2", "#f28e2b", "#b07aa1", "#9c755f", "#59a14f", "#8cd17d", "#d9d9d9"],
)


def engine_memory_chart(df: pd.DataFrame) -> alt.Chart:
    """Columns: gpu, category (ENGINE_PARTS, in stack order), bytes, GiB, GB. One stacked bar:
    the GPU's memory as the engine accounts it; each category keeps its colour whichever
    terms the engine has."""
    order = [ENGINE_PARTS.index(c) for c in df["category"]]
    return _memory_bar(df, order, ENGINE_PARTS, ENGINE_COLORS)
