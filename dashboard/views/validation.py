"""Validation: kvcalc's numbers against real PyTorch modules. The committed reports
(reports/validation-cpu.json and, where present, validation-cuda.json) as tables and a
predicted-vs-measured chart, and a button that runs the CPU validation live for one model.
"""

import pandas as pd
import streamlit as st

from dashboard import data, plain, state, tables, ui, validation_charts
from dashboard import validation_data as vd

st.title("Validation")
state.page("validation")
st.caption(
    "Each check builds the model's modules in PyTorch and measures: parameters (numel per "
    "component), FLOPs (torch FlopCounterMode), KV-cache bytes (the cache tensors) and peak "
    "attention memory (profiler / max_memory_allocated), then compares with kvcalc."
)

files = vd.report_files()
if not files:
    st.info(f"No committed validation report in {vd.reports_dir()}; run one live below.")
with ui.guarded():
    if files:
        tabs = st.tabs([plain.md(f.stem.removeprefix("validation-").upper()) for f in files])
        for tab, path in zip(tabs, files, strict=True):
            with tab:
                rep = vd.load_report(path)
                verdict = "all checks pass" if rep.passed else "SOME CHECKS FAIL"
                st.markdown(
                    f"**{plain.md(rep.device_name)}**, torch {plain.md(rep.torch_version)}: "
                    f"{len(rep.models)} models in {rep.seconds:,.0f} s; {verdict}. "
                    f"Source: {plain.md(path.name)}"
                )
                ui.table(
                    tables.validation_summary(rep.summary()),
                    right=("comparisons", "failed", "largest relative error"),
                )
                tol = pd.DataFrame(rep.tolerances.items(), columns=["check", "tolerance"])
                ui.table(tol)
                df = vd.checks_frame(rep.models)
                name = path.stem.replace("-", "_")
                ui.show_chart(
                    validation_charts.predicted_vs_measured_chart(vd.chartable(df)),
                    vd.chartable(df),
                    name,
                    "Relative checks only (sizes); grey diagonal: measured = predicted.",
                )
                with st.expander(f"All {len(df)} comparisons"):
                    cols = ["model", "check", "label", "unit", "predicted", "measured"]
                    cols += ["rel_error", "tolerance", "tolerance_kind", "result", "note"]
                    st.dataframe(tables.checks(df, cols), hide_index=True)

st.header("Run the CPU validation live")
c = st.columns([3, 2])
with c[0]:
    name = ui.model_picker(default="gpt-3-125m")
ui.sync(["model"], models=[name])
LIVE = "validation:live"
with c[1]:
    st.write("")
    clicked = st.button(
        plain.md(f"Run CPU validation for {data.model_label(name)}"),
        type="primary",
        key="validation:run",
    )
if clicked:
    with ui.guarded():
        import calc.validate

        bar = st.progress(0.0, text="starting (imports torch)")

        def _progress(done: int, total: int, label: str) -> None:
            bar.progress(done / total, text=f"{label} ({done}/{total} checks)")

        spec = data.resolve(name)
        st.session_state[LIVE] = calc.validate.run(spec, device="cpu", on_progress=_progress)
live = st.session_state.get(LIVE)
if live is not None:
    with ui.guarded():
        verdict = "all checks pass" if live.passed else "SOME CHECKS FAIL"
        st.markdown(
            f"**{plain.md(live.model)}** on {live.device} ({live.dtype}): {len(live.checks)} "
            f"comparisons in {live.seconds:,.1f} s; {verdict}."
        )
        df = vd.checks_frame([live])
        ui.show_chart(
            validation_charts.predicted_vs_measured_chart(vd.chartable(df)),
            vd.chartable(df),
            "live_validation",
        )
        cols = ["check", "label", "unit", "predicted", "measured", "rel_error", "result", "note"]
        ui.table(tables.checks(df, cols), right=("predicted", "measured", "rel_error"))
        ui.caption("What was built: " + "; ".join(f"{k}: {v}" for k, v in live.setup.items()))
