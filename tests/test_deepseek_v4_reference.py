"""DeepSeek-V4 against transformers 5.23's own modeling code, on random small configs.

For each config (hypothesis, derandomized): the numel of the model
`AutoModelForCausalLM.from_config` builds against calc.param_count, and the bytes of every
tensor in the cache a CPU prefill returns (DynamicSlidingWindowLayer for sliding layers,
DeepseekV4CSACache / DeepseekV4HCACache for compressed ones: window keys, values when they are a
separate tensor, compressed entries, the compressor's buffers and overlap state), layer by
layer, against calc.kv_cache_layer_bytes with `convention="transformers"`, at lengths below and
past the window and the compress rates, divisible by them or not.

Findings (transformers 5.23): sliding-only layers store K and V as two tensors (2 x head_dim a
token); compressed layers alias values to keys (head_dim); a compressor buffers n % rate
tokens of its kv_proj and gate_proj outputs; CSA keeps the last closed window's first-half kv
and gate (rate x (head_dim + index_head_dim) each) once one window has closed; that gate is
float32 when the model is loaded with from_pretrained (position_bias is kept in fp32), the
model dtype with from_config.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("transformers.models.deepseek_v4")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from test_reference_modern import _cache_layer_bytes  # noqa: E402

import calc  # noqa: E402

transformers.logging.set_verbosity_error()
RATIOS = (0, 4, 128)  # DeepseekV4Config's legacy compress_ratios values (layer types)
TYPES = ("sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention")


@st.composite
def configs(draw) -> dict:
    L = draw(st.integers(2, 5))
    H = draw(st.sampled_from([2, 4]))
    d = draw(st.sampled_from([16, 32]))
    cfg = {
        "model_type": "deepseek_v4",
        "num_hidden_layers": L,
        "hidden_size": draw(st.sampled_from([32, 48])),
        "num_attention_heads": H,
        "head_dim": d,
        "q_lora_rank": draw(st.sampled_from([8, 12])),
        "o_groups": draw(st.sampled_from([1, 2, H])),
        "o_lora_rank": draw(st.sampled_from([4, 8])),
        "hc_mult": draw(st.integers(1, 3)),
        "hc_sinkhorn_iters": 2,
        "sliding_window": draw(st.integers(2, 9)),
        "index_n_heads": draw(st.sampled_from([1, 2])),
        "index_head_dim": draw(st.sampled_from([8, 16])),
        "index_topk": draw(st.integers(1, 4)),
        "n_routed_experts": (E := draw(st.integers(2, 4))),
        "num_experts_per_tok": draw(st.integers(1, E)),
        "moe_intermediate_size": draw(st.sampled_from([16, 24])),
        "mlp_bias": draw(st.booleans()),
        "tie_word_embeddings": draw(st.booleans()),
        "vocab_size": 96,
        "max_position_embeddings": 256,
        "pad_token_id": 0,
        "bos_token_id": 1,
        "eos_token_id": 2,
    }
    if draw(st.booleans()):  # legacy keys: ratios (with a trailing MTP entry), rates, rope dim
        ratios = draw(st.lists(st.sampled_from(RATIOS), min_size=L, max_size=L)) + [0]
        cfg.update(compress_ratios=ratios, num_hash_layers=draw(st.integers(0, L)))
        cfg.update(
            compress_rate_csa=draw(st.integers(2, 4)), compress_rate_hca=draw(st.integers(3, 8))
        )
        cfg["qk_rope_head_dim"] = draw(st.sampled_from([4, 8]))
    else:  # transformers 5.x keys
        cfg["layer_types"] = draw(st.lists(st.sampled_from(TYPES), min_size=L, max_size=L))
        n_hash = draw(st.integers(0, L))
        cfg["mlp_layer_types"] = ["hash_moe"] * n_hash + ["moe"] * (L - n_hash)
        cfg["compress_rates"] = {
            TYPES[1]: draw(st.integers(2, 4)),
            TYPES[2]: draw(st.integers(3, 8)),
        }
        cfg["partial_rotary_factor"] = draw(st.sampled_from([0.25, 0.5]))
    return cfg


def _build(cfg: dict, dtype=torch.float32):
    d = {k: v for k, v in cfg.items() if k != "model_type"}
    config = transformers.AutoConfig.for_model("deepseek_v4", **d)
    return transformers.AutoModelForCausalLM.from_config(
        config, dtype=dtype, experts_implementation="eager"
    )


def _prefill(model, n: int, batch: int):
    with torch.no_grad():
        ids = torch.randint(3, 96, (batch, n))
        return model(input_ids=ids, use_cache=True).past_key_values


@settings(
    max_examples=8,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_random_configs_match_transformers(data):
    cfg = data.draw(configs())
    spec = calc.from_hf_config(cfg)
    model = _build(cfg)
    assert calc.param_count(spec) == sum(p.numel() for p in model.parameters())
    batch = data.draw(st.integers(1, 2))
    for n in sorted({1, data.draw(st.integers(2, 12)), data.draw(st.integers(13, 40))}):
        want = calc.kv_cache_layer_bytes(spec, n, batch, "fp32", convention="transformers")
        assert _cache_layer_bytes(_prefill(model, n, batch)) == want, n


def test_bf16_from_pretrained_keeps_the_overlap_gate_in_fp32(tmp_path):
    cfg = {
        "model_type": "deepseek_v4", "num_hidden_layers": 3, "hidden_size": 32,
        "num_attention_heads": 2, "head_dim": 16, "q_lora_rank": 8, "qk_rope_head_dim": 4,
        "o_groups": 2, "o_lora_rank": 4, "hc_mult": 2, "sliding_window": 5,
        "compress_ratios": [0, 4, 128, 0], "compress_rate_csa": 3, "compress_rate_hca": 4,
        "index_n_heads": 2, "index_head_dim": 8, "index_topk": 2, "n_routed_experts": 3,
        "num_experts_per_tok": 2, "moe_intermediate_size": 16, "num_hash_layers": 1,
        "vocab_size": 96, "max_position_embeddings": 64, "pad_token_id": 0,
    }  # fmt: skip
    spec = calc.from_hf_config(cfg)
    _build(cfg).save_pretrained(tmp_path)
    model = transformers.AutoModelForCausalLM.from_pretrained(
        tmp_path, dtype=torch.bfloat16, experts_implementation="eager"
    )
    for n in (2, 3, 7, 13):  # before and after the first closed window
        cache = _prefill(model, n, 2)
        want = calc.kv_cache_layer_bytes(spec, n, 2, "bf16", convention="transformers")
        assert _cache_layer_bytes(cache) == want, n
    assert cache.layers[1].overlap_gate["compressor"].dtype == torch.float32


@pytest.mark.parametrize("n", [2, 11, 17])
def test_prefill_flops_match_flop_counter(n):
    # FlopCounterMode over a whole prefill (eager: every query scores every key of the window
    # cache's returned states and every compressed entry, then masks) against kvcalc's
    # non-causal count, with two differences written out: the indexer's weighted sum over its
    # heads is elementwise (kvcalc counts it, + 2 x H_i a pair; the counter does not), and the
    # hyper-connections' comb mixing, torch.matmul(comb^T, streams), 2 x m^2 x h a token for
    # each of 2 connections a layer, is a matmul the counter sees and kvcalc leaves out
    from torch.utils.flop_counter import FlopCounterMode

    from calc.attention import prefill_attention_flops
    from calc.params import matmul_params

    cfg = {
        "model_type": "deepseek_v4", "num_hidden_layers": 4, "hidden_size": 32,
        "num_attention_heads": 2, "head_dim": 16, "q_lora_rank": 8, "qk_rope_head_dim": 4,
        "o_groups": 2, "o_lora_rank": 4, "hc_mult": 2, "sliding_window": 5,
        "compress_ratios": [0, 4, 128, 4, 0], "compress_rate_csa": 3, "compress_rate_hca": 4,
        "index_n_heads": 2, "index_head_dim": 8, "index_topk": 2, "n_routed_experts": 3,
        "num_experts_per_tok": 2, "moe_intermediate_size": 16, "num_hash_layers": 1,
        "vocab_size": 96, "max_position_embeddings": 64, "pad_token_id": 0,
    }  # fmt: skip
    spec = calc.from_hf_config(cfg)
    model = _build(cfg)
    counter = FlopCounterMode(display=False)
    with counter, torch.no_grad():
        model(input_ids=torch.randint(3, 96, (1, n)), use_cache=True)
    weighted_sum = 2 * (2 * 2 * n * (n // 3))  # 2 CSA layers x 2 x H_i x (query, entry) pairs
    comb = 4 * 2 * (2 * 2 * 2 * 32) * n  # 4 layers x 2 connections x 2 m^2 h, n tokens
    want = 2 * n * matmul_params(spec) + prefill_attention_flops(spec, n, causal=False)
    assert counter.get_total_flops() == want - weighted_sum + comb
