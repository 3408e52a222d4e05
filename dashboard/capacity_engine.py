"""The capacity page's Engine section: the same GPUs planned as vLLM or SGLang (a chosen
release) computes them at start-up (calc.serving): its memory stack, KV tokens and concurrency
at max_model_len, its start-up lines, and which one setting reaches a target concurrency
(calc.serving.inverse). Called by dashboard/views/capacity.py with the page's model and GPUs."""

import streamlit as st

from calc import units
from calc.limits import limit as size_limit
from calc.serving.engine import DEFAULT_VERSION, parse_version
from calc.serving.kv_choices import kv_cache_choices
from dashboard import capacity_charts, plain, state, tables, ui
from dashboard import engine_data as ed
from dashboard.capacity_spec import spec_inputs
from dashboard.capacity_state import state_inputs


def engine_section(spec, hw, tp: int | None, n_gpus: int, wdtype: str) -> list[str]:
    """vLLM / SGLang as that release plans these GPUs (hw: None, or tp: None, when the inputs
    above are invalid: their error says why); returns its URL keys."""
    st.subheader("Engine: the plan as vLLM or SGLang makes it at start-up", anchor=False)
    names = list(ed.ENGINES)
    c = st.columns(3)
    with c[0]:
        state.init("engine", "vllm", choices=names)
        engine = st.selectbox("Engine", names, key=state.wkey("engine"), format_func=ed.ENGINES.get)
    if engine == "kvcalc":
        st.caption(
            "kvcalc's generic plan is the rest of this page (vLLM-style, no engine release). "
            "Pick vLLM or SGLang for the plan that release computes."
        )
        return ["engine"]
    keys = ["engine", "ever", "ekv"]
    versions = ed.ENGINE_VERSIONS[engine]
    with c[1]:
        state.init("ever", DEFAULT_VERSION[engine], choices=versions)
        version = st.selectbox(
            "Version",
            versions,
            key=state.wkey("ever"),
            help="The releases where kvcalc's rules for this engine change; a release between "
            "two plans as the one before it.",
        )
    with c[2]:
        kv_choices = kv_cache_choices(engine, parse_version(version))  # the release's own
        state.init("ekv", "auto", choices=kv_choices)
        kv = st.selectbox(
            "kv_cache_dtype",
            kv_choices,
            key=state.wkey("ekv"),
            help="auto: the model's dtype, or the fp8 cache a quantized checkpoint declares "
            "where the release reads it; the release's --kv-cache-dtype choices",
        )
    own = f"the model's context ({spec.max_position_embeddings:,})"
    c = st.columns(4)
    if engine == "vllm":
        with c[0]:
            frac = ui.optional_input(
                "eutil",
                "gpu_memory_utilization",
                0.01,
                1.0,
                whole=False,
                blank="the engine's default",
                field="gpu_memory_utilization",
            )
        frac_name = "gpu_memory_utilization"
        with c[2]:
            seqs = ui.optional_input(
                "eseqs",
                "max_num_seqs",
                1,
                size_limit("max_num_seqs"),
                whole=True,
                blank="the release's default",
                field="max_num_seqs",
            )
        with c[3]:
            block = ui.optional_input(
                "eblock",
                "block_size",
                1,
                size_limit("block_size"),
                whole=True,
                blank="the engine's choice",
                field="block_size",
            )
        own_keys = ["eutil", "eseqs", "eblock"]
        extra = dict(max_num_seqs=seqs, block_size=block)
    else:
        with c[0]:
            frac = ui.optional_input(
                "efrac",
                "mem_fraction_static",
                0.01,
                0.99,
                whole=False,
                blank="the release's rule",
                field="mem_fraction_static",
            )
        frac_name = "mem_fraction_static"
        with c[2]:
            seqs = ui.optional_input(
                "eruns",
                "max_running_requests",
                1,
                size_limit("batch"),
                whole=True,
                blank="the release's rule",
                field="max_running_requests",
            )
        with c[3]:
            page_size = ui.optional_input(
                "epage",
                "page_size",
                1,
                size_limit("block_size"),
                whole=True,
                blank="the default backend's",
                field="page_size",
            )
        own_keys = ["efrac", "eruns", "epage"]
        extra = dict(max_running_requests=seqs, page_size=page_size)
    with c[1]:
        mml = ui.optional_input(
            "elen",
            "max_model_len",
            1,
            size_limit("seq_len"),
            whole=True,
            blank=own,
            field="max_model_len",
        )
    keys += [*own_keys, "elen"]
    par_keys, parallel = _parallel_inputs(engine, spec, tp)
    state_keys, state_settings = state_inputs(engine, spec)
    spec_keys, spec_settings, given = spec_inputs(engine)
    keys += par_keys + state_keys + spec_keys
    parallel.update(state_settings)
    parallel.update(spec_settings)
    if hw is None or tp is None:  # the error above says why
        return keys
    with ui.guarded():
        ui.require_valid_inputs()
        settings = dict(
            version=version,
            tensor_parallel_size=tp,
            pipeline_parallel_size=n_gpus // tp,
            max_model_len=mml,
            kv_cache_dtype=kv,
            weight_dtype=wdtype,
            **{frac_name: frac},
            **extra,
            **parallel,
        )
        p = ed.one_engine_plan(spec, hw, engine, available_kv_gib=given, **settings)
        label = f"{ed.ENGINES[engine]} {p.version}"
        if p.refusal:
            st.error(plain.md(f"{label} refuses to start: {p.refusal}"))
        else:
            k = st.columns(4)
            kv = ed.kv_cache_bytes(p)
            k[0].metric("KV cache per GPU", units.iec_bytes(kv), help=ed.kv_cache_help(p))
            what = "blocks" if engine == "vllm" else "pages"
            k[1].metric(f"KV {what}", f"{p.num_gpu_blocks:,}")
            k[2].metric("KV tokens", f"{p.gpu_kv_cache_tokens:,}")
            k[3].metric(
                f"Max concurrency at {p.max_model_len:,} tokens",
                f"{p.max_concurrency:.2f}x",
            )
            if p.max_mamba_cache_size is not None:
                st.caption(
                    f"The KV cache per GPU holds {p.max_mamba_cache_size:,} mamba states (the "
                    "linear-attention layers' conv and SSM state; a running request may hold "
                    "several, with the radix cache's extra buffer) beside the full-attention "
                    "layers' token pool; SGLang's lines below give each part."
                )
            if p.max_running_requests is not None:
                st.caption(
                    f"SGLang's scheduler runs at most {p.max_running_requests:,} requests at "
                    "once (max_running_requests, per DP worker): the concurrency is the lesser "
                    "of that and the requests of max_model_len the pool holds."
                )
            stack = ed.engine_stack_frame(p)
            ui.show_chart(
                ui.chart(capacity_charts.engine_memory_chart, stack),
                stack,
                "engine_memory",
                f"{label} on {hw.label}, tp={p.tensor_parallel_size}, "
                f"pp={p.pipeline_parallel_size}: per GPU (the rank with the fewest KV blocks). "
                + ed.stack_caption(p),
            )
        st.caption(f"What {label} prints at start-up:")
        st.code("\n".join(p.log_lines), language=None)

        if given is not None:  # no settings to invert: the memory was given
            st.caption(
                "Planned from the given available memory: the weights and overheads are not "
                "derived, so the settings that would reach a concurrency are not either."
            )
            return keys
        frac_name = "kv_cache_memory_bytes" if p.source == "kv_cache_memory_bytes" else frac_name
        st.markdown(f"**Which {frac_name}, max_model_len or TP reaches a concurrency**")
        c = st.columns([1, 1, 2])
        with c[0]:
            conc = ui.int_input("ec", "Target concurrency", 16, field="max_num_seqs")
        with c[1]:
            length = ui.int_input("el", "Tokens per request", p.max_model_len, field="seq_len")
        keys += ["ec", "el"]
        ui.require_valid_inputs()
        inv = ed.engine_inverse_frame(
            spec, hw, engine, conc, **{**settings, "max_model_len": length}
        )
        with c[2]:
            ui.table(tables.engine_inverse(inv, conc, length))
            ui.caption(
                "Each row changes that one setting alone, the others as above: the smallest "
                f"{frac_name} ({ed.inverse_step(p)}), the longest max_model_len, the fewest "
                "tensor-parallel "
                f"GPUs per pipeline stage ({n_gpus // tp} stage"
                f"{'s' if n_gpus // tp > 1 else ''})."
            )
    return keys


