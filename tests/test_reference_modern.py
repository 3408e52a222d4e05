"""calc against transformers' own modeling code for every model type of today's families.

For random small configs of each model type (hypothesis, derandomized): the numel of the model
`AutoModelForCausalLM.from_config` builds, and the bytes of every tensor in the cache a CPU
prefill returns (K/V of softmax layers, MLA's latent and rope key, the conv and recurrent states
of linear-attention layers), against calc.param_count and calc.kv_cache_layer_bytes with
`convention="transformers"`. The real full-size configs are in test_presets_modern.py.

Findings (transformers 5.23): DeepSeek-V2/V3 attention caches the latent (kv_lora_rank) and the
rope key (qk_rope_head_dim) per token, like the engines; DeepSeek-V3.2 adds its indexer's key
(index_head_dim, DynamicIndexedLayer.indexer_keys); chunked layers are cached as sliding
windows of chunk - 1 tokens; a Gated-DeltaNet layer holds a conv state of `kernel` columns and
a value_heads x d_k x d_v recurrent state.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import calc  # noqa: E402
from calc.hf.modern import MODERN_TYPES  # noqa: E402

transformers.logging.set_verbosity_error()

SLIDING = ("qwen3", "qwen2", "mistral", "gemma2", "gemma3_text", "gpt_oss", "olmo3", "exaone4")
MOE = ("qwen3_moe", "qwen2_moe", "qwen3_next", "qwen3_5_moe_text", "deepseek_v2", "deepseek_v3",
       "deepseek_v32", "gpt_oss", "llama4_text", "glm4_moe", "minimax_m2", "glm4_moe_lite",
       "glm_moe_dsa")  # fmt: skip
LINEAR = ("qwen3_next", "qwen3_5_text", "qwen3_5_moe_text")
MLA = ("deepseek_v2", "deepseek_v3", "deepseek_v32", "glm4_moe_lite", "glm_moe_dsa")


@st.composite
def configs(draw, mt: str) -> dict:
    G = draw(st.sampled_from([1, 2]))
    H = G * draw(st.sampled_from([1, 2]))
    d = draw(st.sampled_from([8, 16]))
    L = draw(st.integers(2, 5))
    cfg = {
        "model_type": mt,
        "num_hidden_layers": L,
        "hidden_size": draw(st.sampled_from([32, 48])),
        "num_attention_heads": H,
        "num_key_value_heads": G,
        "head_dim": d,
        "intermediate_size": draw(st.sampled_from([24, 40])),
        "vocab_size": 96,
        "pad_token_id": 0,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "tie_word_embeddings": draw(st.booleans()),
    }
    for flag in ("attention_bias", "use_qk_norm", "mlp_bias"):
        cfg[flag] = draw(st.booleans())
    if mt in SLIDING:
        cfg["sliding_window"] = draw(st.integers(2, 9))
        cfg["use_sliding_window"] = True
        names = st.sampled_from(["full_attention", "sliding_attention"])
        cfg["layer_types"] = draw(st.lists(names, min_size=L, max_size=L))
    if mt in LINEAR:
        names = st.sampled_from(["full_attention", "linear_attention"])
        # at least one full-attention layer: transformers' cache cannot report a length
        # without one (a config of linear layers only fails in its forward)
        cfg["layer_types"] = draw(st.lists(names, min_size=L - 1, max_size=L - 1))
        cfg["layer_types"].insert(draw(st.integers(0, L - 1)), "full_attention")
        cfg.update(linear_num_key_heads=2, linear_num_value_heads=draw(st.sampled_from([2, 4])))
        cfg.update(linear_key_head_dim=8, linear_value_head_dim=8)
        cfg["linear_conv_kernel_dim"] = draw(st.integers(2, 4))
    if mt in MOE:
        E = draw(st.integers(2, 4))
        cfg.update(num_local_experts=E, num_experts=E, n_routed_experts=E)
        cfg["num_experts_per_tok"] = draw(st.integers(1, E))
        cfg["moe_intermediate_size"] = draw(st.sampled_from([16, 24]))
        cfg["shared_expert_intermediate_size"] = draw(st.sampled_from([16, 32]))
        cfg["n_shared_experts"] = draw(st.integers(1, 2))
        cfg["first_k_dense_replace"] = draw(st.integers(0, 1))
        cfg["decoder_sparse_step"] = draw(st.integers(1, 2))
        cfg["mlp_only_layers"] = draw(st.lists(st.integers(0, L - 1), max_size=1))
        cfg["interleave_moe_layer_step"] = draw(st.integers(1, 2))
        cfg["n_group"] = cfg["topk_group"] = 1
    if mt in MLA:
        cfg.update(kv_lora_rank=draw(st.sampled_from([8, 16])), qk_rope_head_dim=4)
        cfg.update(qk_nope_head_dim=8, v_head_dim=draw(st.sampled_from([8, 12])))
        cfg["q_lora_rank"] = draw(st.sampled_from([None, 12]))
        cfg.pop("head_dim")  # DeepSeek's rotary takes head_dim for qk_rope_head_dim
        cfg["num_key_value_heads"] = H  # its eager attention repeats K/V by H / this
        cfg["mlp_bias"] = draw(st.booleans())
    if mt == "glm4_moe_lite":  # Glm4MoeLiteConfig makes layer 0 dense whatever this says
        cfg["first_k_dense_replace"] = 1
    if mt == "minimax_m2":  # q/k/v/o never carry a bias, q/k norms always exist (else refused)
        cfg.update(attention_bias=False, use_qk_norm=True)
        cfg["rotary_dim"] = draw(st.sampled_from([d // 2, d]))
    if mt in ("deepseek_v32", "glm_moe_dsa"):  # the indexer reads the query latent: q_lora set
        cfg["q_lora_rank"] = 12
        cfg["index_n_heads"] = draw(st.sampled_from([1, 2, 3]))
        cfg["index_head_dim"] = draw(st.sampled_from([4, 8]))  # >= qk_rope_head_dim
        cfg["index_topk"] = draw(st.integers(1, 6))
    if mt == "llama4_text":
        cfg["attention_chunk_size"] = draw(st.integers(2, 9))
        cfg["intermediate_size_mlp"] = 40
        cfg["no_rope_layers"] = draw(st.lists(st.sampled_from([0, 1]), min_size=L, max_size=L))
    if mt == "qwen3_5_moe_text":
        cfg.pop("intermediate_size")  # MoE-only configs name no dense width
    return cfg


def _cache_layer_bytes(cache) -> list[int]:
    """Bytes of every tensor each cache layer holds, a tensor held twice counted once
    (DeepSeek-V4's compressed layers alias values to keys)."""
    out = []
    dicts = (
        "conv_states",
        "recurrent_states",  # Gated DeltaNet
        "buffer_kv",
        "buffer_gate",
        "compressed_kv",
        "overlap_kv",
        "overlap_gate",
    )  # V4
    for layer in cache.layers:
        tensors = [getattr(layer, n, None) for n in ("keys", "values", "indexer_keys")]
        for n in dicts:
            tensors += list((getattr(layer, n, None) or {}).values())
        unique = {id(t): t for t in tensors if torch.is_tensor(t)}.values()
        out.append(sum(t.numel() * t.element_size() for t in unique))
    return out


def _build(cfg: dict):
    d = {k: v for k, v in cfg.items() if k != "model_type"}
    config = transformers.AutoConfig.for_model(cfg["model_type"], **d)
    extra = {"experts_implementation": "eager"} if cfg["model_type"] in MOE else {}
    return transformers.AutoModelForCausalLM.from_config(config, dtype=torch.float32, **extra)


@pytest.mark.parametrize("mt", MODERN_TYPES)
@settings(
    max_examples=5,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_random_configs_match_transformers(mt, data):
    cfg = data.draw(configs(mt))
    spec = calc.from_hf_config(cfg)
    model = _build(cfg)
    assert calc.param_count(spec) == sum(p.numel() for p in model.parameters())
    n, batch = data.draw(st.integers(1, 12)), data.draw(st.integers(1, 2))
    with torch.no_grad():
        ids = torch.randint(3, 96, (batch, n))
        cache = model(input_ids=ids, use_cache=True).past_key_values
    want = calc.kv_cache_layer_bytes(spec, n, batch, "fp32", convention="transformers")
    assert _cache_layer_bytes(cache) == want
