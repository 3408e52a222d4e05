"""Capacity planner: a model on N GPUs of one kind. Per-GPU memory (weights, KV cache,
activations, runtime reserve), how many sequences fit at each context length, a batch x context
fit map, roofline latency (TTFT, TPOT, tokens/s), and the fewest GPUs of each kind.
All from calc.capacity / calc.plan; vLLM-style: the KV pool is what is left of
total x utilization after weights, activations and the reserve. The TP menu offers only the
degrees the model's heads allow on that many GPUs (calc.tp); latency is shown only for a plan
that fits. The Engine section plans the same GPUs as vLLM or SGLang (a chosen release) computes
it at start-up (calc.serving): its memory stack, KV tokens and concurrency at max_model_len,
its start-up lines, and which one setting reaches a target concurrency (calc.serving.inverse).
"""

import streamlit as st

from calc import units
from calc.hardware import list_hardware, load_hardware
from calc.tp import tp_rule, valid_tps
from dashboard import capacity_charts, data, plain, state, tables, ui
from dashboard import capacity_data as cd
from dashboard import engine_data as ed
from dashboard.capacity_engine import engine_section

st.title("Capacity planner")
state.page("capacity")
st.caption(
    "Per GPU. GPU memory is the driver's total (nvidia-smi) where a log of it is published, "
    "else the datasheet's nominal size; the GPU menu says which. GiB = 2³⁰ bytes, GB = 10⁹ "
    "bytes. Latency is a roofline estimate (assumed MFU 0.5, 80% of HBM bandwidth), not a "
    "measurement."
)


def _gpus_changed() -> None:  # more GPUs: the most tensor parallelism the model allows on them
    gpus = st.session_state[state.wkey("gpus")]
    try:
        model = data.resolve(st.session_state[state.wkey("model")])
        tps = valid_tps(model, int(gpus))
    except (ValueError, TypeError):
        return  # out of range: the input says so
    if tps:
        st.session_state[state.wkey("tp")] = tps[-1]


c = st.columns([3, 3, 1, 1])
with c[0]:
    name = ui.model_picker()
    spec = data.resolve(name)
with c[1]:
    state.init("gpu", "h100-sxm", choices=cd.gpu_options())
    gpu = st.selectbox("GPU", cd.gpu_options(), key=state.wkey("gpu"), format_func=cd.gpu_label)
with c[2]:
    n_gpus = ui.int_input("gpus", "GPUs", 2, field="gpus", on_change=_gpus_changed)
with c[3]:
    gpus_ok = 1 <= n_gpus <= 4096
    tp_options = valid_tps(spec, n_gpus) if gpus_ok else []
    best = tp_options[-1] if tp_options else None
    state.init("tp", best, state.parse_int, choices=tp_options or None)
    skipped = [d for d in range(1, n_gpus + 1) if gpus_ok and n_gpus % d == 0]
    skipped = [d for d in skipped if d not in tp_options]
    tp = st.selectbox(
        "TP",
        tp_options,
        key=state.wkey("tp"),
        help=f"pp = GPUs / TP. {tp_rule(spec)}"
        + (
            f"; so {', '.join(map(str, skipped))} {'is' if len(skipped) == 1 else 'are'} not offered"
            if skipped
            else ""
        ),
    )

c = st.columns(5)
with c[0]:
    wdtype = ui.dtype_picker("wdtype", "Weight dtype")
with c[1]:
    kvdtype = ui.dtype_picker("kvdtype", "KV dtype")
with c[2]:
    state.init("util", 0.9, state.parse_float, bounds=(0.05, 1.0))
    util = st.slider(
        "GPU memory utilization",
        0.05,
        1.0,
        step=0.01,
        key=state.wkey("util"),
        help="vLLM's gpu_memory_utilization: the share of total memory it may use",
    )
with c[3]:
    seq_len = ui.int_input("ctx", "Context per sequence", 4096, 2, field="seq_len")
with c[4]:
    batch = ui.int_input("batch", "Batch", 4, field="batch")

keys = ["model", "gpu", "gpus", "tp", "wdtype", "kvdtype", "util", "ctx", "batch"]
hw = None
with ui.guarded():
    if gpu == cd.CUSTOM_GPU:
        c = st.columns(4)
        figures = (
            ("c_mem", "Memory (GiB)", 80.0, 1e5),
            ("c_bw", "HBM bandwidth (GB/s)", 3350.0, 1e7),
            ("c_tflops", "Dense bf16 TFLOP/s", 989.0, 1e7),
            ("c_link", "Interconnect (GB/s, both directions)", 900.0, 1e7),
        )
        vals = []
        for col, (key, label, default, hi) in zip(c, figures, strict=True):
            with col:
                vals.append(ui.float_input(key, label, default, 0.001, hi))
        keys += [k for k, *_ in figures]
        hw = cd.custom_gpu(*vals)
    else:
        hw = load_hardware(gpu)

generic = ed.generic_refusal(spec)
if generic:  # the engines plan it (the Engine section below); kvcalc's generic plan does not
    st.info(plain.md(generic))
