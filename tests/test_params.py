"""Parameter counts against arithmetic written out term by term.

Small specs of every kind are counted by hand below; full-size models are counted from their
config.json shapes and checked against the parameter count their Hugging Face model reports
(the figures quoted in the comments), so a wrong term cannot hide in a big total.
"""

from __future__ import annotations

import pytest

from calc import (
    COMPONENTS,
    ModelSpec,
    active_param_count,
    matmul_params,
    non_embedding_param_count,
    param_breakdown,
    param_count,
)
from calc.params import layer_breakdown, norm_params


def make(**fields) -> ModelSpec:
    return ModelSpec(name="t", **fields)


# --- small specs, every term by hand --------------------------------------------------------

# GPT-2 style: LayerNorm with bias, biases everywhere, learned positions, tied head.
# L=2, h=8, H=2 (d=4), f=32, V=10, 16 positions.
GPT2_TOY = dict(
    num_hidden_layers=2,
    hidden_size=8,
    num_attention_heads=2,
    intermediate_size=32,
    vocab_size=10,
    max_position_embeddings=16,
    mlp_kind="standard",
    hidden_act="gelu",
    qkv_bias=True,
    attn_out_bias=True,
    mlp_bias=True,
    norm_kind="layernorm",
    position_embedding="learned",
    tie_word_embeddings=True,
)


def test_gpt2_style_by_hand():
    b = param_breakdown(make(**GPT2_TOY))
    assert b == {
        "embed": 10 * 8,  # wte: V x h
        "pos_embed": 16 * 8,  # wpe: positions x h
        "attn/q": 2 * (8 * 8 + 8),  # per layer: W_q h x (H*d) + bias H*d
        "attn/kv": 2 * 2 * (8 * 8 + 8),  # W_k, W_v with biases (MHA: G*d = 8)
        "attn/o": 2 * (8 * 8 + 8),  # c_proj with bias
        "mlp": 2 * (8 * 32 + 32 + 32 * 8 + 8),  # c_fc h x f + f, c_proj f x h + h
        "router": 0,
        "attn/linear": 0,  # no Gated-DeltaNet layers, sinks, shared experts or MTP
        "attn/sinks": 0,
        "attn/indexer": 0,
        "attn/compressor": 0,  # DeepSeek-V4 only
        "mlp/shared": 0,
        "hc": 0,  # DeepSeek-V4 only
        "mtp": 0,
        "norm": 2 * 2 * (8 + 8) + (8 + 8),  # ln_1, ln_2 (weight + bias) per layer, ln_f
        "lm_head": 0,  # tied to wte
    }
    assert param_count(make(**GPT2_TOY)) == 80 + 128 + 144 + 288 + 144 + 1104 + 80  # 1968


def test_gpt2_small_full_size():
    # GPT-2 small (openai-community/gpt2 config.json): n_layer 12, n_embd 768, n_head 12,
    # vocab 50257, n_positions 1024, MLP 4 * 768; GPT2LMHeadModel reports 124,439,808 params.
    s = make(**GPT2_TOY).replace(
        num_hidden_layers=12,
        hidden_size=768,
        num_attention_heads=12,
        intermediate_size=3072,
        vocab_size=50257,
        max_position_embeddings=1024,
    )
    per_layer = (
        (768 * 2304 + 2304)  # c_attn: q, k, v fused, with bias
        + (768 * 768 + 768)  # attn c_proj
        + (768 * 3072 + 3072)  # mlp c_fc
        + (3072 * 768 + 768)  # mlp c_proj
        + 2 * 2 * 768  # ln_1, ln_2
    )
    total = 50257 * 768 + 1024 * 768 + 12 * per_layer + 2 * 768  # + wte, wpe, ln_f
    assert total == 124_439_808
    assert param_count(s) == total
    # non-embedding: without wte and wpe (the LM head is tied, so nothing else is removed)
    assert non_embedding_param_count(s) == 12 * per_layer + 2 * 768 == 85_056_000


# LLaMA style: gated MLP, RMSNorm, no biases, RoPE, untied head; GQA L=2, h=8, H=2, G=1 (d=4).
LLAMA_TOY = dict(
    num_hidden_layers=2,
    hidden_size=8,
    num_attention_heads=2,
    num_key_value_heads=1,
    intermediate_size=16,
    vocab_size=10,
)


