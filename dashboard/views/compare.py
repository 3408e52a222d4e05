"""Compare: several models side by side (parameters, KV per token, KV at a context length,
and the longest context that fits on a chosen GPU, beside each model's own context limit)."""

import streamlit as st

from calc.hardware import load_hardware
from dashboard import capacity_data as cd
from dashboard import charts, data, state, tables, ui

st.title("Compare")
state.page("compare")
st.caption(
    "KV bytes per token: one more token of context, all layers, before any sliding "
    "window caps it; in KiB (2¹⁰ bytes), as in the table. Parameters: B = 10⁹."
)

c = st.columns([4, 1, 2])
with c[0]:
    names = ui.models_picker(
        default=("llama-2-70b", "llama-3-70b", "mistral-7b-v0.1", "falcon-40b", "gpt-3-175b")
    )
with c[1]:
    dtype = ui.dtype_picker()
with c[2]:
    ctx = ui.int_input("ctx", "Context (tokens)", 4096, field="seq_len")
c = st.columns([3, 1, 1])
with c[0]:
    presets = cd.gpu_options()[:-1]  # the custom GPU lives on the capacity page
    state.init("gpu", "h100-sxm", choices=presets)
    gpu = st.selectbox("GPU", presets, key=state.wkey("gpu"), format_func=cd.gpu_label)
with c[1]:
    n_gpus = ui.int_input("gpus", "GPUs", 8, field="gpus")
with c[2]:
    wdtype = ui.dtype_picker("wdtype", "Weight dtype")

with ui.guarded():
    ui.require_valid_inputs()
    if not names:
        st.info("Pick at least one model.")
    else:
        specs = tuple(data.resolve(n) for n in names)
        df = data.compare_frame(specs, ctx, dtype)
        hw = load_hardware(gpu)
        mc = cd.max_context_frame(specs, hw, n_gpus, dtype, wdtype)
        ui.table(
            tables.compare(df, mc),
            right=("params", "active", "query / KV heads", "context (tokens)", "KV per token"),
        )
        used = mc.dropna(subset=["tp"])
        split = sorted({(int(t), int(p)) for t, p in zip(used["tp"], used["pp"], strict=True)})
        how = "; ".join(f"tp={t}, pp={p}" for t, p in split) or "no split works"
        ui.caption(
            f"KV at the context chosen: one sequence of {ctx:,} tokens. Longest context on the "
            f"GPUs: the longest single sequence whose KV cache fits next to the weights "
            f"({wdtype}) on {n_gpus} × {hw.label} at utilization 0.9 (calc.capacity), each model "
            f"at the largest tensor parallelism its heads allow ({how}); 0 when the weights "
            "alone do not fit."
        )
        st.subheader(f"Longest context on {n_gpus} × {hw.label}", anchor=False)
        drawn = mc.dropna(subset=["max_context_tokens"])
        drawn = drawn[drawn["max_context_tokens"] > 0]
        if not len(drawn):
            st.info(f"None of these models' weights fit on {n_gpus} × {hw.label}: add GPUs.")
        else:
            ui.show_chart(
                ui.chart(charts.context_dots, drawn),
                mc,
                "max_context",
                "Dot: the longest context memory allows; black tick: the model's own context "
                "limit (max_position_embeddings). A dot right of its tick: memory is not what "
                "limits that model.",
            )
        left, right = st.columns(2)
        with left:
            st.subheader(f"KV per token ({dtype})", anchor=False)
            ui.show_chart(
                charts.bars_by_model(df, "kv_per_token_KiB", "KiB per token (2¹⁰ bytes)", ",.2f"),
                df[["model", "label", "kv_bytes_per_token", "kv_per_token_KiB"]],
                "kv_per_token",
            )
        with right:
            st.subheader("Parameters", anchor=False)
            ui.show_chart(
                charts.bars_by_model(
                    df, "params", "parameters (B = 10⁹)", label_expr=charts.COUNT_LABEL
                ),
                df[["model", "label", "params", "active_params"]],
                "params",
            )

ui.sync(["models", "dtype", "ctx", "gpu", "gpus", "wdtype"], models=names)
