"""How results read, under AppTest: tables for people (no raw floats, None or False, thousands
separators), latency only for a plan that fits and in s / h / days, the model's own context
limit marked on every page, one unit convention per quantity, readable charts with many
models, and the lecture notes' claims quoted, not alluded to."""

from __future__ import annotations

import json
import re

import pytest

pytest.importorskip("streamlit")

from dashboard_util import (  # noqa: E402
    assert_clean,
    chart_data,
    open_page,
    table,
)

from calc.serving.engine import DEFAULT_VERSION  # noqa: E402
from dashboard.plain import unescape  # noqa: E402

VIEWS = ("model", "kv_cache", "attention", "capacity", "compare", "validation")


def chart_spec(at, name: str) -> dict:
    for el in at.get("vega_lite_chart"):
        spec = json.loads(el.proto.spec)
        if spec.get("usermeta", {}).get("kvcalc") == name:
            return spec
    raise AssertionError(f"no chart {name!r}")


# --- tables ---------------------------------------------------------------------------------------

RAW = [
    (re.compile(r"\d\.\d{5,}"), "a raw float (15303.2547, 0.0000008)"),
    (re.compile(r"(?<![\w.,/])\d{5,}(?![\w.,])"), "a number without thousands separators"),
    (re.compile(r"^(None|nan|NaN|True|False)$"), "a Python value"),
]


@pytest.mark.parametrize("view", VIEWS)
def test_every_table_cell_reads_like_a_person_wrote_it(view):
    params = {"capacity": {"model": "llama-2-70b", "gpus": "2", "batch": "4"}}.get(view, {})
    at = open_page(view, **params)
    assert_clean(at)
    cells = [str(v) for i in range(len(at.table)) for v in table(at, i).to_numpy().ravel()]
    for cell in cells:
        for pattern, what in RAW:
            assert not pattern.search(cell), f"{what}: {cell!r}"


def test_roofline_and_fewest_gpu_tables_are_formatted():
    at = open_page("capacity", model="llama-2-70b", gpu="h100-sxm", gpus="2", batch="4")
    phases = table(at, 0).set_index("phase")
    # prefill of 4 x 3,840 tokens on 2 x H100: arithmetic intensity ~15,303 FLOP/B, 2.33 s
    assert re.fullmatch(r"\d{1,3}(,\d{3})+", phases.loc["prefill", "FLOP / byte"])
    assert phases.loc["prefill", "time"].endswith(" s")
    few = table(at, -2)  # the last table is the Engine section's inverse box
    assert set(few["fits"]) <= {"yes"} | {"no (up to 64 GPUs)"}
    assert all(re.fullmatch(r"\d+\.\d\d (GiB|MiB)|—", w) for w in few["weights per GPU"])


def test_mha_gqa_mqa_table_gives_g_over_h_as_a_fraction():
    at = open_page("kv_cache", model="llama-2-70b")
    t = table(at).set_index("variant")
    # Llama 2 70B: H = 64, G = 8; MLA's latent and linear attention's state have no KV heads
    assert list(t["G / H"]) == ["64/64", "8/64", "1/64", "—", "8/64", "—"]
    assert t.loc["GQA", "saving vs MHA"] == "87.50%"  # 1 - 8/64


# --- latency ------------------------------------------------------------------------------------


def test_latency_is_not_shown_for_a_plan_that_does_not_fit():
    # Llama 2 70B in bf16 (138 GB of weights) on one 80 GB H100
    at = open_page("capacity", model="llama-2-70b", gpu="h100-sxm", gpus="1")
    assert not at.exception  # the one error: vLLM's own refusal, in the Engine section
    assert [unescape(e.value)[:28] for e in at.error] == [
        f"vLLM {DEFAULT_VERSION['vllm']} refuses to start"
    ]
    labels = [m.label for m in at.metric]
    assert not any(x in " ".join(labels) for x in ("TTFT", "TPOT", "tokens/s"))
    assert any("No latency: the target does not fit" in i.value for i in at.info)
    assert "does not fit" in unescape(at.warning[0].value)


def test_latency_reads_in_seconds_not_thousands_of_ms():
    at = open_page("capacity", model="llama-2-70b", gpu="h100-sxm", gpus="2", batch="4")
    ttft = next(m for m in at.metric if m.label == "TTFT").value
    assert re.fullmatch(r"\d+\.\d\d s", ttft), ttft  # 4 x 3,840-token prompts: ~2.3 s


