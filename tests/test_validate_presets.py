"""Every preset, measured on CPU: parameters at full size on meta, FLOPs on meta (full width, two
layers here; the report uses full depth), KV cache and peak attention memory at reduced size.
"""

from __future__ import annotations

import pytest
from conftest import TOY_GQA

pytest.importorskip("torch")

import calc  # noqa: E402
import calc.validate  # noqa: E402

PRESETS = calc.list_presets()
TOY = TOY_GQA


@pytest.mark.parametrize("name", PRESETS)
def test_preset_validates_on_cpu(name):
    spec = calc.load_preset(name)
    result = calc.validate.run(spec, "cpu", flop_layers=2)
    failed = [(c.check, c.label, c.predicted, c.measured) for c in result.checks if not c.passed]
    assert not failed, failed
    # the step-by-step peak-memory model describes GQA attention; MLA gets the other three
    expected = set(calc.validate.CHECKS) - ({"peak_memory"} if spec.is_mla else set())
    assert {c.check for c in result.checks} == expected
    # the parameter total is the full model's, measured on meta (e.g. PaLM 540B's 118 layers)
    total = next(c for c in result.checks if c.check == "params" and c.label == "total")
    assert total.measured == calc.param_count(spec)
    # >= 4 lengths per attention path, and one exponent each
    peak = [c for c in result.checks if c.check == "peak_memory"]
    if spec.is_mla:
        return
    assert sum(c.label.startswith("fused n=") for c in peak) >= 4
    assert sum(c.label.startswith("materialized n=") for c in peak) >= 4


def test_flops_at_full_depth_for_the_deepest_preset():
    # FLOPs over all 126 layers of Llama 3.1 405B, on meta
    spec = calc.load_preset("llama-3.1-405b")
    result = calc.validate.run(spec, "cpu", checks=["flops"])
    assert result.passed
    prefill = next(c for c in result.checks if c.label == "prefill n=1024")
    # arithmetic: 2 x matmul params x tokens + 4 x H x d x n^2 x layers (full mask)
    matmul = 126 * (16384 * 16384 * 2 + 2 * 16384 * 8 * 128 + 3 * 16384 * 53248) + 128256 * 16384
    assert prefill.measured == 2 * matmul * 1024 + 4 * 128 * 128 * 1024**2 * 126


def test_materialized_memory_grows_faster_than_fused():
    # the point of fused attention: no n x n tensor, so peak memory grows ~n, not ~n^2
    result = calc.validate.run(calc.load_preset("llama-2-7b"), "cpu", checks=["peak_memory"])
    exp = {c.label: c.measured for c in result.checks if c.unit == "exponent"}
    assert exp["growth exponent, materialized"] > 1.6
    assert 0.95 < exp["growth exponent, fused"] < 1.05


def test_bf16_kv_cache_on_cpu_is_exact_too():
    # K and V x 2 layers (the reduced depth) x 2 KV heads x head_dim 16 x 64 tokens x batch 2
    # x 2 B per bf16 element
    result = calc.validate.run(TOY, dtype="bf16", checks=["kv_cache"])
    assert result.passed
    assert result.checks[0].measured == 2 * 2 * 2 * 16 * 64 * 2 * 2
