"""KV cache: bytes vs context length for several models (calc.sweep), and one model as
MHA / GQA / MQA (calc.compare_attention). A sliding-window model's curve flattens past its
window, because its sliding layers keep min(n, window) tokens. Past a model's own context limit
its curve fades.
"""

import streamlit as st

from dashboard import charts, data, state, tables, ui

st.title("KV cache")
state.page("kv")
st.caption(
    "2 × layers × KV heads × head_dim × tokens × batch × bytes per element. "
    "Axes in GiB (2³⁰ bytes); tooltips give GB (10⁹ bytes) and exact bytes."
)

c = st.columns([3, 1, 1, 2])
with c[0]:
    names = ui.models_picker(
        default=("llama-2-70b", "llama-3-70b", "mistral-7b-v0.1", "gemma-2-9b")
    )
with c[1]:
    dtype = ui.dtype_picker()
with c[2]:
    batch = ui.int_input("batch", "Batch", 1, field="batch")
with c[3]:
    # the default range: up to the chosen models' longest context (they are all offered, so
    # all resolve)
    longest = max((data.resolve(n).max_position_embeddings for n in names), default=4096)
    max_ctx = ui.context_picker(default=max(longest, 4096))

with ui.guarded():
    ui.require_valid_inputs()
    if not names:
        st.info("Pick at least one model.")
    else:
        specs = tuple(data.resolve(n) for n in names)
        df = data.kv_frame(specs, tuple(data.context_grid(max_ctx)), batch, dtype)
        notes = []
        beyond = [s for s in specs if s.max_position_embeddings < max_ctx]
        if beyond:
            notes.append(
                "Faded: beyond the model's own context ("
                + "; ".join(f"{s.label} {s.max_position_embeddings:,}" for s in beyond)
                + " tokens)."
            )
        for group in data.same_kv_groups(df):
            notes.append(f"{' and '.join(group)} cache the same bytes per token: one line.")
        windowed = [s for s in specs if s.sliding_window]
        if windowed:
            notes.append(
                "Sliding window: "
                + "; ".join(
                    f"{s.label} keeps {s.sliding_window:,} tokens in "
                    f"{s.n_sliding_layers} of {s.num_hidden_layers} layers"
                    for s in windowed
                )
                + ", so its curve flattens (fully, if every layer slides) past the window."
            )
        ui.show_chart(ui.chart(charts.kv_context_chart, df), df, "kv_vs_context", " ".join(notes))

st.header("MHA vs GQA vs MQA vs MLA vs sliding vs linear")
st.caption(
    "The same model with G = H (MHA), its own G (GQA) and G = 1 (MQA): KV bytes scale "
    "with G, so the saving against MHA is 1 − G/H. MLA caches one latent per token "
    "(DeepSeek's kv_lora_rank + rope key; 4 × head_dim + head_dim / 2 for a model without "
    "one), a sliding window keeps its last window of tokens (the model's, else 4,096), and "
    "linear attention (Gated DeltaNet) a constant state per sequence. A model whose layers "
    "mix kinds is listed as configured too. Attention FLOPs: causal prefill and one decode "
    "step at this context."
)
c = st.columns([3, 2])
with c[0]:
    name = ui.model_picker()
with c[1]:
    ctx = ui.int_input("ctx", "Context (tokens)", 4096, field="seq_len")

with ui.guarded():
    ui.require_valid_inputs()
    spec = data.resolve(name)
    vdf = data.variants_frame(spec, ctx, batch, dtype)
    left, right = st.columns([2, 3])
    with left:
        ui.show_chart(ui.chart(charts.variants_chart, vdf), vdf, "attention_variants")
    with right:
        ui.table(tables.variants(vdf), right=("G / H", "saving vs MHA"))
        past = (
            f" (beyond its {spec.max_position_embeddings:,}-token context)"
            if ctx > spec.max_position_embeddings
            else ""
        )
        ui.caption(
            f"{spec.label}: H = {spec.num_attention_heads} query heads, "
            f"G = {spec.n_kv_heads} KV heads, {ctx:,} tokens{past} × batch {batch:,}, {dtype}."
        )

ui.sync(["models", "dtype", "batch", "max_ctx", "model", "ctx"], models=[*names, name])
