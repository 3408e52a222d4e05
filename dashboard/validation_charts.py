"""The Validation page's chart: predicted vs measured, pure `DataFrame -> alt.LayerChart`."""

from __future__ import annotations

import altair as alt
import pandas as pd

from dashboard.charts import PALETTE, _finish


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
            alt.Tooltip("predicted:Q", format=",~f"),
            alt.Tooltip("measured:Q", format=",~f"),
            alt.Tooltip("rel_error:Q", title="relative error", format=".2e"),
            alt.Tooltip("result:N"),
        ],
    )
    return _finish(alt.layer(diagonal, points, data=df))