# --- the model's own context limit ----------------------------------------------------------------


def test_capacity_caps_max_context_at_the_models_limit_and_says_what_memory_allows():
    at = open_page("capacity", model="llama-2-70b", gpu="h100-sxm", gpus="2", batch="4")
    tile = next(m for m in at.metric if m.label.startswith("Max context"))
    assert tile.value == "4,096"  # Llama 2's context, though memory allows 7,424
    caps = " ".join(unescape(c.value) for c in at.caption)
    assert "Llama 2 70B was built for 4,096" in caps
    beyond = open_page("capacity", model="llama-2-70b", gpus="2", ctx="8192")
    assert any("beyond this model's own context of 4,096" in w.value for w in beyond.warning)


def test_kv_page_defaults_to_the_models_context_and_fades_beyond_it():
    at = open_page("kv_cache", models="llama-2-7b")  # 4,096-token context
    assert at.select_slider(key="kv:max_ctx").value == 4096  # not 131,072
    at = open_page("kv_cache", models=["llama-2-7b", "mistral-7b-v0.1"])
    df = chart_data(at, "kv_vs_context")
    beyond = df[df["beyond_context"]]
    assert set(beyond["model"]) == {"llama-2-7b"} and beyond["seq_len"].min() > 4096


@pytest.mark.parametrize("view", ["attention", "capacity"])
def test_token_charts_mark_the_models_context(view):
    at = open_page(view, model="llama-2-7b", max_ctx="16384")
    name = {"attention": "attention_flops", "capacity": "max_concurrent_seqs"}[view]
    layers = chart_spec(at, name)["layer"]
    rules = [layer for layer in layers if layer.get("mark", {}).get("type") == "rule"]
    assert [r["encoding"]["x"] for r in rules] == [{"datum": 4096}]


def test_compare_marks_contexts_past_the_models_limit():
    at = open_page("compare", models=["llama-2-7b"], ctx="8192", gpus="1")
    row = table(at, 0).iloc[0]
    assert row["KV at the context chosen"] == "4.00 GiB (past the model's context)"
    # 2 x 32 x 32 x 128 x 8,192 x 2 B = 4 GiB


# --- units --------------------------------------------------------------------------------------


def test_gpu_menu_says_which_memory_figure_a_plan_uses():
    at = open_page("capacity")
    options = at.selectbox(key="capacity:gpu").options
    # H100 SXM: CUDA reports 79.19 GiB (nvidia-smi 81,559 MiB = 79.65 GiB, the driver keeps
    # some); H100 PCIe: no published total, nominal 80
    assert "NVIDIA H100 SXM5 80GB: 79.19 GiB (CUDA total)" in options
    assert "NVIDIA H100 PCIe 80GB: 80.00 GiB (nominal)" in options
    at = open_page("capacity", gpu="h100-pcie")
    caps = " ".join(unescape(c.value) for c in at.caption)
    assert "nominal 80GB HBM2e read as 80 GiB (no driver total published)" in caps
    at = open_page("capacity", gpu="h200")
    caps = " ".join(unescape(c.value) for c in at.caption)
    assert "CUDA total 139.8 GiB" in caps


def test_compare_axes_use_the_tables_units():
    at = open_page("compare", models=["llama-2-70b"])
    kv = chart_spec(at, "kv_per_token")["encoding"]["x"]
    assert kv["field"] == "kv_per_token_KiB" and "KiB" in kv["axis"]["title"]
    assert chart_data(at, "kv_per_token")["kv_per_token_KiB"].tolist() == [320.0]  # 327,680 B
    assert table(at, 0)["KV per token"].tolist() == ["320.00 KiB"]
    params = chart_spec(at, "params")["encoding"]["x"]["axis"]
    assert "'B'" in params["labelExpr"] and "format" not in params  # 60B, not SI 60G


# --- many models ----------------------------------------------------------------------------------


def test_fourteen_models_keep_the_kv_chart_readable():
    from calc import list_presets

    names = list_presets()[:14]
    at = open_page("kv_cache", models=names)
    assert_clean(at)
    spec = chart_spec(at, "kv_vs_context")
    assert spec["height"] == 320 and spec["autosize"]["type"] == "fit-x"
    color = spec["layer"][0]["encoding"]["color"]["scale"]  # the lines' shared encoding
    assert len(set(color["range"])) == len(color["domain"]) == 14
