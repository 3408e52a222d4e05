"""The dashboard's pure parts: chart builders (DataFrame -> alt.Chart), the context grid, the
upload parser and the URL parsers. No Streamlit session needed."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("streamlit")
alt = pytest.importorskip("altair")
pd = pytest.importorskip("pandas")

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from dashboard import (  # noqa: E402
    attention_charts,
    attention_data,
    capacity_charts,
    charts,
    data,
    state,
    validation_charts,
)

# --- builders ---------------------------------------------------------------------------------

KV = pd.DataFrame(
    {
        "label": ["A"] * 3 + ["B"] * 3,
        "seq_len": [1024, 4096, 131072] * 2,
        "kv_cache_bytes": [1, 2, 3, 4, 5, 6],
        "kv_cache_GiB": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6],
        "kv_cache_GB": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6],
        "context_tokens": [4096] * 3 + [131072] * 3,
        "beyond_context": [False, False, True] + [False] * 3,
    }
)
LONG = pd.DataFrame(
    {
        "seq_len": [128, 256, 128, 256],
        "series": ["x", "x", "y", "y"],
        "flops": [1e9, 4e9, 2e9, 3e9],
        "bytes": [1, 2, 3, 4],
        "GiB": [1.0, 2.0, 3.0, 4.0],
        "share": [0.1, 0.2, 0.3, 0.4],
    }
)
BUILDERS = {
    "params": (
        charts.params_chart,
        pd.DataFrame({"component": ["embed", "mlp"], "params": [10, 90], "share": [0.1, 0.9]}),
    ),
    "kv_context": (charts.kv_context_chart, KV),
    "variants": (
        charts.variants_chart,
        pd.DataFrame(
            {
                "variant": ["MHA", "GQA", "MQA"],
                "kv_heads": [64, 8, 1],
                "kv_cache_GiB": [10.0, 1.25, 0.15625],
                "savings": [0.0, 0.875, 0.984375],
            }
        ),
    ),
    "flops": (attention_charts.flops_chart, LONG),
    "memory": (attention_charts.memory_chart, LONG),
    "share": (attention_charts.share_chart, LONG),
    "bars": (
        lambda df: charts.bars_by_model(df, "params", "parameters"),
        pd.DataFrame({"label": ["a", "b"], "params": [1, 2]}),
    ),
    "memory_breakdown": (
        capacity_charts.memory_breakdown_chart,
        pd.DataFrame(
            {
                "gpu": ["h100-sxm"] * 3,
                "category": ["weights", "kv_cache", "headroom"],
                "bytes": [3, 2, 1],
                "GiB": [3.0, 2.0, 1.0],
                "GB": [3.2, 2.1, 1.1],
            }
        ),
    ),
    "concurrency": (
        capacity_charts.concurrency_chart,
        pd.DataFrame({"seq_len": [512, 1024], "max_concurrent_seqs": [8, 4], "kv_tokens": [9, 9]}),
    ),
    "fit_heatmap": (
        capacity_charts.fit_heatmap,
        pd.DataFrame(
            {
                "seq_len": [1024, 1024],
                "batch": [1, 2],
                "fits": ["fits", "no fit"],
                "kv_cache_GiB": [1.0, 2.0],
                "shortfall_GiB": [0.0, 0.5],
            }
        ),
    ),
    "throughput": (
        capacity_charts.throughput_chart,
        pd.DataFrame(
            {
                "batch": [1, 2],
                "tokens_per_s_total": [30.0, 60.0],
                "tpot_ms": [30.0, 31.0],
                "ttft_ms": [100.0, 200.0],
                "decode_bound": ["memory", "memory"],
                "fits": ["fits", "no fit"],
            }
        ),
    ),
}
LAYERED = {
    "predicted_vs_measured": (
        validation_charts.predicted_vs_measured_chart,
        pd.DataFrame(
            {
                "model": ["m", "m"],
                "check": ["params", "flops"],
                "label": ["mlp", "n=128"],
                "unit": ["params", "FLOPs"],
                "predicted": [10, 1000],
                "measured": [10, 1001],
                "rel_error": [0.0, 0.001],
                "result": ["pass", "FAIL"],
            }
        ),
    )
}


def layers(spec: dict) -> list[dict]:
    """The chart's mark specs: itself, or its layers."""
    return spec.get("layer", [spec])


def encoding(spec: dict, channel: str) -> dict:
    """The first layer's encoding of `channel` (layers share their axes)."""
    return next(
        layer["encoding"][channel] for layer in layers(spec) if channel in layer.get("encoding", {})
    )


@pytest.mark.parametrize("name", list(BUILDERS))
def test_builder_is_a_valid_chart_with_tooltips_over_the_given_rows(name):
    build, df = BUILDERS[name]
    chart = build(df)
    assert isinstance(chart, alt.Chart | alt.LayerChart)
    spec = chart.to_dict()  # validates against the Vega-Lite schema
    assert encoding(spec, "tooltip"), "every chart has a tooltip"
    # the rows drawn are exactly the rows given (Altair inlines them as a named dataset)
    (rows,) = spec["datasets"].values()
    assert pd.DataFrame(rows)[list(df.columns)].equals(df)