def test_gated_by_hand():
    b = param_breakdown(make(**LLAMA_TOY))
    assert b == {
        "embed": 10 * 8,
        "pos_embed": 0,  # RoPE has no table
        "attn/q": 2 * 8 * 8,  # h x (H*d)
        "attn/kv": 2 * 2 * 8 * 4,  # W_k, W_v: h x (G*d), G*d = 4
        "attn/o": 2 * 8 * 8,
        "mlp": 2 * 3 * 8 * 16,  # gate, up: h x f; down: f x h
        "router": 0,
        "norm": 2 * 2 * 8 + 8,  # two RMSNorm weights per layer + final
        "attn/linear": 0,  # no Gated-DeltaNet layers, sinks, shared experts or MTP
        "attn/sinks": 0,
        "attn/indexer": 0,
        "attn/compressor": 0,  # DeepSeek-V4 only
        "mlp/shared": 0,
        "hc": 0,  # DeepSeek-V4 only
        "mtp": 0,
        "lm_head": 10 * 8,
    }
    assert param_count(make(**LLAMA_TOY)) == 80 + 128 + 128 + 128 + 768 + 40 + 80  # 1352


def test_llama_7b_full_size():
    # huggyllama/llama-7b config.json: 32 layers, hidden 4096, 32 heads, intermediate 11008,
    # vocab 32000, untied; LlamaForCausalLM reports 6,738,415,616 params ("6.7B", LLaMA Table 2).
    s = make(**{**LLAMA_TOY, "num_key_value_heads": None}).replace(
        num_hidden_layers=32,
        hidden_size=4096,
        num_attention_heads=32,
        intermediate_size=11008,
        vocab_size=32000,
    )
    per_layer = 4 * 4096 * 4096 + 3 * 4096 * 11008 + 2 * 4096  # q k v o, gate up down, 2 norms
    total = 2 * 32000 * 4096 + 32 * per_layer + 4096  # embed + lm_head, layers, final norm
    assert total == 6_738_415_616
    assert param_count(s) == total


def test_parallel_single_norm_by_hand():
    # Falcon-7B style: parallel attention + MLP sharing one LayerNorm (with bias), MQA, tied.
    # L=3, h=8, H=2, G=1 (d=4), f=32
    s = make(
        num_hidden_layers=3,
        hidden_size=8,
        num_attention_heads=2,
        num_key_value_heads=1,
        intermediate_size=32,
        vocab_size=10,
        mlp_kind="standard",
        norm_kind="layernorm",
        norms_per_block=1,
        block_kind="parallel",
        tie_word_embeddings=True,
    )
    b = param_breakdown(s)
    assert b["attn/q"] == 3 * 8 * 8
    assert b["attn/kv"] == 3 * 2 * 8 * 4
    assert b["attn/o"] == 3 * 8 * 8
    assert b["mlp"] == 3 * 2 * 8 * 32
    assert b["norm"] == 3 * 1 * (8 + 8) + (8 + 8)  # one norm per block + ln_f
    assert b["lm_head"] == 0
    assert param_count(s) == 80 + 192 + 192 + 192 + 1536 + 64  # 2256


def test_falcon_7b_full_size():
    # tiiuae/falcon-7b config.json: 32 layers, hidden 4544, 71 heads (d = 64), multi_query,
    # parallel_attn, no bias, vocab 65024, tied; the HF model reports 6,921,720,704 params.
    s = make(
        num_hidden_layers=32,
        hidden_size=4544,
        num_attention_heads=71,
        num_key_value_heads=1,
        intermediate_size=4 * 4544,
        vocab_size=65024,
        mlp_kind="standard",
        norm_kind="layernorm",
        norms_per_block=1,
        block_kind="parallel",
        tie_word_embeddings=True,
    )
    per_layer = (
        4544 * (4544 + 2 * 64)  # query_key_value: 71 query heads + 1 K + 1 V head of 64
        + 4544 * 4544  # dense
        + 2 * 4544 * 18176  # dense_h_to_4h, dense_4h_to_h
        + 2 * 4544  # input_layernorm (weight + bias)
    )
    total = 65024 * 4544 + 32 * per_layer + 2 * 4544  # word_embeddings, layers, ln_f
    assert total == 6_921_720_704
    assert param_count(s) == total


