"""Reports: each field equals the pure function it comes from; dumps and DataFrames work.

The MHA / GQA / MQA comparison is checked against the lecture seed's table (seeds/000, section
11.4: savings = 1 - G/H; 0% for H=G=96, 87.5% for H=64, G=8, 93.75% for H=16, G=1).
"""

from __future__ import annotations

import pytest

import calc
from calc import (
    AttentionComparison,
    AttentionReport,
    KVCacheReport,
    ModelSpec,
    ParamReport,
    attention_cost,
    compare_attention,
    kv_cache,
    params_report,
)


def shape(H: int, G: int, layers: int = 2, d: int = 8, **extra) -> ModelSpec:
    return ModelSpec(
        name=f"h{H}g{G}",
        num_hidden_layers=layers,
        hidden_size=H * d,
        num_attention_heads=H,
        num_key_value_heads=G,
        intermediate_size=4 * H * d,
        vocab_size=100,
        max_position_embeddings=64,
        **extra,
    )


# --- params ---------------------------------------------------------------------------------


def test_params_report_fields():
    s = shape(8, 2, num_local_experts=4, num_experts_per_tok=2)
    r = params_report(s)
    assert isinstance(r, ParamReport)
    assert r.model == "h8g2"
    assert r.breakdown == calc.param_breakdown(s)
    assert r.total == calc.param_count(s) == sum(r.breakdown.values())
    assert r.active_per_token == calc.active_param_count(s) < r.total
    assert r.non_embedding == calc.non_embedding_param_count(s)
    assert r.published is None


def test_params_report_frame_and_dump():
    s = shape(8, 2)
    r = params_report(s)
    df = r.to_frame()
    assert list(df.columns) == ["component", "params"]
    assert df["component"].tolist() == list(calc.COMPONENTS)
    assert int(df["params"].sum()) == r.total
    d = r.model_dump()
    assert d["total"] == r.total and d["breakdown"]["attn/kv"] == r.breakdown["attn/kv"]
    assert ParamReport.model_validate(d) == r


# --- KV cache -------------------------------------------------------------------------------


def test_kv_cache_report_fields():
    s = shape(8, 2, layers=4, sliding_window=16, sliding_window_pattern=2)
    r = kv_cache(s, 40, 3, "bfloat16", block_size=16)
    assert isinstance(r, KVCacheReport)
    assert (r.seq_len, r.batch, r.dtype, r.block_size, r.window_tokens) == (
        40,
        3,
        "bf16",  # canonical name
        16,
        "window",
    )
    per = 2 * 2 * 8 * 2  # K and V x 2 KV heads x d=8 x 2 B
    # sliding layers keep 16 tokens (one block); global ones 40 -> 48 (three blocks)
    assert r.layer_bytes == [3 * 16 * per, 3 * 48 * per] * 2
    assert r.total_bytes == sum(r.layer_bytes)
    assert r.total_bytes == calc.kv_cache_bytes(s, 40, 3, "bf16", block_size=16)
    assert r.bytes_per_token_per_layer == per
    assert r.bytes_per_token == 4 * per


def test_kv_cache_report_frame():
    r = kv_cache(shape(8, 2, layers=3), 10)
    df = r.to_frame()
    assert list(df.columns) == ["layer", "bytes"]
    assert df["layer"].tolist() == [0, 1, 2]
    assert int(df["bytes"].sum()) == r.total_bytes


def test_kv_cache_report_bad_input():
    with pytest.raises(ValueError, match=r"^'seq_len' must be an integer >= 0: got -1$"):
        kv_cache(shape(8, 2), -1)
    with pytest.raises(ValueError, match=r"got 'fp12'$"):
        kv_cache(shape(8, 2), 10, dtype="fp12")


# --- attention ------------------------------------------------------------------------------


def test_attention_cost_fields():
    s = shape(8, 2, layers=4, sliding_window=16, sliding_window_pattern=2)
    n, b = 40, 3
    r = attention_cost(s, n, b, "fp32")
    assert isinstance(r, AttentionReport)
    assert r.dtype == "fp32"
    assert r.prefill_attention_flops_full == calc.attention_flops_prefill(s, n, b, causal=False)
    assert r.prefill_attention_flops_causal == calc.attention_flops_prefill(s, n, b)
    assert r.decode_attention_flops == calc.attention_flops_decode(s, n, b)
    assert r.score_matrix_bytes == calc.score_matrix_bytes(s, n, b, "fp32")
    assert r.fused_attention_bytes == calc.fused_attention_bytes(s, n, b, "fp32")
    assert r.prefill_forward_flops == calc.forward_flops_prefill(s, n, b)
    assert r.prefill_forward_flops_per_token == r.prefill_forward_flops / (b * n)
    assert r.decode_forward_flops == calc.forward_flops_decode(s, n, b)
    assert r.training_flops_per_token == calc.training_flops_per_token(s, n)
    assert r.attention_share_prefill == r.prefill_attention_flops_causal / r.prefill_forward_flops
    assert 0 < r.attention_share_prefill < 1
    assert r.attention_share_decode == r.decode_attention_flops / r.decode_forward_flops
    assert 0 < r.attention_share_decode < 1


def test_attention_cost_at_zero_tokens():
    r = attention_cost(shape(8, 2), 0)
    assert r.prefill_forward_flops == 0 and r.prefill_forward_flops_per_token == 0.0
    assert r.training_flops_per_token == 0.0 and r.attention_share_prefill == 0.0
    # a decode step at an empty cache still runs every weight once: 2 FLOPs per weight
    assert r.decode_forward_flops == 2 * calc.matmul_params(shape(8, 2))