@pytest.mark.parametrize("name", list(BUILDERS))
def test_plot_height_is_fixed_and_the_legend_goes_below_it(name):
    """fit-x autosize: the height is the plot's own, so a legend cannot squeeze it (the KV
    chart was ~120 px tall with 4 models, its y title clipped with 14)."""
    build, df = BUILDERS[name]
    spec = build(df).to_dict()
    assert spec["autosize"] == {"type": "fit-x", "contains": "padding"}
    height = spec.get("height")
    assert height == charts.HEIGHT or (isinstance(height, dict) and "step" in height), height


def test_predicted_vs_measured_draws_points_with_tooltips_on_a_diagonal():
    build, df = LAYERED["predicted_vs_measured"]
    spec = build(df).to_dict()
    diagonal, points = spec["layer"]
    assert diagonal["encoding"]["y"]["field"] == diagonal["encoding"]["x"]["field"] == "predicted"
    assert points["encoding"]["y"]["field"] == "measured"
    assert points["encoding"]["x"]["scale"]["type"] == "log"
    assert {t["field"] for t in points["encoding"]["tooltip"]} >= {"predicted", "measured", "label"}
    (rows,) = spec["datasets"].values()
    assert pd.DataFrame(rows).equals(df)


def test_fit_and_no_fit_differ_by_more_than_colour():
    build, df = BUILDERS["fit_heatmap"]
    spec = build(df).to_dict()
    color = encoding(spec, "color")
    assert color["scale"]["domain"] == ["fits", "no fit"]
    assert color["scale"]["range"][0] != color["scale"]["range"][1]
    text = next(layer for layer in spec["layer"] if layer["mark"]["type"] == "text")
    assert "'✓'" in text["transform"][0]["calculate"] and "'✗'" in text["transform"][0]["calculate"]
    build, df = BUILDERS["throughput"]
    shape = build(df).to_dict()["encoding"]["shape"]
    assert shape["scale"] == {"domain": ["fits", "no fit"], "range": ["circle", "cross"]}


@pytest.mark.parametrize("name", ["kv_context", "flops", "memory", "share", "concurrency"])
def test_context_axes_are_log2_and_tick_at_powers_of_two(name):
    build, df = BUILDERS[name]
    x = encoding(build(df).to_dict(), "x")
    assert x["scale"] == {"type": "log", "base": 2}
    ticks = x["axis"]["values"]
    assert all(t & (t - 1) == 0 for t in ticks)  # powers of two
    assert min(df["seq_len"]) <= min(ticks) and max(ticks) <= max(df["seq_len"])
    assert "tokens" in x["axis"]["title"]


def test_value_axes_are_log_where_they_span_decades_and_name_units():
    for name in ("kv_context", "flops", "memory"):
        build, df = BUILDERS[name]
        y = encoding(build(df).to_dict(), "y")
        assert y["scale"]["type"] == "log", name
    assert "GiB" in encoding(charts.kv_context_chart(KV).to_dict(), "y")["axis"]["title"]
    share_y = encoding(attention_charts.share_chart(LONG).to_dict(), "y")
    assert share_y["scale"]["domain"] == [0, 1] and share_y["axis"]["format"] == "%"


def test_count_axes_tick_at_1_2_5_not_symlog():
    build, df = BUILDERS["concurrency"]
    y = encoding(build(df).to_dict(), "y")
    assert y["scale"]["type"] == "log"  # was symlog with ticks only at 0/20/40/60
    assert y["axis"]["values"] == [1, 2, 5]  # max 8 sequences: 1, 2, 5 (10 is past it)
    assert charts.log_ticks(1, 300) == [1, 2, 5, 10, 20, 50, 100, 200]
    assert charts.log_ticks(1, 10**9) == [10.0**k for k in range(10)]  # too many: decades only


def test_kv_chart_fades_points_beyond_the_models_context():
    spec = charts.kv_context_chart(KV).to_dict()
    faded, solid, points = spec["layer"][0]["layer"]  # the lines; then the context rule, if any
    assert faded["mark"]["opacity"] == 0.3  # the whole curve, faint
    assert solid["transform"] == [{"filter": "datum.beyond_context != true"}]  # solid inside
    opacity = points["encoding"]["opacity"]
    assert opacity["field"] == "beyond_context"
    assert opacity["scale"] == {"domain": [False, True], "range": [1.0, 0.3]}


def test_a_context_rule_marks_the_models_limit():
    spec = attention_charts.flops_chart(LONG.assign(beyond_context=False), context=256).to_dict()
    rule = next(layer for layer in spec["layer"] if layer.get("mark", {}).get("type") == "rule")
    assert rule["encoding"]["x"] == {"datum": 256}
    text = next(layer for layer in spec["layer"] if layer.get("mark", {}).get("type") == "text")
    assert text["encoding"]["text"] == {"datum": "model context 256"}
    # outside the plotted range: no rule (it would stretch the axis)
    spec = attention_charts.flops_chart(LONG, context=4096).to_dict()
    assert all(layer.get("mark", {}).get("type") != "rule" for layer in spec["layer"])


