"""DeepSeek-V3.2's indexed attention in the reference decoder (calc/validate/indexer.py) against
transformers 5.x's own modules and arithmetic written out here: parameters, the forward with
its top-k selection, FLOPs (FlopCounterMode), and what each cache holds.

Source: transformers 5.x models/deepseek_v32/modeling_deepseek_v32.py, installed in the test
environment: `DeepseekV32Indexer` (wq_b, wk, k_norm, weights_proj; scores relu(q . k) weighted
by weights_proj and summed over the index heads, then topk), `DeepseekV32Attention` (MLA with
the top-k mask folded into the attention mask) and the cache's `DynamicIndexedLayer` (keys,
values and indexer_keys per layer, cache_utils.py).
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
v32 = pytest.importorskip("transformers.models.deepseek_v32.modeling_deepseek_v32")
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

import calc  # noqa: E402
from calc.validate import checks, kinds, reduce  # noqa: E402
from calc.validate.decoder import build_decoder, numel_by_component  # noqa: E402
from calc.validate.indexer import IndexedMLAAttention  # noqa: E402

# h=64, H=4, q_lora 24, kv_lora 16, nope 12, rope 8, v 10; indexer 4 heads x 16, top-6
CONFIG = dict(
    num_hidden_layers=2, hidden_size=64, num_attention_heads=4, num_key_value_heads=4,
    intermediate_size=96, moe_intermediate_size=32, vocab_size=100, n_routed_experts=4,
    num_experts_per_tok=2, n_shared_experts=1, first_k_dense_replace=1, n_group=1, topk_group=1,
    q_lora_rank=24, kv_lora_rank=16, qk_nope_head_dim=12, qk_rope_head_dim=8, v_head_dim=10,
    index_n_heads=4, index_head_dim=16, index_topk=6,
)  # fmt: skip
H, QR, C, NOPE, R, DV, HI, DI, TOPK = 4, 24, 16, 12, 8, 10, 4, 16, 6


def spec_of(**changes):
    return calc.from_hf_config(dict(CONFIG, model_type="deepseek_v32", **changes), name="t")


def hf_config(**changes):
    config = transformers.AutoConfig.for_model("deepseek_v32", **dict(CONFIG, **changes))
    config._attn_implementation = "eager"
    return config


def flops(fn) -> int:
    with torch.no_grad(), FlopCounterMode(display=False) as fc:
        fn()
    return fc.get_total_flops()


def test_parameters_are_transformers_names_and_the_written_out_sizes():
    ours = IndexedMLAAttention(spec_of())
    theirs = v32.DeepseekV32Attention(hf_config(), 0)
    shapes = {k: tuple(v.shape) for k, v in ours.state_dict().items()}
    assert shapes == {k: tuple(v.shape) for k, v in theirs.state_dict().items()}
    mla = 64 * QR + QR + QR * H * (NOPE + R) + 64 * (C + R) + C + C * H * (NOPE + DV) + H * DV * 64
    indexer = QR * HI * DI + 64 * DI + 2 * DI + 64 * HI  # wq_b, wk, k_norm (w + b), weights_proj
    assert sum(p.numel() for p in ours.parameters()) == mla + indexer
    got = numel_by_component(build_decoder(spec_of(), "meta"))
    assert got["attn/indexer"] == 2 * indexer
    assert got == calc.param_breakdown(spec_of())


def _no_tie_rows(attn, x, topk):
    """[B, n] True where the topk-th and the next causal index score differ (or fewer keys
    than topk are visible): there the pick does not depend on how ties are broken."""
    n = x.shape[1]
    s = attn.indexer.scores(x, attn.q_latent(x), attn.indexer.key(x))
    s = s.masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(), float("-inf"))
    top = s.sort(dim=-1, descending=True).values
    ok = top[..., topk - 1] != top[..., topk]
    ok[:, :topk] = True
    return ok


def test_forward_equals_transformers_deepseek_v32_attention():
    torch.manual_seed(0)
    theirs = v32.DeepseekV32Attention(hf_config(), 0).eval()
    ours = IndexedMLAAttention(spec_of()).eval()
    ours.load_state_dict(theirs.state_dict())
    B, n = 3, 24
    x = torch.randn(B, n, 64)
    # RoPE off: cos 1, sin 0 (the interleaved form then permutes q_rot and k_rot alike)
    rope = (torch.ones(B, n, R), torch.zeros(B, n, R))
    causal = torch.full((n, n), torch.finfo(torch.float32).min).triu(1).expand(B, 1, n, n)
    with torch.no_grad():
        want, _ = theirs(x, rope, causal, position_ids=torch.arange(n)[None])
        got = ours(x)
        ok = _no_tie_rows(ours, x, TOPK)
        ours.topk = n  # every key: what the indexer's selection changes
        dense = ours(x)
    assert int(ok[:, TOPK:].sum()) >= B * (n - TOPK) // 2  # most sparse rows are compared
    torch.testing.assert_close(got[ok], want[ok], atol=1e-5, rtol=0)
    assert (dense[:, TOPK:] - want[:, TOPK:]).abs().max() > 1e-2  # the selection matters


def test_indexer_flops_equal_transformers_and_the_written_out_count():
    torch.manual_seed(0)
    theirs = v32.DeepseekV32Indexer(hf_config(), 0).eval()
    spec = spec_of()
    ours = IndexedMLAAttention(spec).indexer.eval()
    B, n = 1, 20
    x, q_lat = torch.randn(B, n, 64), torch.randn(B, n, QR)
    rope = (torch.ones(B, n, R), torch.zeros(B, n, R))
    mask = torch.zeros(B, n, n)  # full mask, as check_flops counts
    measured = flops(lambda: theirs(x, q_lat, rope, mask, None))
    weights = QR * HI * DI + 64 * DI + 64 * HI
    per_pair = 2 * HI * DI + 2 * HI  # q_h . k over the heads, then the weighted sum over heads
    assert measured == 2 * n * weights + n * n * per_pair
    assert flops(lambda: ours.scores(x, q_lat, ours.key(x))) == measured
    assert calc.layers.KINDS["indexed_attention"].index_flops_per_pair(spec) == per_pair


def test_indexed_attention_flops_prefill_dense_decode_sparse():
    spec = reduce.at_depth(spec_of(), 1)
    attn = IndexedMLAAttention(spec).to("meta")
    weights = 64 * QR + QR * H * (NOPE + R) + 64 * (C + R) + C * H * (NOPE + DV) + H * DV * 64
    weights += QR * HI * DI + 64 * DI + 64 * HI
    index_pair = 2 * HI * (DI + 1)
    n = 16
    x = torch.zeros(1, n, 64, device="meta")
    measured = flops(lambda: attn(x, causal=False))
    assert measured == 2 * n * weights + n * n * (2 * H * (NOPE + R) + 2 * H * DV + index_pair)
    assert measured - 2 * n * weights == calc.attention_flops_prefill(spec, n, causal=False)
    cache = attn.new_cache(1, n + 1, torch.float32, "meta")
    with torch.no_grad():
        attn(x, cache)
    t = n + 1  # the indexer scores all t keys; absorbed MLA reads the TOPK it picks
    step = flops(lambda: attn(x[:, :1], cache))
    assert step == 2 * weights + TOPK * (2 * H * (C + R) + 2 * H * C) + t * index_pair
    assert step - 2 * weights == calc.attention_flops_decode(spec, t, mla_absorbed=True)


@pytest.mark.parametrize("path", ["materialized", "fused"])
def test_cached_decode_reproduces_the_full_forward(path):
    torch.manual_seed(1)
    spec = spec_of()
    attn = IndexedMLAAttention(spec).eval()
    x = torch.randn(2, 20, 64)
    with torch.no_grad():
        full = attn(x, path=path)
        cache = attn.new_cache(2, 20, torch.float32, "cpu")
        out = [attn(x[:, :10], cache, path=path)]
        out += [attn(x[:, i : i + 1], cache, path=path) for i in range(10, 20)]
    torch.testing.assert_close(torch.cat(out, dim=1), full, atol=1e-5, rtol=0)
    nbytes = sum(t.untyped_storage().nbytes() for t in cache.tensors())
    assert nbytes == 2 * 20 * (C + R + DI) * 4  # latent + rope key + indexer key, fp32
    one = reduce.at_depth(spec, 1)
    assert calc.kv_cache_bytes(one, 20, 2, "fp32", convention="engine") == nbytes


def test_transformers_cache_holds_latent_rope_key_and_indexer_key():
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(hf_config()).eval()
    tokens = torch.randint(0, 100, (2, 11))
    with torch.no_grad():
        out = model(tokens, use_cache=True)
        out = model(tokens[:, :1], past_key_values=out.past_key_values, use_cache=True)
    layers = out.past_key_values.layers
    held = sum(
        t.untyped_storage().nbytes()
        for layer in layers
        for t in (layer.keys, layer.values, layer.indexer_keys)
    )
    assert held == 2 * 2 * 12 * (C + R + DI) * 4  # 2 layers, batch 2, 12 tokens, fp32
    spec = spec_of()
    assert calc.kv_cache_bytes(spec, 12, 2, "fp32", convention="transformers") == held
    ours = build_decoder(spec).new_cache(2, 12)  # the reference's static cache, same tokens
    assert ours.nbytes() == held


def test_kind_model_decodes_sparsely_in_the_kv_check(monkeypatch):
    spec = kinds.kind_spec("kind-deepseek-v32")
    assert spec.attention_counts == {"indexed_attention": 3} and spec.index_topk < 48
    rows = checks.check_kv(spec, spec, "cpu", "fp32", max_params=1 << 22)  # 48 + 16 tokens
    assert all(r.passed for r in rows)
    # 2 layers x batch 2 x 64 tokens x (latent 32 + rope 8 + indexer key 16) x fp32
    assert rows[0].measured == 2 * 2 * 64 * (32 + 8 + 16) * 4
    assert rows[1].label.startswith("MLA latent + indexer key cache bytes, 2 layer(s)")
    # a decode that reads every cached latent (no top-k) no longer reproduces the full forward
    from calc.validate import indexer

    top_keys = indexer.top_keys
    monkeypatch.setattr(
        indexer, "top_keys", lambda s, k: top_keys(s, s.shape[-1] if s.shape[-2] == 1 else k)
    )
    rows = checks.check_kv(spec, spec, "cpu", "fp32", max_params=1 << 22)
    assert [r.label for r in rows if not r.passed] == [rows[-1].label]
    assert rows[-1].label.startswith("cached decode = full forward")


def test_per_tensor_bytes_for_cuda_rounding_are_the_three_cache_tensors():
    small = reduce.kv_spec(kinds.kind_spec("kind-deepseek-v32"), 1 << 22)
    cache = build_decoder(small).new_cache(2, 64)
    measured = [t.untyped_storage().nbytes() for t in cache.tensors()]
    # per layer: latent 32, rope key 8, indexer key 16; batch 2 x 64 tokens x fp32
    assert measured == [2 * 64 * e * 4 for e in (32, 8, 16)] * small.num_hidden_layers
    assert checks.predicted_tensor_bytes(small, 64, 2, "fp32") == measured