# Mixtral style MoE: 4 experts, 2 per token. L=2, h=8, H=2, G=1, f=16 per expert.
MOE_TOY = {**LLAMA_TOY, "num_local_experts": 4, "num_experts_per_tok": 2}


def test_moe_by_hand():
    s = make(**MOE_TOY)
    b = param_breakdown(s)
    expert = 3 * 8 * 16  # one gated expert: 384
    assert b["mlp"] == 2 * 4 * expert  # every expert is stored
    assert b["router"] == 2 * 8 * 4  # gate: h x E per layer, no bias
    assert param_count(s) == 80 + 128 + 128 + 128 + 3072 + 64 + 40 + 80  # 3720
    # a token passes through 2 of 4 experts: 2 idle experts x 384 x 2 layers fewer
    assert active_param_count(s) == 3720 - 2 * 2 * expert == 2184


def test_mixtral_8x7b_full_size():
    # mistralai/Mixtral-8x7B-v0.1 config.json: 32 layers, hidden 4096, 32 heads, 8 KV heads,
    # intermediate 14336, 8 experts, 2 per token, vocab 32000, untied. The HF model reports
    # 46,702,792,704 params; Mistral's announcement: "46.7B total, 12.9B active per token".
    s = make(
        num_hidden_layers=32,
        hidden_size=4096,
        num_attention_heads=32,
        num_key_value_heads=8,
        intermediate_size=14336,
        vocab_size=32000,
        num_local_experts=8,
        num_experts_per_tok=2,
    )
    expert = 3 * 4096 * 14336  # w1, w3: h x f; w2: f x h
    per_layer = (
        4096 * 4096  # q_proj
        + 2 * 4096 * 1024  # k_proj, v_proj: 8 KV heads x 128
        + 4096 * 4096  # o_proj
        + 8 * expert
        + 4096 * 8  # router gate
        + 2 * 4096  # norms
    )
    total = 2 * 32000 * 4096 + 32 * per_layer + 4096
    assert total == 46_702_792_704
    assert param_count(s) == total
    active = total - 32 * 6 * expert  # 6 of 8 experts idle per layer
    assert active == 12_879_925_248
    assert active_param_count(s) == active


def test_dense_active_equals_total():
    for fields in (GPT2_TOY, LLAMA_TOY):
        s = make(**fields)
        assert active_param_count(s) == param_count(s)


def test_tied_versus_untied():
    untied = make(**LLAMA_TOY)
    tied = untied.replace(tie_word_embeddings=True)
    assert param_breakdown(tied)["lm_head"] == 0
    assert param_breakdown(untied)["lm_head"] == 10 * 8
    assert param_count(untied) - param_count(tied) == 10 * 8  # one V x h table fewer


def test_qkv_bias_only():
    # Qwen2 style: biases on q, k, v projections only
    plain = make(**LLAMA_TOY)
    biased = plain.replace(qkv_bias=True)
    b0, b1 = param_breakdown(plain), param_breakdown(biased)
    assert b1["attn/q"] - b0["attn/q"] == 2 * 8  # q bias: H*d per layer
    assert b1["attn/kv"] - b0["attn/kv"] == 2 * 2 * 4  # k and v bias: G*d each, per layer
    assert b1["attn/o"] == b0["attn/o"] and b1["mlp"] == b0["mlp"]


def test_qwen2_0_5b_full_size():
    # Qwen/Qwen2-0.5B config.json: 24 layers, hidden 896, 14 heads (d = 64), 2 KV heads,
    # intermediate 4864, vocab 151936, tied, q/k/v biases; the HF model reports 494,032,768.
    s = make(
        num_hidden_layers=24,
        hidden_size=896,
        num_attention_heads=14,
        num_key_value_heads=2,
        intermediate_size=4864,
        vocab_size=151936,
        tie_word_embeddings=True,
        qkv_bias=True,
    )
    per_layer = (
        (896 * 896 + 896)  # q_proj with bias
        + 2 * (896 * 128 + 128)  # k_proj, v_proj with bias: 2 KV heads x 64
        + 896 * 896  # o_proj, no bias
        + 3 * 896 * 4864  # gate, up, down
        + 2 * 896  # two RMSNorms
    )
    total = 151936 * 896 + 24 * per_layer + 896
    assert total == 494_032_768
    assert param_count(s) == total