def test_fourteen_models_get_fourteen_distinct_colours_and_a_legend_in_columns():
    labels = [f"model {i}" for i in range(14)]
    df = pd.DataFrame(
        {
            "label": [lab for lab in labels for _ in (0, 1)],
            "seq_len": [1024, 2048] * 14,
            "kv_cache_GiB": [1.0, 2.0] * 14,
        }
    )
    color = encoding(charts.kv_context_chart(df).to_dict(), "color")
    assert color["scale"]["domain"] == labels
    assert len(set(color["scale"]["range"])) == 14  # tableau10 alone would repeat from the 11th
    assert color["legend"]["orient"] == "bottom" and color["legend"]["columns"] == 4
    dash = encoding(charts.kv_context_chart(df).to_dict(), "strokeDash")
    assert dash["scale"]["range"][0] != dash["scale"]["range"][10]  # the light ten are dashed


def test_parameter_and_kv_axes_use_the_tiles_units():
    spec = charts.params_chart(BUILDERS["params"][1]).to_dict()
    assert spec["encoding"]["x"]["axis"]["labelExpr"] == charts.COUNT_LABEL  # 60B, not 60G
    assert "'B'" in charts.COUNT_LABEL and "'G'" not in charts.COUNT_LABEL
    kv = pd.DataFrame({"label": ["a"], "kv_per_token_KiB": [320.0]})
    x = charts.bars_by_model(kv, "kv_per_token_KiB", "KiB per token").to_dict()["encoding"]["x"]
    assert x["axis"] == {"format": ",~f", "title": "KiB per token"}  # not SI "M"


def test_token_axis_labels_read_k_and_m():
    axis = charts.token_axis(pd.DataFrame({"seq_len": [128, 1 << 20]}))
    assert axis.values == [2**k for k in range(7, 21)]
    assert "1048576" in axis.labelExpr and "'K'" in axis.labelExpr


def test_chart_json_has_no_python_objects():
    json.dumps(charts.kv_context_chart(KV).to_dict())


# --- grids and frames -------------------------------------------------------------------------


def test_context_grid_holds_every_power_of_two_and_the_ends():
    g = data.context_grid(131072)
    assert g == sorted(set(g))
    assert {2**k for k in range(7, 18)} <= set(g)
    assert g[0] == 128 and g[-1] == 131072
    assert len(g) == 4 * 10 + 1  # 4 points per octave over 10 octaves, plus the end


def test_long_form_keeps_every_value_with_its_series_name():
    wide = pd.DataFrame({"seq_len": [1, 2], "a_flops": [10, 20], "b_flops": [30, 40]})
    out = attention_data.long_form(wide, {"A": "a_flops", "B": "b_flops"}, "flops")
    assert sorted(zip(out["series"], out["seq_len"], out["flops"], strict=True)) == [
        ("A", 1, 10),
        ("A", 2, 20),
        ("B", 1, 30),
        ("B", 2, 40),
    ]


# --- uploads ----------------------------------------------------------------------------------


def test_parse_upload_accepts_kvcalc_fields_and_hf_configs():
    fields = {
        "name": "toy",
        "num_hidden_layers": 2,
        "hidden_size": 64,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "intermediate_size": 128,
        "vocab_size": 100,
    }
    spec = data.parse_upload("toy.json", json.dumps(fields).encode())
    assert (spec.name, spec.n_kv_heads, spec.head_dim) == ("toy", 2, 8)  # d = 64 / 8
    hf = {"model_type": "mistral", **{k: v for k, v in fields.items() if k != "name"}}
    assert data.parse_upload("config.json", json.dumps(hf).encode()).sliding_window == 4096


@pytest.mark.parametrize(
    "name, content, message",
    [
        ("c.txt", b"{}", "must be a .json file"),
        ("c.json", b"{" * 10, "malformed JSON"),
        ("c.json", b"null", "expected a JSON object"),
        ("c.json", b" " * 1_000_001, "at most 1,000,000 bytes (1 MB): got 1,000,001 bytes"),
        ("c.json", b'{"name": "x"}', "num_hidden_layers"),
    ],
)
def test_parse_upload_names_the_file_and_the_problem(name, content, message):
    with pytest.raises(ValueError) as e:
        data.parse_upload(name, content)
    assert message in str(e.value) and str(e.value).startswith(name)


# --- URL parsers ------------------------------------------------------------------------------


def test_url_parsers_refuse_what_is_not_a_value():
    assert state.parse_int("4096") == 4096
    assert [state.parse_int(t) for t in ("0", "-3", "1.5", "x", "")] == [None] * 5
    assert state.parse_bool("true") is True and state.parse_bool("0") is False
    assert state.parse_bool("maybe") is None
    assert state.parse_float("nan") is None and state.parse_float("0.9") == 0.9
