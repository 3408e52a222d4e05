"""What users type, upload or link, under AppTest: user text is escaped before any Markdown
element shows it, sizes are bounded (calc.limits) with the bound beside the input and no stale
results, hostile files give one error naming the file and the field, a link says what it
replaced, and an uploaded or custom model travels in the URL. The browser tests check the same
in Chromium (test_dashboard_browser*.py)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("streamlit")

from dashboard_util import (  # noqa: E402
    assert_clean,
    chart_data,
    errors,
    notes,
    open_page,
    table,
)

import calc  # noqa: E402
from dashboard.plain import md, unescape  # noqa: E402
from dashboard.shared_model import encode  # noqa: E402

LLAMA = {  # Llama-2-7b-hf config.json, cut to the keys kvcalc reads
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 11008,
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 32,
    "max_position_embeddings": 4096,
    "vocab_size": 32000,
}
EVIL = "**EVIL** [link](http://evil.example) # head :red[x] <b>y</b>"


def upload(at, name: str, content: bytes):
    at.file_uploader(key="model:upload").set_value((name, content, "application/json"))
    return at.run()


# --- Markdown ---------------------------------------------------------------------------------


def test_plain_md_escapes_every_markdown_construct_and_reads_back_exactly():
    for text in (EVIL, ":material/home: www.x.org a@b.co $x^2$ `c` ~~s~~ | t |", "5.37 GB"):
        assert unescape(md(text)) == text
    assert "**" not in md("**b**") and "[" not in md("[a](b)").replace("\\[", "")


def test_an_uploaded_configs_names_and_notes_are_not_markdown():
    fields = {"name": "x", "display_name": EVIL, "notes": EVIL, "source": ["http://evil.example"]}
    fields |= {k: LLAMA[k] for k in ("hidden_size", "intermediate_size", "num_hidden_layers")}
    fields |= {"num_attention_heads": 32, "vocab_size": 32000}
    at = upload(open_page("model", src="upload"), "evil.json", json.dumps(fields).encode())
    assert_clean(at)
    assert [h.value for h in at.subheader][0] == md(EVIL)  # the title, escaped
    assert EVIL in [t.value for t in at.text]  # notes: st.text, no Markdown at all
    assert "http://evil.example" in [t.value for t in at.text]  # sources: no live link
    assert not any("evil.example>" in m.value for m in at.markdown)


def test_error_messages_quoting_the_file_are_escaped():
    at = upload(open_page("model", src="upload"), "**x**.json", b"[1]")
    (err,) = at.error
    assert err.value.startswith(md("**x**.json"))
    assert unescape(err.value) == "**x**.json: expected a JSON object: got list"


# --- hostile uploads: one error, naming the file and the field ----------------------------------


@pytest.mark.parametrize(
    "name, content, expected",
    [
        (
            "config.json",
            json.dumps({**LLAMA, "num_hidden_layers": 10**12}).encode(),
            "config.json: 'num_hidden_layers' must be <= 10,000: got 1,000,000,000,000",
        ),
        (
            "config.json",
            json.dumps({**LLAMA, "hidden_size": 10**9}).encode(),
            "config.json: 'hidden_size' must be <= 1,048,576: got 1,000,000,000",
        ),
        ("deep.json", b"[" * 10_000 + b"]" * 10_000, "deep.json: JSON nested more than 64"),
        (
            "u.json",
            json.dumps(LLAMA).encode("utf-16"),
            "u.json: file is not UTF-8 text: it is UTF-16",
        ),
        (
            "big.json",
            b" " * 60_000_000,
            "big.json: file must be at most 1,000,000 bytes (1 MB): got 60,000,000 bytes",
        ),
    ],
    ids=["1e12-layers", "1e9-hidden", "deep", "utf-16", "60-MB"],
)
def test_hostile_uploads_give_one_error_naming_the_file(name, content, expected):
    at = upload(open_page("model", src="upload"), name, content)
    msg = errors(at)
    assert msg.startswith(expected)
    assert len(at.error) == 1 and msg.count(name) == 1  # named once, no "<config dict>"
    assert "<config dict>" not in msg and "recursion" not in msg.lower()


def test_an_uploaded_hf_config_is_named_after_the_file_or_its_architecture():
    at = upload(open_page("model", src="upload"), "config.json", json.dumps(LLAMA).encode())
    assert_clean(at)
    assert unescape(at.subheader[0].value) == "LlamaForCausalLM (config.json)"  # not hf-llama
    at = upload(open_page("model", src="upload"), "llama-2-7b.json", json.dumps(LLAMA).encode())
    assert unescape(at.subheader[0].value) == "llama-2-7b"


# --- size inputs: the bound beside the input, no stale results ----------------------------------


def test_custom_fields_show_their_limit_and_refuse_values_past_it():
    at = open_page("model", src="custom")
    assert_clean(at)
    assert "1 to 1,048,576" in [c.value for c in at.caption]  # hidden_size's bound, shown
    at.number_input(key="model:c_hidden").set_value(10**9).run()
    assert "'hidden_size' must be from 1 to 1,048,576: got 1,000,000,000" in errors(at)
    assert at.number_input(key="model:c_hidden").value == 10**9  # kept as typed, not snapped
    assert not at.get("vega_lite_chart") and not at.metric  # no results from the old value
    assert any("No results until the inputs" in i.value for i in at.info)


def test_capacity_hides_every_result_while_an_input_is_out_of_range():
    at = open_page("capacity", model="llama-2-7b", gpu="h100-sxm", gpus="1", batch="4")
    assert at.metric and at.get("vega_lite_chart")
    at.number_input(key="capacity:batch").set_value(10**8).run()
    assert "'batch' must be from 1 to 16,777,216: got 100,000,000" in errors(at)
    assert not at.metric and not at.get("vega_lite_chart") and not at.table


# --- the TP menu ----------------------------------------------------------------------------------


def test_tp_menu_offers_only_degrees_the_heads_allow_and_says_why():
    # Llama 2 70B: 64 query heads, 8 KV heads; on 6 GPUs tp may be 1 or 2 (3 and 6 split neither)
    at = open_page("capacity", model="llama-2-70b", gpu="h100-sxm", gpus="6")
    assert_clean(at)
    tp = at.selectbox(key="capacity:tp")
    assert tp.options == ["1", "2"] and tp.value == 2
    assert "so 3, 6 are not offered" in tp.help
    assert "tp=2, pp=3" in unescape(at.success[0].value)


# --- links ----------------------------------------------------------------------------------------


def test_a_link_to_the_custom_model_rebuilds_it_on_any_page():
    spec = calc.from_hf_config(LLAMA, name="my-llama")
    at = open_page("kv_cache", models=["custom", "llama-2-7b"], spec=encode(spec))
    assert_clean(at)
    df = chart_data(at, "kv_vs_context")
    mine = df[(df["model"] == "my-llama") & (df["seq_len"] == 4096)]
    assert list(mine["kv_cache_bytes"]) == [2 * 32 * 32 * 128 * 4096 * 2]  # MHA, bf16
    assert at.query_params["spec"] in (encode(spec), [encode(spec)])  # and stays in the URL


def test_a_link_naming_a_custom_model_it_does_not_carry_says_so():
    at = open_page("capacity", model="custom")
    assert_clean(at)
    assert "The link's model=custom names a model built or uploaded on the Model page" in notes(at)
    assert at.selectbox(key="capacity:model").value == "llama-2-70b"


def test_a_link_with_a_broken_spec_says_what_is_wrong():
    at = open_page("kv_cache", models="custom", spec='{"name": "x", "num_hidden_layers": 1e12}')
    assert_clean(at)
    said = notes(at)
    assert "The link's model fields could not be read: the link's 'spec' parameter:" in said
    assert "'num_hidden_layers' must be <= 10,000" in said


def test_an_uploaded_models_link_shows_it_without_the_file():
    at = upload(open_page("model", src="upload"), "config.json", json.dumps(LLAMA).encode())
    link = at.query_params["spec"]
    link = link[0] if isinstance(link, list) else link
    again = open_page("model", src="upload", spec=link)  # a new session, no file
    assert_clean(again)
    assert unescape(again.subheader[0].value) == "LlamaForCausalLM (config.json)"
    assert any("rebuilt from this link's fields" in unescape(i.value) for i in again.info)
    assert chart_data(again, "param_breakdown")["params"].sum() == 6_738_415_616


def test_the_spec_table_reads_like_the_config():
    at = open_page("model", model="llama-2-70b")
    spec = table(at, 0).set_index("field")["value"]
    assert spec["hidden_size"] == "8,192" and spec["tie_word_embeddings"] == "no"


def test_a_long_name_is_cut_in_the_link_so_the_link_still_works():
    spec = calc.from_hf_config(LLAMA, name="x" * 5000)
    link = encode(spec)
    assert len(link) < 1000 and '"name":"' + "x" * 200 + '"' in link
    at = open_page("kv_cache", models="custom", spec=link)
    assert_clean(at)
    assert not at.warning  # rebuilt, nothing to say


def test_the_spec_table_flattens_nested_fields_and_hides_mamba_flags_without_mamba():
    from dashboard import tables

    gemma = tables.spec_rows(calc.load_preset("gemma-3-27b"), ()).set_index("field")["value"]
    # gemma-3-27b.toml: rope_scaling {rope_type "linear", factor 8.0}; a SigLIP tower of 27 layers
    assert gemma["rope_scaling · rope_type"] == "linear" and gemma["rope_scaling · factor"] == "8.0"
    assert gemma["vision · num_hidden_layers"] == "27" and "vision" not in gemma
    assert "use_conv_bias" not in gemma and "mamba_proj_bias" not in gemma
    nemo = tables.spec_rows(calc.load_preset("nemotron-3-nano-30b-a3b"), ()).set_index("field")
    assert nemo.loc["use_conv_bias", "value"] in ("yes", "no")