def test_out_and_mlp_biases():
    plain = make(**LLAMA_TOY)
    b0 = param_breakdown(plain)
    b1 = param_breakdown(plain.replace(attn_out_bias=True, mlp_bias=True))
    assert b1["attn/o"] - b0["attn/o"] == 2 * 8  # o bias: h per layer
    assert b1["mlp"] - b0["mlp"] == 2 * (16 + 16 + 8)  # gate f, up f, down h per layer
    standard = plain.replace(mlp_kind="standard")
    b2 = param_breakdown(standard.replace(mlp_bias=True))
    assert b2["mlp"] - param_breakdown(standard)["mlp"] == 2 * (16 + 8)  # up f, down h


@pytest.mark.parametrize(
    ("kind", "per_norm"),
    [("layernorm", 8 + 8), ("layernorm_nobias", 8), ("rmsnorm", 8)],  # weight (+ bias)
)
@pytest.mark.parametrize("norms", [1, 2, 4])
def test_norm_kinds_and_counts(kind, per_norm, norms):
    s = make(**LLAMA_TOY, norm_kind=kind, norms_per_block=norms)
    assert norm_params(s) == per_norm
    assert param_breakdown(s)["norm"] == 2 * norms * per_norm + per_norm  # blocks + final
    no_final = s.replace(final_norm=False)
    assert param_breakdown(no_final)["norm"] == 2 * norms * per_norm


def test_seed_mha_versus_gqa_kv_params():
    # seeds/000, section 11.5: d_model 512, 8 heads, 2 KV heads; W_k + W_v
    # "MHA KV params: 524,288" (2 x 512 x 512), "GQA KV params: 131,072" (2 x 512 x 128)
    fields = dict(
        num_hidden_layers=1,
        hidden_size=512,
        num_attention_heads=8,
        intermediate_size=2048,
        vocab_size=100,
    )
    mha = make(**fields)
    gqa = make(**fields, num_key_value_heads=2)
    assert layer_breakdown(mha)["attn/kv"] == 2 * 512 * 512 == 524_288
    assert layer_breakdown(gqa)["attn/kv"] == 2 * 512 * 128 == 131_072
    assert 1 - 131_072 / 524_288 == 0.75  # the seed's "KV param reduction: 75%"


def test_breakdown_keys_and_total():
    for fields in (GPT2_TOY, LLAMA_TOY, MOE_TOY):
        s = make(**fields)
        b = param_breakdown(s)
        assert tuple(b) == COMPONENTS
        assert param_count(s) == sum(b.values())


def test_non_embedding_keeps_untied_head():
    s = make(**LLAMA_TOY)
    # total 1352 less the token table 80; the untied LM head stays (Kaplan et al. 2020)
    assert non_embedding_param_count(s) == 1352 - 80


def test_matmul_params_by_hand():
    # weights that multiply an activation: no norms, no biases, no embedding lookup;
    # the LM head counts even when tied (it is still a V x h matmul)
    gpt2 = make(**GPT2_TOY)
    assert matmul_params(gpt2) == 2 * (8 * 8 + 2 * 8 * 8 + 8 * 8 + 2 * 8 * 32) + 10 * 8  # 1616
    moe = make(**MOE_TOY)
    per_layer_active = 8 * 8 + 2 * 8 * 4 + 8 * 8 + 2 * 3 * 8 * 16 + 8 * 4  # 2 experts + router
    assert matmul_params(moe) == 2 * per_layer_active + 10 * 8 == 2064
    per_layer_all = 8 * 8 + 2 * 8 * 4 + 8 * 8 + 4 * 3 * 8 * 16 + 8 * 4
    assert matmul_params(moe, active=False) == 2 * per_layer_all + 10 * 8 == 3600


def test_layer_breakdown_counts_every_routed_expert():
    # gpt-oss-120b (config.json): h 2880, 128 experts of 2880 (gate_up 2 x 2880, down 2880),
    # expert biases on: one MoE layer's routed experts hold
    # 128 x (2880 x 5760 + 5760 + 2880 x 2880 + 2880) parameters
    from calc.presets import load_preset

    b = layer_breakdown(load_preset("gpt-oss-120b"), 0)
    assert b["mlp"] == 128 * (2880 * 5760 + 5760 + 2880 * 2880 + 2880)
