"""Model: pick a preset (by family), build one from fields, or upload a config.json.

Shows the spec with its sources, the parameter breakdown (calc.params_report), a quantized
checkpoint's schemes and stored bytes (dashboard.quant_view) and, for the
families the lecture notes discuss, the notes' claims (quoted, calc.errata) where they apply.
A model of the user's own (fields or upload) is shown as plain text throughout, never as
Markdown, and its fields go into the URL (dashboard.shared_model) so a copied link rebuilds it.
"""

import streamlit as st

import calc
from calc import units
from calc.limits import limit
from dashboard import charts, data, plain, quant_view, shared_model, state, tables, ui

SOURCES = {"preset": "Preset", "custom": "Custom fields", "upload": "Upload config.json"}
META = ("name", "family", "display_name", "source", "retrieved", "published_params")
META += ("published_active_params", "notes", "quantization")  # quantization: its own section
UPLOAD_MB = 100  # what the upload box accepts; kvcalc reads at most 1 MB and says so

st.title("Model")
state.page("model")
state.init("src", "preset", choices=list(SOURCES))
src = st.radio(
    "Model from", list(SOURCES), key=state.wkey("src"), horizontal=True, format_func=SOURCES.get
)
keys = ["src"]
spec = None
extra: dict[str, str] = {}


def errata_summary(verdicts, family: str) -> str:
    """'3 claims in them concern llama-2 models ...; 1 of them is wrong' (or 'it is wrong')."""
    n, wrong = len(verdicts), int((verdicts == "wrong").sum())
    if n == 1:
        verdict = "it is wrong" if wrong else "it is correct"
        counted = f"1 claim in them concerns {family} models"
    else:
        verdict = f"{wrong} of them {'is' if wrong == 1 else 'are'} wrong"
        counted = f"{units.plural(n, 'claim')} in them concern {family} models"
    return (
        "kvcalc grew from a set of lecture notes on attention (not part of this app); "
        f"{counted}, quoted below with the file, section and line: {verdict}. kvcalc's value "
        "is computed from the preset."
    )


def _family_changed() -> None:
    st.session_state[state.wkey("model")] = data.families()[st.session_state["model:family"]][0]


if src == "preset":
    fams = data.families()
    all_names = [n for group in fams.values() for n in group]
    state.init("model", data.default_models(["llama-2-70b"], 1)[0], choices=all_names)
    st.session_state["model:family"] = calc.load_preset(st.session_state["model:model"]).family
    c1, c2 = st.columns(2)
    family = c1.selectbox("Family", list(fams), key="model:family", on_change=_family_changed)
    name = c2.selectbox("Preset", fams[family], key="model:model", format_func=data.model_label)
    spec = calc.load_preset(name)
    keys.append("model")

elif src == "custom":
    st.caption("Hugging Face config.json field names; 0 for head_dim means hidden / heads.")
    cols = st.columns(4)
    ints = [  # key, field, default, lowest
        ("c_layers", "num_hidden_layers", 32, 1),
        ("c_hidden", "hidden_size", 4096, 1),
        ("c_heads", "num_attention_heads", 32, 1),
        ("c_kv", "num_key_value_heads", 8, 1),
        ("c_head_dim", "head_dim", 0, 0),
        ("c_ffn", "intermediate_size", 11008, 1),
        ("c_vocab", "vocab_size", 32000, 1),
        ("c_ctx", "max_position_embeddings", 4096, 1),
        ("c_experts", "num_local_experts", 1, 1),
        ("c_topk", "num_experts_per_tok", 1, 1),
        ("c_window", "sliding_window", 0, 0),
    ]
    values = {}
    for i, (key, field, default, lo) in enumerate(ints):
        with cols[i % 4]:
            label = field + (" (0: none)" if field == "sliding_window" else "")
            values[key] = ui.int_input(key, label, default, lo, limit(field), field=field)
    state.init("c_mlp", "gated", choices=["gated", "standard"])
    state.init("c_tie", False, state.parse_bool)
    mlp = cols[3].selectbox("mlp_kind", ["gated", "standard"], key="model:c_mlp")
    tie = cols[3].checkbox("tie_word_embeddings", key="model:c_tie")
    keys += [k for k, *_ in ints] + ["c_mlp", "c_tie"]
    with ui.guarded():
        ui.require_valid_inputs()
        spec = calc.ModelSpec(
            name=data.CUSTOM,
            display_name="Custom model",
            num_hidden_layers=values["c_layers"],
            hidden_size=values["c_hidden"],
            num_attention_heads=values["c_heads"],
            num_key_value_heads=values["c_kv"],
            head_dim=values["c_head_dim"] or None,
            intermediate_size=values["c_ffn"],
            vocab_size=values["c_vocab"],
            max_position_embeddings=values["c_ctx"],
            num_local_experts=values["c_experts"],
            num_experts_per_tok=values["c_topk"],
            sliding_window=values["c_window"] or None,
            mlp_kind=mlp,
            tie_word_embeddings=tie,
        )
        shared_model.remember(spec, "fields")

