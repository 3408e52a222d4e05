"""The checks can fail: a wrong claim, or a wrong formula, is caught by measurement."""

from __future__ import annotations

import pytest
from conftest import TOY_GQA

pytest.importorskip("torch")

import calc  # noqa: E402
import calc.validate  # noqa: E402
from calc.validate import peak_model  # noqa: E402

# 4 query heads, 2 KV heads: small enough that no check reduces the attention geometry
TOY = TOY_GQA


def _failed(result) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for c in result.checks:
        if not c.passed:
            out.setdefault(c.check, []).append(c.label)
    return out


def test_the_right_claim_passes():
    assert calc.validate.run(TOY).passed


def test_one_kv_head_too_few_is_caught_by_every_check():
    wrong = TOY.replace(num_key_value_heads=1)  # claims MQA for a model with 2 KV heads
    result = calc.validate.run(TOY, claim=wrong)
    assert not result.passed
    failed = _failed(result)
    assert set(failed) == {"params", "flops", "kv_cache", "peak_memory"}
    assert failed["params"] == ["attn/kv", "total"]  # nothing else depends on G
    # bytes: the claim predicts half the cache the module really holds
    kv = next(c for c in result.checks if c.label.startswith("cache bytes"))
    assert kv.measured == 2 * kv.predicted
    # the cached decode is still right: that row checks the module, not the claim
    assert all(c.passed for c in result.checks if c.label.startswith("cached decode"))


def test_a_causal_half_score_matrix_formula_is_caught(monkeypatch):
    # a plausible mistake: counting only the n(n+1)/2 causal scores instead of the n^2 a
    # materialized kernel stores
    def causal_half(spec, seq_len, batch=1, dtype="bf16"):
        return batch * spec.num_attention_heads * seq_len * (seq_len + 1) // 2 * 4

    monkeypatch.setattr(peak_model, "score_matrix_bytes", causal_half)
    result = calc.validate.run(calc.load_preset("llama-2-7b"), checks=["peak_memory"])
    failed = _failed(result)["peak_memory"]
    assert "materialized n=2048" in failed
    assert not any(label.startswith("fused") for label in failed)  # fused keeps no scores


def test_kv_bytes_off_by_one_byte_fail(monkeypatch):
    real = calc.kv_cache_bytes
    monkeypatch.setattr(calc, "kv_cache_bytes", lambda *a, **k: real(*a, **k) + 1)
    result = calc.validate.run(TOY, checks=["kv_cache"])
    assert _failed(result) == {"kv_cache": ["cache bytes (48+16 tokens, batch 2)"]}
    # (the cached-decode row checks the module, not the formula, and still passes)


def test_a_flop_count_without_the_lm_head_fails(monkeypatch):
    # forgetting the V x h LM head matmul (2 x n x V x h FLOPs) is caught at every length
    real = calc.forward_flops_prefill

    def no_head(spec, n, batch=1, causal=True):
        return real(spec, n, batch, causal) - 2 * batch * n * spec.vocab_size * spec.hidden_size

    monkeypatch.setattr(calc, "forward_flops_prefill", no_head)
    result = calc.validate.run(TOY, checks=["flops"])
    assert len(_failed(result)["flops"]) == 3  # the 3 prefill lengths; decode is separate
