"""Every dashboard page under streamlit.testing's AppTest: it runs without exception, the data
behind its charts equals kvcalc's numbers (and arithmetic written out here), widgets change the
output, the URL holds the view, and bad input shows st.error, never a traceback.

Chart data is read back from the Vega-Lite element Streamlit emits (its Arrow datasets), i.e.
what the browser draws, not a value the page kept aside.
"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("streamlit")
pytest.importorskip("altair")

from dashboard_util import (  # noqa: E402
    ROOT,
    assert_clean,
    chart_data,
    errors,
    notes,
    open_page,
    table,
)

import calc  # noqa: E402
from calc.serving.engine import DEFAULT_VERSION  # noqa: E402
from dashboard.plain import unescape  # noqa: E402

# --- app --------------------------------------------------------------------------------------


def test_every_page_runs_and_has_a_chart_with_a_csv_button():
    at = open_page()
    for view in ("model", "kv_cache", "attention", "compare", "capacity", "validation"):
        if not (ROOT / "dashboard" / "views" / f"{view}.py").is_file():
            pytest.fail(f"views/{view}.py is missing")
        at.switch_page(f"views/{view}.py").run()
        assert_clean(at)
        assert len(at.get("vega_lite_chart")) >= 1, view
        assert any(b.key.startswith("csv_") for b in at.get("download_button")), view


# --- Model ------------------------------------------------------------------------------------


def test_model_page_breakdown_is_llama_2_70b_by_default():
    at = open_page("model")
    assert_clean(at)
    df = chart_data(at, "param_breakdown").set_index("component")["params"]
    # Llama 2 70B config.json: L=80, h=8192, H=64, G=8, d=128, f=28672, V=32000, untied.
    assert df["attn/kv"] == 80 * 2 * 8192 * (8 * 128)  # W_k, W_v: h x (G*d) per layer
    assert df["mlp"] == 80 * 3 * 8192 * 28672  # gate, up, down
    assert df["lm_head"] == 32000 * 8192
    assert df.to_dict() == calc.param_breakdown(calc.load_preset("llama-2-70b"))
    assert at.query_params["model"] == ["llama-2-70b"] or at.query_params["model"] == "llama-2-70b"


def test_model_page_reads_the_model_from_the_url_and_family_switch_changes_it():
    at = open_page("model", model="gpt-3-175b")
    assert_clean(at)
    df = chart_data(at, "param_breakdown").set_index("component")["params"]
    assert df["embed"] == 50257 * 12288  # GPT-3 paper Table 2.1: d_model 12288; GPT-2 BPE vocab
    at.selectbox(key="model:family").set_value("llama-3").run()
    assert_clean(at)
    assert at.selectbox(key="model:model").value.startswith("llama-3")
    df = chart_data(at, "param_breakdown").set_index("component")["params"]
    assert (
        df["embed"] == 128256 * calc.load_preset(at.selectbox(key="model:model").value).hidden_size
    )


def test_model_page_shows_the_seed_errata_for_the_family():
    at = open_page("model", model="palm-540b")
    assert_clean(at)
    errata = table(at)
    palm = errata[errata["claim about"] == "PaLM 540B heads"]
    assert list(palm["verdict"]) == ["wrong"]  # the notes say 16 heads; PaLM Table 1 says 48
    # the notes' own words, quoted, with where they are: the user can see what is claimed
    assert list(palm["the notes say (quoted)"]) == ["│ PaLM 540B │ 16 │ 1 │ MQA │"]
    assert list(palm["where"]) == ["000_db246fcb19f289a2.txt §11.6 table, line 490"]
    # "2 claims ... concern palm models ...; 2 of them are wrong": the count agrees
    (cap,) = [unescape(c.value) for c in at.caption if "lecture notes" in c.value.replace("\\", "")]
    n, wrong = len(errata), int((errata["verdict"] == "wrong").sum())
    assert f"{n} claims in them concern palm models" in cap
    assert f"{wrong} of them are wrong" in cap
    one = open_page("model", model="gemma-7b")  # one claim: no "1 claims ... 1 are"
    (cap,) = [unescape(c.value) for c in one.caption if "lecture notes" in unescape(c.value)]
    assert "1 claim in them concerns gemma models" in cap and ": it is correct." in cap


def test_custom_fields_build_a_model_and_impossible_fields_show_st_error():
    at = open_page("model", src="custom")
    assert_clean(at)
    # defaults: a Llama-2-7B-shaped GQA model, L=32, h=4096, H=32, G=8, f=11008, V=32000
    df = chart_data(at, "param_breakdown").set_index("component")["params"]
    assert df["attn/kv"] == 32 * 2 * 4096 * (8 * 128)
    at.number_input(key="model:c_kv").set_value(5).run()
    assert "'num_key_value_heads' must divide num_attention_heads=32: got 5" in errors(at)
    assert not at.get("vega_lite_chart")


LLAMA_2_7B_CONFIG = {  # huggingface.co/meta-llama/Llama-2-7b-hf/blob/main/config.json
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 11008,
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 32,
    "max_position_embeddings": 4096,
    "rms_norm_eps": 1e-05,
    "tie_word_embeddings": False,
    "vocab_size": 32000,
    "hidden_act": "silu",
}


def upload(at, name: str, content: bytes):
    at.file_uploader(key="model:upload").set_value((name, content, "application/json"))
    return at.run()


def test_upload_of_a_hf_config_json_shows_its_breakdown():
    at = upload(
        open_page("model", src="upload"), "config.json", json.dumps(LLAMA_2_7B_CONFIG).encode()
    )
    assert_clean(at)
    df = chart_data(at, "param_breakdown")
    # 32000*4096 embed + 32 * (4*4096^2 attn + 3*4096*11008 mlp + 2*4096 norms) + 4096 final
    # norm + 32000*4096 LM head = 6,738,415,616, the numel transformers reports for Llama-2-7b-hf
    assert df["params"].sum() == 6_738_415_616
    # the uploaded model is now offered as "custom" on the other pages
    at.switch_page("views/kv_cache.py").run()
    assert "custom" in at.selectbox(key="kv:model").options[-1]


@pytest.mark.parametrize(
    "name, content, expected",
    [
        ("config.json", b'{"model_type": "llama", "hidden_size": ', "malformed JSON"),
        ("config.json", b"[1, 2, 3]", "expected a JSON object: got list"),
        ("config.json", b"\xff\xfe\x00", "not UTF-8"),
        ("evil.py", b"import os; os.system('echo owned')", "must be a .json file"),
        (
            "config.json",
            b'{"x": "' + b"a" * 1_000_001 + b'"}',
            "at most 1,000,000 bytes (1 MB): got 1,000,010 bytes",
        ),
        ("config.json", json.dumps({"model_type": "t5"}).encode(), "'model_type' must be one of"),
        (
            "config.json",
            json.dumps({**LLAMA_2_7B_CONFIG, "num_key_value_heads": 5}).encode(),
            "must divide num_attention_heads=32: got 5",
        ),
        (
            "config.json",
            json.dumps({**LLAMA_2_7B_CONFIG, "hidden_size": -4096}).encode(),
            "hidden_size",
        ),
    ],
    ids=[
        "malformed",
        "not-object",
        "not-utf8",
        "not-json-name",
        "too-big",
        "unsupported",
        "impossible-kv-heads",
        "negative-width",
    ],
)
def test_bad_uploads_show_st_error(name, content, expected):
    at = upload(open_page("model", src="upload"), name, content)
    msg = errors(at)
    assert expected in msg
    assert "Traceback" not in msg


# --- KV cache ---------------------------------------------------------------------------------


def test_kv_chart_point_for_llama_2_70b_at_4096_tokens():
    at = open_page("kv_cache", models=["llama-2-70b", "mistral-7b-v0.1"], max_ctx="131072")
    assert_clean(at)
    df = chart_data(at, "kv_vs_context")
    point = df[(df["model"] == "llama-2-70b") & (df["seq_len"] == 4096)]
    expected = 2 * 80 * 8 * 128 * 4096 * 2  # K and V x layers x KV heads x d x tokens x bf16
    assert list(point["kv_cache_bytes"]) == [expected]
    assert expected == calc.kv_cache_bytes(calc.load_preset("llama-2-70b"), 4096, 1, "bf16")
    assert point["kv_cache_GiB"].item() == pytest.approx(1.25)  # 1,342,177,280 / 2^30
    # Mistral 7B v0.1 slides every layer over 4096 tokens: flat from 4096 on
    mis = df[df["model"] == "mistral-7b-v0.1"].set_index("seq_len")["kv_cache_bytes"]
    assert mis[4096] == mis[131072] == 2 * 32 * 8 * 128 * 4096 * 2
    assert mis[2048] == mis[4096] // 2


def test_kv_dtype_and_batch_widgets_change_the_chart_and_the_url():
    at = open_page("kv_cache", models="llama-2-70b")
    at.selectbox(key="kv:dtype").set_value("fp8").run()
    at.number_input(key="kv:batch").set_value(3).run()
    assert_clean(at)
    df = chart_data(at, "kv_vs_context")
    point = df[(df["model"] == "llama-2-70b") & (df["seq_len"] == 4096)]
    assert point["kv_cache_bytes"].item() == 3 * 2 * 80 * 8 * 128 * 4096 * 1  # fp8: 1 byte
    assert at.query_params["dtype"] in ("fp8", ["fp8"])
    assert at.query_params["batch"] in ("3", ["3"])


def test_kv_url_state_reproduces_the_view_and_bad_values_fall_back():
    at = open_page("kv_cache", models=["llama-2-7b"], dtype="int4", batch="2", max_ctx="8192")
    assert_clean(at)
    assert at.multiselect(key="kv:models").value == ["llama-2-7b"]
    df = chart_data(at, "kv_vs_context")
    assert df["seq_len"].max() == 8192
    assert df.set_index("seq_len")["kv_cache_bytes"][1024] == 2 * 2 * 32 * 32 * 128 * 1024 // 2
    bad = open_page("kv_cache", dtype="fp7", batch="-3", max_ctx="banana", models="nope")
    assert_clean(bad)
    assert bad.selectbox(key="kv:dtype").value == "bf16"
    assert bad.number_input(key="kv:batch").value == 1
    # ... and the page says what it replaced, and with what
    said = notes(bad)
    assert "The link's dtype='fp7' is not one of the choices: showing bf16 instead." in said
    assert "The link's batch='-3' is outside 1 to 16,777,216: showing 1 instead." in said
    assert "The link's max_ctx='banana' is not a value here" in said
    assert "The link's models='nope' is not among the choices: left out" in said


def test_kv_mha_gqa_mqa_bytes_and_savings():
    at = open_page("kv_cache", model="llama-2-70b", ctx="4096")
    assert_clean(at)
    df = chart_data(at, "attention_variants").set_index("variant")
    per_head = 2 * 80 * 128 * 4096 * 2  # one KV head, all layers, 4096 tokens, bf16
    assert df["kv_cache_bytes"].to_dict() == {
        "MHA": 64 * per_head,
        "GQA": 8 * per_head,
        "MQA": per_head,
        # MLA with DeepSeek-V2's ranks for head_dim 128: latent 4 x 128 + rope key 64
        "MLA": 80 * (512 + 64) * 4096 * 2,
        # sliding: Mistral's 4096-token window, which 4096 tokens just fill
        "sliding": 8 * per_head,
        # Gated DeltaNet state per layer: conv (2 x 8 x 128 + 64 x 128) x (4 - 1) taps
        # + 64 value heads x 128 x 128 recurrent, bf16, 80 layers
        "linear": 80 * ((2 * 8 * 128 + 64 * 128) * 3 + 64 * 128 * 128) * 2,
    }
    assert df["savings"]["GQA"] == 1 - 8 / 64
    at.number_input(key="kv:ctx").set_value(8192).run()
    df2 = chart_data(at, "attention_variants").set_index("variant")
    assert df2["kv_cache_bytes"]["GQA"] == 2 * df["kv_cache_bytes"]["GQA"]


def test_kv_page_with_no_models_says_so():
    at = open_page("kv_cache")
    at.multiselect(key="kv:models").set_value([]).run()
    assert_clean(at)
    assert any("at least one model" in i.value for i in at.info)


# --- Attention cost ---------------------------------------------------------------------------


def test_attention_flops_and_score_memory_at_4096_tokens():
    at = open_page("attention", model="llama-2-70b")
    assert_clean(at)
    f = chart_data(at, "attention_flops")
    f = f[f["seq_len"] == 4096].set_index("series")["flops"]
    per_pair = 4 * 64 * 128 * 80  # QK^T + AV: 4*H*d per pair, 80 layers
    assert f["prefill attention, full mask"] == per_pair * 4096**2
    assert f["prefill attention, causal"] == per_pair * 4096 * 4097 // 2
    assert f["decode attention, 1 token"] == per_pair * 4096
    m = chart_data(at, "attention_memory")
    m = m[m["seq_len"] == 4096].set_index("series")["bytes"]
    assert m["materialized scores (B·H·n²)"] == 64 * 4096**2 * 2  # one layer, bf16
    rep = calc.attention_cost(calc.load_preset("llama-2-70b"), 4096)
    assert m["fused kernel (output + row stats)"] == rep.fused_attention_bytes
    s = chart_data(at, "attention_share")
    s = s[s["seq_len"] == 4096].set_index("series")["share"]
    assert s["prefill (causal)"] == pytest.approx(rep.attention_share_prefill)


def test_attention_batch_widget_scales_flops():
    at = open_page("attention", model="llama-2-7b")
    before = chart_data(at, "attention_flops")
    at.number_input(key="attention:batch").set_value(4).run()
    assert_clean(at)
    after = chart_data(at, "attention_flops")
    assert (after["flops"] == 4 * before["flops"]).all()


# --- Compare ----------------------------------------------------------------------------------


def test_compare_kv_per_token_and_widgets():
    at = open_page("compare", models=["llama-2-70b", "gpt-3-175b"])
    assert_clean(at)
    kv = chart_data(at, "kv_per_token").set_index("model")["kv_bytes_per_token"]
    assert kv["llama-2-70b"] == 2 * 80 * 8 * 128 * 2  # 327,680 B = 320 KiB, bf16
    assert kv["gpt-3-175b"] == 2 * 96 * 96 * 128 * 2  # MHA: 96 heads of 128, 96 layers
    at.multiselect(key="compare:models").set_value(["llama-2-70b"]).run()
    assert list(chart_data(at, "kv_per_token")["model"]) == ["llama-2-70b"]


def test_compare_max_context_on_a_gpu_is_calc_capacity():
    from calc.capacity import memory_plan
    from calc.hardware import load_hardware

    at = open_page("compare", models=["llama-2-7b", "mistral-7b-v0.1"], gpu="h100-sxm", gpus="1")
    assert_clean(at)
    mc = chart_data(at, "max_context").set_index("model")
    want = memory_plan("llama-2-7b", load_hardware("h100-sxm"), gpus=1, batch=1, seq_len=1)
    assert mc["max_context_tokens"]["llama-2-7b"] == want.max_context_tokens
    # the context's KV (2 x 32 layers x 32 heads x 128 x 2 B = 512 KiB per token) fits the pool
    assert want.max_context_tokens * 2 * 32 * 32 * 128 * 2 <= want.kv_budget_bytes
    # Mistral 7B v0.1 slides every layer: its KV stops growing, so no context limit
    assert "mistral-7b-v0.1" not in mc.index  # nothing to draw
    longest = table(at, 0).set_index("model")["longest context on the GPUs"]
    assert "unbounded" in longest["Mistral 7B v0.1"]
    # memory allows more than the model's 4,096-token context, and the table says so
    assert want.max_context_tokens > 4096
    assert longest["Llama 2 7B"] == f"{want.max_context_tokens:,} (past the model's context)"
    at.selectbox(key="compare:gpu").set_value("l4").run()
    smaller = chart_data(at, "max_context").set_index("model")["max_context_tokens"]
    assert smaller["llama-2-7b"] < mc["max_context_tokens"]["llama-2-7b"]  # 24 GB vs 80 GB


# --- Capacity planner -------------------------------------------------------------------------


CAPACITY = dict(model="llama-2-70b", gpu="h100-sxm", gpus="2", tp="2", ctx="4096", batch="4")


def test_capacity_memory_breakdown_is_the_calc_plan():
    from calc.plan import plan

    at = open_page("capacity", **CAPACITY)
    assert_clean(at)
    want = plan("llama-2-70b", "h100-sxm", gpus=2, tp=2, seq_len=4096, batch=4)
    mem = chart_data(at, "memory_breakdown").set_index("category")["bytes"]
    assert mem.to_dict() == want.memory.to_frame().set_index("category")["bytes"].to_dict()
    # TP=2 halves the weights: 68,976,648,192 bf16 params x 2 B / 2 GPUs (+ nothing replicated
    # but the norms), and the KV of 4 x 4096 tokens is 4 x 4096 x 2 x 80 x (8/2 heads) x 128 x 2
    assert abs(mem["weights"] - 68_976_648_192) / 68_976_648_192 < 1e-4
    assert mem["kv_cache"] == 4 * 4096 * 2 * 80 * 4 * 128 * 2
    # the bar spans the GPU: nvidia-smi total of an H100 SXM 80GB
    assert mem.sum() == want.memory.total_memory_bytes
    assert [unescape(s.value) for s in at.success] == [want.memory.message]


def test_capacity_curves_heatmap_and_roofline_follow_the_widgets():
    from calc.capacity import memory_plan

    at = open_page("capacity", **CAPACITY)
    conc = chart_data(at, "max_concurrent_seqs").set_index("seq_len")["max_concurrent_seqs"]
    want = memory_plan("llama-2-70b", "h100-sxm", gpus=2, seq_len=8192, batch=1)
    assert conc[8192] == want.max_concurrent_seqs
    assert conc.is_monotonic_decreasing
    grid = chart_data(at, "fit_heatmap")
    cell = grid[(grid["batch"] == 4) & (grid["seq_len"] == 4096)]
    assert list(cell["fits"]) == ["fits"]
    assert set(grid["fits"]) == {"fits", "no fit"}  # 256 x 128K tokens never fits on 2 GPUs
    tput = chart_data(at, "throughput").set_index("batch")
    assert tput["tokens_per_s_total"].is_monotonic_increasing  # decode is memory-bound
    # more GPUs: more room, more sequences
    at.number_input(key="capacity:gpus").set_value(4).run()
    assert_clean(at)
    assert at.selectbox(key="capacity:tp").value == 4
    conc4 = chart_data(at, "max_concurrent_seqs").set_index("seq_len")["max_concurrent_seqs"]
    assert conc4[8192] > conc[8192]
    assert at.query_params["gpus"] in ("4", ["4"])


def test_capacity_custom_gpu_and_impossible_tp_show_errors_not_tracebacks():
    at = open_page(
        "capacity", **{**CAPACITY, "model": "llama-2-7b", "gpu": "custom", "c_mem": "40"}
    )
    assert_clean(at)
    mem = chart_data(at, "memory_breakdown")
    assert mem["bytes"].sum() == 40 * 2**30  # a custom GPU is taken at its nominal GiB
    # Llama 2 70B's bf16 weights (138 GB) do not fit 2 x 40 GiB: a warning, not an error
    at.selectbox(key="capacity:model").set_value("llama-2-70b").run()
    assert not at.exception
    assert "does not fit" in at.warning[0].value
    # ... while vLLM, with no room for one cache block, refuses to start (the Engine section)
    assert len(at.error) == 1
    assert unescape(at.error[0].value).startswith(
        f"vLLM {DEFAULT_VERSION['vllm']} refuses to start: No available"
    )
    # Llama 2 70B has 8 KV heads and 64 query heads: TP=3 cannot split them, so the menu does
    # not offer it; a link asking for it gets tp=1 (3 pipeline stages) and a note saying so
    bad = open_page("capacity", **{**CAPACITY, "gpus": "3", "tp": "3"})
    assert_clean(bad)
    assert bad.selectbox(key="capacity:tp").options == ["1"]
    assert "The link's tp='3' is not one of the choices: showing 1 instead." in notes(bad)
    assert "tp=1, pp=3" in unescape(bad.success[0].value)


def test_capacity_fewest_gpus_table_lists_every_gpu_preset():
    from calc.fit import fewest_gpus
    from calc.hardware import list_hardware

    at = open_page("capacity", **CAPACITY)
    few = table(at, -2)  # the last table is the Engine section's inverse box
    assert len(few) == len(list_hardware())
    h100 = few[few["GPU"].str.contains("H100 SXM")].iloc[0]
    want = fewest_gpus("llama-2-70b", "h100-sxm", seq_len=4096, batch=4)
    assert (h100["GPUs"], h100["TP"]) == (str(want.gpus), str(want.tp))


# --- Validation -------------------------------------------------------------------------------


def test_validation_page_shows_the_committed_reports():
    from dashboard import validation_data as vd

    files = vd.report_files()
    assert files, "reports/validation-cpu.json is committed by the validation issue"
    at = open_page("validation")
    assert_clean(at)
    rep = vd.load_report(files[0])
    df = chart_data(at, files[0].stem.replace("-", "_"))
    # every parameter row predicted by kvcalc is calc.param_breakdown of that preset (or of
    # that layer-kind model of calc/validate/kinds.py)
    from calc.validate.kinds import CONFIGS, kind_spec

    params = df[df["check"] == "params"]
    for row in params.itertuples():
        spec = kind_spec(row.model) if row.model in CONFIGS else calc.load_preset(row.model)
        comps = calc.param_breakdown(spec)
        if row.label in comps:
            assert row.predicted == comps[row.label], (row.model, row.label)
    assert len(df) == sum(
        1
        for m in rep.models
        for c in m.checks
        if c.tolerance_kind == "relative" and c.predicted > 0 and c.measured > 0
    )


def test_validation_page_reads_the_writers_json(monkeypatch, tmp_path):
    """A report as calc.validate.report.to_json writes it (computed fields and summary too)."""
    from calc.validate import Check, ModelValidation, ValidationReport
    from calc.validate.report import to_json
    from dashboard import validation_data as vd

    kv_heads = 2 * 80 * 8 * 128  # Llama 2 70B: W_k, W_v x 80 layers x 8 KV heads x d=128
    checks = [
        Check(
            check="params",
            label="attn/kv",
            unit="params",
            predicted=kv_heads * 8192,
            measured=kv_heads * 8192,
            tolerance=0,
        ),
        Check(
            check="kv_cache",
            label="n=4096",
            unit="bytes",
            predicted=2 * 80 * 8 * 128 * 4096 * 2,
            measured=2 * 80 * 8 * 128 * 4096 * 2 + 1,
            tolerance=0,
        ),  # one byte off: FAIL
        Check(
            check="peak_memory",
            label="exponent",
            unit="exponent",
            predicted=2.0,
            measured=2.01,
            tolerance=0.05,
            tolerance_kind="absolute",
        ),
    ]
    rep = ValidationReport(
        device="cpu",
        device_name="CPU (test)",
        torch_version="x",
        tolerances={"params": "exact"},
        models=[
            ModelValidation(
                model="llama-2-70b",
                device="cpu",
                dtype="fp32",
                setup={},
                checks=checks,
                seconds=1.0,
            )
        ],
        seconds=1.0,
    )
    (tmp_path / "validation-cpu.json").write_text(to_json(rep))
    (tmp_path / "validation-cuda.json").write_text(
        to_json(rep.model_copy(update={"device": "cuda"}))
    )
    monkeypatch.setenv(vd.REPORTS_ENV, str(tmp_path))
    at = open_page("validation")
    assert_clean(at)
    assert [t.label for t in at.tabs] == ["CPU", "CUDA"]
    df = chart_data(at, "validation_cpu").set_index("label")
    assert (
        df["predicted"]["attn/kv"]
        == calc.param_breakdown(calc.load_preset("llama-2-70b"))["attn/kv"]
    )
    assert df["result"].to_dict() == {"attn/kv": "pass", "n=4096": "FAIL"}  # exponent: not a size
    assert "SOME CHECKS FAIL" in at.markdown[0].value
    (tmp_path / "validation-cpu.json").write_text("{not json")
    assert "validation-cpu.json: malformed JSON" in errors(open_page("validation"))


def test_validation_live_run_with_progress(monkeypatch, tmp_path):
    pytest.importorskip("torch")
    from dashboard import validation_data as vd

    monkeypatch.setenv(vd.REPORTS_ENV, str(tmp_path))  # no committed report: the info line
    at = open_page("validation", model="gpt-3-125m")
    assert_clean(at)
    assert any("No committed validation report" in i.value for i in at.info)
    at.button(key="validation:run").click().run(timeout=300)
    assert_clean(at)
    (bar,) = at.get("progress")
    assert bar.proto.value == 100  # percent: every check reported done
    df = chart_data(at, "live_validation")
    p = df[df["check"] == "params"].set_index("label")["predicted"]
    # GPT-3 125M (GPT-3 paper Table 2.1: 12 layers, d_model 768): W_q is 768 x 768 per layer
    assert p["attn/q"] == 12 * (768 * 768 + 768)  # + q bias (GPT-2 style attention biases)
    assert (df["result"] == "pass").all()
