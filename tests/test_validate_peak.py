"""The peak-memory model and the reduced specs, against arithmetic and against the profiler."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import calc  # noqa: E402
from calc.spec import ModelSpec  # noqa: E402
from calc.validate import measure, peak_model, reduce  # noqa: E402
from calc.validate.attention import GQAAttention  # noqa: E402
from calc.validate.checks import fit_exponent  # noqa: E402


def _attn_spec(H, G, d, h=None):
    return ModelSpec(
        name="a",
        num_hidden_layers=1,
        hidden_size=h or H * d,
        num_attention_heads=H,
        num_key_value_heads=G,
        head_dim=d,
        intermediate_size=64,
        vocab_size=64,
    )


def test_materialized_peak_is_two_score_matrices_plus_activations_by_hand():
    # 4 query heads, 2 KV heads, d 32, n 256, batch 1, fp32, at softmax:
    #   Q = 256*128*4, K = V = 256*64*4, K and V repeated = 2 * 256*128*4,
    #   scores and weights = 2 * 4*256*256*4
    spec = _attn_spec(4, 2, 32)
    peak, step, _ = peak_model.predicted_peak(spec, 256, 1, "fp32", "materialized")
    assert step == "softmax"
    assert peak == 256 * 128 * 4 + 2 * 256 * 64 * 4 + 2 * 256 * 128 * 4 + 2 * 4 * 256 * 256 * 4


def test_cpu_flash_scratch_by_hand():
    # cpu_flash_attention: per thread q_split*kv_split + 2*q_split + q_split*d floats;
    # q_split 256 for n >= 768, kv_split 512 (FlashAttentionKernel.cpp)
    assert peak_model.cpu_flash_scratch_bytes(1024, 1024, 128, "fp32", 2) == 2 * 4 * (
        256 * 512 + 2 * 256 + 256 * 128
    )
    # bf16 adds buf_reduced, q_split x kv_split in bf16; n = 100 -> q_split 32, kv_split 100
    assert (
        peak_model.cpu_flash_scratch_bytes(100, 100, 64, "bf16", 1)
        == 4 * (32 * 100 + 2 * 32 + 32 * 64) + 2 * 32 * 100
    )


@pytest.mark.parametrize("H, G", [(4, 4), (4, 2), (4, 1), (1, 1)])
@pytest.mark.parametrize("path", ["materialized", "fused"])
def test_model_matches_the_profiler_at_batch_two(H, G, path):
    # batch 2 is where matmul has to copy q (and unrepeated k, v) to batch them
    spec = _attn_spec(H, G, 16, h=48)
    torch.manual_seed(0)
    attn = GQAAttention(48, H, G, 16).eval()
    for n in (96, 300):
        x = torch.randn(2, n, 48)
        with torch.no_grad():
            measured, _ = measure.cpu_peak_bytes(lambda x=x: attn(x, path=path, causal=False))
        predicted, step, terms = peak_model.predicted_peak(
            spec, n, 2, "fp32", path, threads=torch.get_num_threads()
        )
        assert measured == predicted, (n, step, terms)


def test_fit_exponent_recovers_a_power_law():
    xs = [256, 512, 1024, 2048]
    assert fit_exponent(xs, [3 * x**2 for x in xs]) == pytest.approx(2.0)
    assert fit_exponent(xs, [7 * x for x in xs]) == pytest.approx(1.0)


# --- reduced specs ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["llama-1-65b", "llama-2-70b", "palm-540b", "falcon-7b"])
def test_attention_spec_keeps_the_kind_and_head_dim(name):
    spec = calc.load_preset(name)
    small = reduce.attention_spec(spec)
    assert small.attention_kind == spec.attention_kind
    assert small.head_dim == spec.head_dim
    assert small.num_attention_heads == 4


@pytest.mark.parametrize("name", ["llama-3.1-405b", "gemma-2-27b", "mixtral-8x7b"])
def test_kv_spec_keeps_the_cache_geometry_within_budget(name):
    spec = calc.load_preset(name)
    small = reduce.kv_spec(spec, 1 << 22)
    assert (small.num_attention_heads, small.n_kv_heads, small.head_dim) == (
        spec.num_attention_heads,
        spec.n_kv_heads,
        spec.head_dim,
    )
    assert small.layer_is_sliding == spec.layer_is_sliding[: small.num_hidden_layers]
    # within budget, or already at the narrowest widths (405B: W_q alone is 64 x 16384)
    assert calc.param_count(small) <= 1 << 22 or small.hidden_size == reduce.MIN_WIDTH
    assert calc.param_count(small) < 6_000_000
    # the per-layer cache does not depend on hidden, MLP or vocab widths
    assert calc.kv_cache_layer_bytes(small, 100) == calc.kv_cache_layer_bytes(
        reduce.at_depth(spec, small.num_hidden_layers), 100
    )


def test_gemma_2_reduced_depth_has_a_sliding_and_a_global_layer():
    small = reduce.kv_spec(calc.load_preset("gemma-2-9b"), 1 << 22)
    assert small.layer_is_sliding == (True, False)


# --- GPU sizing, without a GPU: the free-memory reading is replaced ------------------------------


def test_gpu_attention_heads_shrink_to_fit_free_memory(monkeypatch):
    from calc.validate import sizing

    spec = calc.load_preset("llama-3.1-405b")  # 128 query heads of 128
    monkeypatch.setattr(measure, "cuda_free_bytes", lambda device: 1 << 60)
    assert sizing.peak_size(spec, "cuda", "bf16", True) == (128, sizing.CUDA_PEAK_SEQ_LENS)
    # 4 GiB free -> a quarter, 1 GiB, for the 8192-token materialized step:
    # 2 x H x 8192^2 x 2 B = H x 256 MiB (+ O(n) activations): 4 heads need just over 1 GiB,
    # so the search (128, 64, ... halving) stops at 2
    monkeypatch.setattr(measure, "cuda_free_bytes", lambda device: 4 << 30)
    heads, lens = sizing.peak_size(spec, "cuda", "bf16", True)
    assert heads == 2 and lens == sizing.CUDA_PEAK_SEQ_LENS
    monkeypatch.setattr(measure, "cuda_free_bytes", lambda device: 1 << 20)
    with pytest.raises(ValueError, match="not enough free GPU memory"):
        sizing.peak_size(spec, "cuda", "bf16", True)


def test_gpu_kv_model_shrinks_with_free_memory(monkeypatch):
    from calc.validate import sizing

    spec = calc.load_preset("llama-3.1-405b")
    monkeypatch.setattr(measure, "cuda_free_bytes", lambda device: 160 << 30)  # an H200's worth
    roomy = reduce.kv_spec(spec, sizing.kv_budget(spec, "cuda", "bf16", True))
    assert roomy.hidden_size == spec.hidden_size  # two full-width layers fit a quarter of it
    monkeypatch.setattr(measure, "cuda_free_bytes", lambda device: 8 << 30)
    tight = reduce.kv_spec(spec, sizing.kv_budget(spec, "cuda", "bf16", True))
    assert tight.hidden_size < spec.hidden_size
    assert calc.param_count(tight) * 2 <= (8 << 30) // 4  # bf16 weights within a quarter