if hw is not None and not generic:
    with ui.guarded():
        ui.require_valid_inputs()
        if tp is None:
            raise ValueError(
                f"'gpus' cannot be split for {spec.label}: got {n_gpus} ({tp_rule(spec)})"
            )
        opts = dict(
            gpus=n_gpus, tp=tp, weight_dtype=wdtype, kv_dtype=kvdtype, gpu_memory_utilization=util
        )
        p = cd.one_plan(spec, hw, seq_len, batch, **opts)
        m, r = p.memory, p.roofline
        # the memory plan's message: the latency follows below, and only when it fits
        (st.success if p.fits else st.warning)(plain.md(m.message))
        limit = spec.max_position_embeddings
        if seq_len > limit:
            st.warning(
                f"{seq_len:,} tokens is beyond this model's own context of {limit:,} tokens: "
                "the figures assume it could run that long."
            )

        k = st.columns(4)
        k[0].metric(
            "Weights per GPU", units.iec_bytes(m.weight_bytes), help=units.fmt_bytes(m.weight_bytes)
        )
        k[1].metric(
            "KV pool per GPU",
            units.iec_bytes(max(0, m.kv_budget_bytes)),
            help=f"{m.kv_tokens:,} tokens in {m.kv_blocks:,} blocks of {m.block_size}",
        )
        k[2].metric(f"Max sequences of {seq_len:,}", f"{m.max_concurrent_seqs:,}")
        ctx = m.max_context_tokens
        k[3].metric(
            f"Max context at batch {batch:,}",
            "unbounded" if ctx is None else f"{min(ctx, limit):,}",
            help=f"memory allows {'any length' if ctx is None else f'{ctx:,} tokens'}; "
            f"the model's own context is {limit:,}",
        )
        if ctx is None or ctx > limit:
            ui.caption(
                f"Max context: memory would allow {'any length' if ctx is None else f'{ctx:,} tokens'} "
                f"per sequence at batch {batch:,}, but {spec.label} was built for {limit:,}."
            )
        if p.fits:
            k = st.columns(4)
            k[0].metric(
                "TTFT", units.fmt_duration(r.ttft_s), help=f"prefill is {r.prefill.bound}-bound"
            )
            k[1].metric(
                "TPOT", units.fmt_duration(r.tpot_s), help=f"decode is {r.decode_last.bound}-bound"
            )
            k[2].metric("Decode tokens/s (all sequences)", f"{r.tokens_per_s_total:,.0f}")
            k[3].metric("Tokens/s per sequence", f"{r.tokens_per_s_per_seq:,.1f}")
        else:
            st.info(
                "No latency: the target does not fit, so there is nothing to time. Lower the "
                "batch or context, or add GPUs."
            )

        st.subheader("Memory per GPU", anchor=False)
        mem = cd.breakdown_frame(p)
        ui.show_chart(
            ui.chart(capacity_charts.memory_breakdown_chart, mem),
            mem,
            "memory_breakdown",
            f"{hw.label}: {units.fmt_bytes(m.total_memory_bytes)} in total "
            f"({cd.memory_source(hw) if gpu != cd.CUSTOM_GPU else 'as entered'}); utilization "
            f"{util:.2f} leaves {units.iec_bytes(m.budget_bytes)} to the engine. kv_cache: the "
            "target batch × context; kv_spare: the rest of the KV pool; headroom: what "
            "utilization < 1 keeps back.",
        )

        left, right = st.columns(2)
        with left:
            st.subheader("Sequences that fit vs context", anchor=False)
            top = min(1 << 20, max(32768, limit, 2 * seq_len))
            conc = cd.concurrency_frame(spec, hw, tuple(data.context_grid(top, 512)), **opts)
            none = conc[conc["max_concurrent_seqs"] == 0]["seq_len"]
            ui.show_chart(
                ui.chart(capacity_charts.concurrency_chart, conc, context=limit),
                conc,
                "max_concurrent_seqs",
                "Dashed line: the model's own context."
                + (
                    f" From {int(none.min()):,} tokens on, not one sequence fits."
                    if len(none)
                    else ""
                ),
            )
        with right:
            st.subheader("Batch × context: fit or no fit", anchor=False)
            ctxs = tuple(2**i for i in range(10, 18))  # 1K .. 128K tokens
            grid = cd.fit_grid_frame(spec, hw, ctxs, cd.BATCHES, **opts)
            ui.show_chart(ui.chart(capacity_charts.fit_heatmap, grid), grid, "fit_heatmap")

        st.subheader("Roofline: decode throughput vs batch", anchor=False)
        tput = cd.throughput_frame(spec, hw, seq_len, cd.BATCHES, **opts)
        left, right = st.columns([3, 2])
        with left:
            ui.show_chart(ui.chart(capacity_charts.throughput_chart, tput), tput, "throughput")
        with right:
            if p.fits:
                ui.table(
                    tables.phases(r.to_frame()), right=("context (tokens)", "FLOP / byte", "time")
                )
                st.caption(
                    f"Ridge point {r.ridge_flops_per_byte:,.0f} FLOPs/byte ({r.compute_dtype}): "
                    "above it a phase is compute-bound, below it memory-bound."
                )
            else:
                st.caption("Phase timings are shown for a target that fits.")

        st.subheader(f"Fewest GPUs for {batch:,} × {seq_len:,} tokens", anchor=False)
        hws = tuple(load_hardware(g) for g in list_hardware())
        hws += (hw,) if gpu == cd.CUSTOM_GPU else ()
        few = cd.fewest_frame(
            spec,
            hws,
            seq_len,
            batch,
            weight_dtype=wdtype,
            kv_dtype=kvdtype,
            gpu_memory_utilization=util,
        )
        ui.table(
            tables.fewest(few, 64), right=("GPUs", "TP", "PP", "weights per GPU", "max sequences")
        )


keys += engine_section(spec, hw, tp, n_gpus, wdtype)
ui.sync(keys, models=[name])
