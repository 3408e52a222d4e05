"""vLLM's "Model loading took" and "Available KV cache memory" lines in each release's words
(calc.serving.vllm_lines.load_line, gib_text), checked against every committed start-up log
that prints them (benchmarks/engine_logs/*.toml excerpts, each citing its public source).

kvcalc's line is built from the logged figure itself, so only the words and the number's format
are compared: "%.4f GiB and" (V1 up to 0.11.0), "%.4f GiB memory and" (V1 0.11.1 - 0.13.x),
format_gib ("51.1", "30.59") from 0.14.0, "GiB and" in Model Runner V2 up to 0.27.x and "GiB
memory and" from 0.28.0; V0's "Loading model weights took %.4f GB"."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from calc.serving.evidence import _gpu, _settings, case_spec, load_cases
from calc.serving.plan import prepare
from calc.serving.vllm_lines import gib_text, load_line
from calc.serving.vllm_v2 import vllm_uses_v2_runner

GIB = 2**30
LOGS = Path(__file__).parent.parent / "benchmarks" / "engine_logs"
LOAD = re.compile(r"(?:Model loading took|Loading model weights took) ([0-9.]+) Gi?B[^\n]*")
AVAIL = re.compile(r"Available KV cache memory: ([0-9.]+) GiB")


def _excerpt(case) -> str:
    return case.get("logged", {}).get("excerpt", "")


def _cases() -> list:
    return [
        pytest.param(case, id=case["id"])
        for case in load_cases(LOGS)
        if case["engine"] == "vllm"
        and (LOAD.search(_excerpt(case)) or AVAIL.search(_excerpt(case)))
    ]


def _config(case):
    spec = case_spec(case)
    if spec is None or spec.is_v4:
        pytest.skip("no model spec, or DeepSeek-V4 (tests/test_serving_plan_v4.py)")
    settings = {k: v for k, v in _settings(case).items() if k != "pp_layer_partition"}
    try:
        config = prepare(spec, _gpu(case) or "h100-sxm", "vllm", **settings)[2]
    except ValueError as e:  # a plan kvcalc refuses before any line (its own tests say why)
        pytest.skip(str(e)[:80])
    return spec, config


@pytest.mark.parametrize("case", _cases())
def test_the_lines_read_as_the_log_prints_them(case):
    spec, config = _config(case)
    text = _excerpt(case)
    if m := LOAD.search(text):
        figure = float(m.group(1))
        ours = load_line(config, round(figure * GIB), vllm_uses_v2_runner(spec, config))
        assert m.group(0).startswith(ours), (m.group(0), ours)
    if config.is_v1 and (m := AVAIL.search(text)):
        assert gib_text(round(float(m.group(1)) * GIB), config.version_tuple) == m.group(1)


def test_most_logs_are_compared():
    compared = [c for c in load_cases(LOGS) if c["engine"] == "vllm" and LOAD.search(_excerpt(c))]
    assert len(compared) >= 60  # 70 of the 101 vLLM logs print the load line