else:
    shared_model.restore()  # ?src=upload&spec=...: the link carries the uploaded model's fields
    up = st.file_uploader(  # no `type=`: Streamlit would refuse a wrong suffix silently; we say why
        "config.json (JSON only, at most 1 MB; parsed, never executed)",
        max_upload_size=UPLOAD_MB,
        key="model:upload",
    )
    origin = st.session_state.get(shared_model.ORIGIN, "")
    if up is not None:
        with ui.guarded():
            spec = data.parse_upload(up.name, up.getvalue())
            shared_model.remember(spec, f"upload: {up.name}")
    elif origin.startswith(("upload", "link")) and data.CUSTOM_KEY in st.session_state:
        spec = st.session_state[data.CUSTOM_KEY]
        how = "this link's fields" if origin == "link" else origin.removeprefix("upload: ")
        st.info(
            plain.md(
                f"Showing the model rebuilt from {how} (its shape; sources and notes are not in "
                "links). Upload a file to replace it."
            )
        )
    else:
        st.info(
            "No file yet: upload a Hugging Face config.json or a JSON object of kvcalc spec "
            f"fields. kvcalc reads at most 1 MB; the box refuses files over {UPLOAD_MB} MB itself."
        )
    if spec is not None:
        extra = {shared_model.PARAM: shared_model.encode(spec)}

state.sync(keys, extra=extra)

if spec is not None:
    user_text = src != "preset"  # names, notes and sources someone typed: plain text only
    if user_text:
        st.session_state[state.STICKY + "model"] = data.CUSTOM  # offered on the other pages
    with ui.guarded():
        report = calc.params_report(spec)
        st.subheader(plain.md(spec.label), anchor=False)
        m = st.columns(5)
        m[0].metric("Parameters", units.human_count(report.total), help=f"{report.total:,}")
        m[1].metric("Active per token", units.human_count(report.active_per_token))
        kv_tok = calc.kv_bytes_per_token(spec, "bf16")
        m[2].metric("KV per token (bf16)", units.iec_bytes(kv_tok), help=f"{kv_tok:,} bytes")
        m[3].metric(
            "Attention",
            spec.attention_kind,
            help=f"{spec.num_attention_heads:,} query heads, {spec.n_kv_heads:,} KV heads",
        )
        m[4].metric(
            "Context (tokens)",
            f"{spec.max_position_embeddings:,}",
            help="max_position_embeddings: the longest sequence the model was built for",
        )
        if report.published:
            ui.caption(f"Published: {report.published} parameters; computed {report.total:,}.")

        left, right = st.columns([1, 1])  # the spec's long field names need half the width
        with left:
            st.markdown("**Spec**")
            ui.table(tables.spec_rows(spec, META), right=("value",))
            if spec.source:
                st.markdown(f"**Sources** (retrieved {plain.md(spec.retrieved or 'n/a')})")
                if user_text:
                    st.text("\n".join(spec.source))
                else:  # the presets' own links
                    st.markdown("\n".join(f"- <{u}>" for u in spec.source))
            if spec.notes and user_text:
                st.text(spec.notes)
            elif spec.notes:
                ui.caption(spec.notes)
        with right:
            st.markdown("**Parameter breakdown** (sum = total)")
            df = data.param_frame(spec)
            ui.show_chart(ui.chart(charts.params_chart, df), df, "param_breakdown")

        quant_view.show(spec)  # a quantized checkpoint: its schemes and stored bytes

        if not user_text:
            with ui.guarded():
                err = data.errata_for(spec)
                if len(err):
                    st.subheader(
                        f"What the lecture notes say about {spec.family} models", anchor=False
                    )
                    ui.caption(errata_summary(err["verdict"], spec.family))
                    ui.table(tables.errata(err))
