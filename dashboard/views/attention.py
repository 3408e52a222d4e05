"""Attention cost: the O(n²) part. FLOPs (prefill causal vs full mask, decode), one layer's
score-matrix memory (materialized vs fused), and attention's share of the forward FLOPs, all
from calc.attention_cost at each context length. The model's context limit is marked.
"""

import streamlit as st

from calc import units
from dashboard import attention_charts, attention_data, data, state, tables, ui

st.title("Attention cost")
state.page("attention")
st.caption(
    "FLOPs count 2 per multiply-add; QKᵀ and AV are 4·H·d per query-key pair and layer. "
    "Prefill: the whole prompt at once (causal: n(n+1)/2 pairs; full: n²). "
    "Decode: one new token attending to n cached ones. Softmax and norms are not counted."
)

c = st.columns([3, 1, 1, 2])
with c[0]:
    name = ui.model_picker()
with c[1]:
    dtype = ui.dtype_picker(label="Activation dtype")
with c[2]:
    batch = ui.int_input("batch", "Batch", 1, field="batch")
with c[3]:
    max_ctx = ui.context_picker(default=max(data.resolve(name).max_position_embeddings, 4096))

with ui.guarded():
    ui.require_valid_inputs()
    spec = data.resolve(name)
    limit = spec.max_position_embeddings
    grid = tuple(data.context_grid(max_ctx))
    df = attention_data.attention_frame(spec, grid, batch, dtype)
    if max_ctx > limit:
        ui.caption(
            f"The dashed line marks {spec.label}'s own context, {limit:,} tokens: the curves "
            "beyond it fade (the model was not built for them)."
        )

    flops, mem, share = attention_data.attention_long_frames(spec, grid, batch, dtype)

    st.subheader("FLOPs vs context")
    ui.show_chart(
        ui.chart(attention_charts.flops_chart, flops, context=limit),
        flops,
        "attention_flops",
        "Prefill attention grows as n², decode attention as n; the rest of the forward grows "
        "as n (prefill) or stays flat (decode).",
    )

    left, right = st.columns(2)
    with left:
        st.subheader("Score-matrix memory, one layer")
        ui.show_chart(
            ui.chart(attention_charts.memory_chart, mem, context=limit),
            mem,
            "attention_memory",
            "Materialized: batch × H × n × n scores (O(n²)). Fused (FlashAttention-style): "
            "the output plus one fp32 log-sum-exp per row (O(n)).",
        )
    with right:
        st.subheader("Attention's share of the forward")
        ui.show_chart(
            ui.chart(attention_charts.share_chart, share, context=limit), share, "attention_share"
        )

    within = df[df["seq_len"] <= min(max_ctx, limit)]  # the longest length the model runs
    row = (within if len(within) else df).iloc[-1]
    n = int(row.seq_len)
    st.subheader(f"At {n:,} tokens" + (" (the model's context)" if n == limit else ""))
    m = st.columns(4)
    m[0].metric("Prefill attention (causal)", units.si_flops(row.prefill_attention_flops_causal))
    m[1].metric("Decode attention, 1 token", units.si_flops(row.decode_attention_flops))
    m[2].metric("Scores, one layer", units.iec_bytes(row.score_matrix_bytes))
    m[3].metric("Attention share (prefill)", units.percent(row.attention_share_prefill))

    st.subheader(f"The same model with other attention, at {n:,} tokens")
    ui.caption(
        "MHA / GQA / MQA / MLA / sliding window / linear attention on every layer "
        "(calc.compare_attention; the KV cache page charts them): MLA decodes in the latent "
        "space, a sliding window caps the keys a query sees, linear attention scores no pairs."
    )
    ui.table(tables.variants(data.variants_frame(spec, n, batch, dtype)), right=("G / H",))

ui.sync(["model", "dtype", "batch", "max_ctx"], models=[name])