def _parallel_inputs(engine: str, spec, tp: int | None) -> tuple[list[str], dict]:
    """Expert parallelism (MoE models), vLLM's decode context parallelism and SGLang's DP
    attention, as each engine's flags name them; returns their URL keys and the settings they
    set (none when left off)."""
    moe, sglang, multi = spec.is_moe, engine == "sglang", (tp or 1) > 1
    if not moe and not sglang and not multi:
        return [], {}
    c = st.columns(4)
    keys, out = [], {}
    if moe:
        state.init("eep", False, state.parse_bool)
        with c[0]:
            ep = st.checkbox(
                "enable_expert_parallel" if not sglang else "expert parallel (ep_size = tp)",
                key=state.wkey("eep"),
                help="Experts split whole over the tensor-parallel GPUs instead of each "
                "expert split across all of them.",
            )
        keys.append("eep")
        if ep:
            out["enable_expert_parallel"] = True
    if not sglang:
        if multi:
            dcps = [d for d in range(1, tp + 1) if tp % d == 0]
            state.init("edcp", 1, state.parse_int, choices=dcps)
            with c[1]:
                dcp = st.selectbox(
                    "decode_context_parallel_size",
                    dcps,
                    key=state.wkey("edcp"),
                    help="Each request's tokens split over this many of the tp GPUs (vLLM "
                    "0.10.2 on; MLA models, GQA from 0.12 when tp exceeds the KV heads).",
                )
            keys.append("edcp")
            if dcp > 1:
                out["decode_context_parallel_size"] = dcp
        return keys, out
    dps = [d for d in range(2, (tp or 1) + 1) if (tp or 1) % d == 0]
    state.init("edpa", False, state.parse_bool)
    with c[1]:
        dpa = st.checkbox(
            "enable_dp_attention",
            key=state.wkey("edpa"),
            disabled=not dps,
            help="Attention data-parallel over dp_size groups of the tp GPUs (MLA models, "
            "Qwen3-MoE from 0.4.6.post5); needs tp >= 2.",
        )
    keys.append("edpa")
    if not (dpa and dps):
        return keys, out
    state.init("edp", dps[-1], state.parse_int, choices=dps)
    with c[2]:
        dp = st.selectbox("dp_size", dps, key=state.wkey("edp"), help="must divide tp")
    state.init("edph", False, state.parse_bool)
    with c[3]:
        head = st.checkbox(
            "enable_dp_lm_head",
            key=state.wkey("edph"),
            help="The LM head split over the attention group, not the tp GPUs.",
        )
    keys += ["edp", "edph"]
    out.update(enable_dp_attention=True, data_parallel_size=dp)
    if head:
        out["enable_dp_lm_head"] = True
    if moe and spec.is_mla and "dense" in spec.mlp_types:  # DeepSeek's first dense layers
        state.init("edense", False, state.parse_bool)
        dense = c[0].checkbox(
            "moe_dense_tp_size = 1",
            key=state.wkey("edense"),
            help="The dense MLP layers replicated on every GPU instead of split over tp.",
        )
        keys.append("edense")
        if dense:
            out["moe_dense_tp_size"] = 1
    return keys, out