def test_attention_cost_frame_and_dump():
    r = attention_cost(shape(8, 2), 16)
    df = r.to_frame()
    assert len(df) == 1 and df.loc[0, "prefill_attention_flops_causal"] == (
        r.prefill_attention_flops_causal
    )
    assert AttentionReport.model_validate(r.model_dump()) == r


def test_attention_cost_bad_input():
    with pytest.raises(ValueError, match=r"^'batch' must be an integer > 0: got 0$"):
        attention_cost(shape(8, 2), 16, 0)
    with pytest.raises(ValueError, match=r"^'seq_len' must be an integer >= 0: got True$"):
        attention_cost(shape(8, 2), True)


# --- MHA / GQA / MQA comparison -------------------------------------------------------------


@pytest.mark.parametrize(
    ("H", "G", "savings"),
    [(96, 96, 0.0), (64, 8, 0.875), (16, 1, 0.9375)],  # the seed table's three examples
)
def test_compare_matches_seed_table(H, G, savings):
    c = compare_attention(shape(H, G), 32)
    gqa = c.rows[1]
    assert gqa.variant == "GQA" and gqa.kv_heads == G
    assert gqa.savings == savings == 1 - G / H
    assert gqa.ratio == G / H


def test_compare_rows():
    s = shape(64, 8, layers=2, d=4)
    c = compare_attention(s, seq_len=32, batch=2, dtype="fp16")
    assert isinstance(c, AttentionComparison)
    assert (c.model, c.seq_len, c.batch, c.dtype, c.query_heads) == ("h64g8", 32, 2, "fp16", 64)
    assert [(r.variant, r.kv_heads) for r in c.rows] == [
        ("MHA", 64), ("GQA", 8), ("MQA", 1), ("MLA", None), ("sliding", 8), ("linear", None)
    ]  # fmt: skip
    full = c.rows[:3]
    assert [r.ratio for r in full] == [1.0, 0.125, 1 / 64]
    assert [r.savings for r in full] == [0.0, 0.875, 1 - 1 / 64]
    for r in full:
        # 2 (K, V) x 2 layers x G x d=4 x 32 tokens x 2 sequences x 2 B
        assert r.kv_cache_bytes == 2 * 2 * r.kv_heads * 4 * 32 * 2 * 2
        # W_k + W_v: 2 x h (=256) x G*d, per layer
        assert r.kv_proj_params == 2 * 2 * 256 * r.kv_heads * 4
        # causal pairs 32 x 33 / 2 per head-layer, 4 x H x d FLOPs each, 2 layers, 2 sequences
        assert r.prefill_attention_flops == 2 * 2 * (4 * 64 * 4) * (32 * 33 // 2)
    mla, sliding, linear = c.rows[3:]
    # MLA (DeepSeek-V2 ranks for d=4): latent 16 + rope key 2 per token and layer
    assert mla.kv_cache_bytes == 2 * (16 + 2) * 32 * 2 * 2
    # sliding: the 4096-token default window is past 32 tokens, so it caches like GQA
    assert sliding.kv_cache_bytes == full[1].kv_cache_bytes
    # linear: per layer and sequence, conv (2 x 8 x 4 + 64 x 4) x 3 taps + 64 x 4 x 4 state
    assert linear.kv_cache_bytes == 2 * 2 * ((2 * 8 * 4 + 64 * 4) * 3 + 64 * 4 * 4) * 2
    # the spec passed in is untouched
    assert s.n_kv_heads == 8


def test_compare_defaults_to_context_length():
    c = compare_attention(shape(8, 2))
    assert c.seq_len == 64  # max_position_embeddings
    assert c.rows[1].kv_cache_bytes == calc.kv_cache_bytes(shape(8, 2), 64)


def test_compare_llama_2_70b_preset():
    # Llama 2 70B: 64 query heads, 8 KV heads (config.json); MHA would cache 8x more
    c = compare_attention(calc.load_preset("llama-2-70b"), 4096)
    mha, gqa, mqa = (r.kv_cache_bytes for r in c.rows[:3])
    assert gqa == 2 * 80 * 8 * 128 * 4096 * 2
    assert mha == 8 * gqa and mqa * 8 == gqa


def test_compare_keeps_qkv_bias_in_kv_params():
    s = shape(8, 2, qkv_bias=True)
    # W_k, W_v with biases: 2 x (h x G*d + G*d) per layer, 2 layers; h = 64, d = 8
    assert compare_attention(s, 8).rows[1].kv_proj_params == 2 * 2 * (64 * 16 + 16)


def test_compare_frame():
    df = compare_attention(shape(16, 1), 32).to_frame()
    assert df["variant"].tolist() == ["MHA", "GQA", "MQA", "MLA", "sliding", "linear"]
    # an MQA model's GQA row repeats G = 1; MLA's latent and linear state have no KV heads
    assert df["kv_heads"].tolist()[:3] == [16, 1, 1] and df["kv_heads"].isna().tolist()[3:] == [
        True, False, True
    ]  # fmt: skip
    assert set(df.columns) == {
        "variant",
        "kv_heads",
        "ratio",
        "kv_cache_bytes",
        "kv_bytes_per_token",
        "prefill_attention_flops",
        "decode_attention_flops",
        "kv_proj_params",
        "savings",
    }


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"seq_len": -1}, "'seq_len' must be an integer >= 0: got -1"),
        ({"seq_len": 8, "batch": 0}, "'batch' must be an integer > 0: got 0"),
        ({"seq_len": 8, "batch": True}, "'batch' must be an integer > 0: got True"),
    ],
)
def test_compare_bad_input(kwargs, message):
    with pytest.raises(ValueError) as info:
        compare_attention(shape(8, 2), **kwargs)
    assert str(info.value) == message
