"""Model presets: every file loads, carries its provenance, states the architecture facts its
sources give, and the loader rejects bad files with one clear line.

Published parameter counts are checked in test_presets_published.py.
"""

from __future__ import annotations

import datetime as dt

import pytest

import calc
from calc import presets as presets_mod
from calc.presets import spec_from_toml_text

# The preset list of the issue "kvcalc core": a missing or extra file fails test_full_list.
EXPECTED_PRESETS = [
    *("gpt-3-125m", "gpt-3-350m", "gpt-3-760m", "gpt-3-1.3b", "gpt-3-2.7b", "gpt-3-6.7b"),
    *("gpt-3-13b", "gpt-3-175b"),
    *("llama-1-7b", "llama-1-13b", "llama-1-33b", "llama-1-65b"),
    *("llama-2-7b", "llama-2-13b", "llama-2-70b"),
    *("llama-3-8b", "llama-3-70b", "llama-3.1-8b", "llama-3.1-70b", "llama-3.1-405b"),
    *("mistral-7b-v0.1", "mixtral-8x7b"),
    *("palm-8b", "palm-62b", "palm-540b"),
    *("falcon-7b", "falcon-40b", "falcon-180b"),
    *("gemma-2b", "gemma-7b", "gemma-2-9b", "gemma-2-27b"),
    *("qwen2-0.5b", "qwen2-1.5b", "qwen2-7b", "qwen2-72b"),
]
FAMILIES = {
    *("gpt-3", "llama-1", "llama-2", "llama-3", "llama-3.1", "mistral", "mixtral", "palm"),
    *("falcon", "gemma", "gemma-2", "qwen2"),
    # today's families (tests/test_presets_modern.py)
    *("llama-3.2", "llama-4", "qwen2.5", "qwen3", "qwen3-next", "deepseek", "kimi", "glm"),
    *("gpt-oss", "gemma-3", "phi-3", "phi", "mistral", "olmo-2", "smollm3", "command"),
    "minimax",
    *("nemotron-3", "granite-4.0"),  # Mamba-2 hybrids (tests/test_hybrid_ssm.py)
    "qwen3.5",  # Gated DeltaNet hybrids with a vision tower (tests/test_serving_qwen35_ssm.py)
}


def test_full_list():
    from test_presets_modern import MODERN

    # + deepseek-v4-flash; + minimax-m2.5, kimi-k2.5, glm-4.7-flash, glm-5; + 2 Mamba-2 hybrids;
    # + deepseek-v3.2; + qwen3.5-27b, qwen3.5-35b-a3b; + qwen3.5-4b, qwen2.5-3b
    assert len(EXPECTED_PRESETS) == 36 and len(MODERN) == 42
    assert calc.list_presets() == sorted([*EXPECTED_PRESETS, *MODERN])


# --- provenance ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", calc.list_presets())
def test_preset_has_provenance(name):
    spec = calc.load_preset(name)
    assert spec.name == name
    assert spec.display_name
    assert spec.family in FAMILIES
    assert name.startswith(spec.family + "-")  # "gemma-2-9b" is family "gemma-2", not "gemma"
    assert spec.source, "at least one source URL"
    for url in spec.source:
        assert url.startswith("https://") and " " not in url, url
    assert isinstance(spec.retrieved, dt.date)
    assert spec.retrieved in (dt.date(2026, 11, 20), dt.date(2026, 11, 23))
    assert spec.published_params
    # Only a mixture of experts publishes an active-parameter figure.
    assert (spec.published_active_params is not None) == spec.is_moe


@pytest.mark.parametrize("name", calc.list_presets())
def test_preset_is_consistent(name):
    spec = calc.load_preset(name)
    assert spec.num_attention_heads % spec.n_kv_heads == 0
    if spec.head_dim_ is None and not spec.is_mla:  # MLA heads are nope + rope wide
        assert spec.q_dim == spec.hidden_size
    assert spec.replace() == spec  # survives a dump / validate round trip


# --- architecture facts, each from the preset's source -------------------------------------

# (preset, property, expected, citation)
FACTS = [
    # GPT-3 paper Sec. 2.1: GPT-2 architecture: learned positions, LayerNorm, biases, tied.
    ("gpt-3-175b", "position_embedding", "learned", "GPT-3 Sec. 2.1 / GPT-2"),
    ("gpt-3-175b", "norm_kind", "layernorm", "GPT-2 layer_norm has a bias"),
    ("gpt-3-175b", "mlp_kind", "standard", "GPT-2 MLP: c_fc 4d + c_proj"),
    ("gpt-3-175b", "qkv_bias", True, "GPT-2 c_attn has a bias"),
    ("gpt-3-175b", "attn_out_bias", True, "GPT-2 c_proj has a bias"),
    ("gpt-3-175b", "mlp_bias", True, "GPT-2 c_fc, c_proj have biases"),
    ("gpt-3-175b", "tie_word_embeddings", True, "GPT-2 lm_head = wte"),
    ("gpt-3-175b", "vocab_size", 50257, "GPT-3 Sec. 2.1 (GPT-2 BPE)"),
    ("gpt-3-175b", "max_position_embeddings", 2048, "GPT-3 Table 2.1 n_ctx"),
    ("gpt-3-1.3b", "hidden_size", 2048, "Table 2.1 d_model (24 x 128 row resolved in notes)"),
    ("gpt-3-13b", "hidden_size", 5120, "Table 2.1: 40 heads x 128 (5140 typo, see notes)"),
    # PaLM paper Sec. 2 and Table 1.
    ("palm-540b", "attention_kind", "MQA", "PaLM Sec. 2: multi-query attention"),
    ("palm-540b", "head_dim", 256, "PaLM Table 1"),
    ("palm-540b", "block_kind", "parallel", "PaLM Sec. 2: parallel layers"),
    ("palm-540b", "norms_per_block", 1, "one LayerNorm feeds attention and MLP"),
    ("palm-540b", "norm_kind", "layernorm_nobias", "PaLM Sec. 2: no biases"),
    ("palm-540b", "intermediate_size", 4 * 18432, "PaLM Sec. 2: d_ff = 4 d_model"),
    ("palm-540b", "tie_word_embeddings", True, "PaLM Sec. 2: shared input-output embeddings"),
    ("palm-8b", "num_hidden_layers", 32, "PaLM Table 1"),
    ("palm-62b", "num_attention_heads", 32, "PaLM Table 1"),
    # Falcon config.json + transformers modeling_falcon.
    ("falcon-7b", "attention_kind", "MQA", "falcon-7b config: multi_query true"),
    ("falcon-7b", "num_attention_heads", 71, "falcon-7b config"),
    ("falcon-7b", "norms_per_block", 1, "old architecture: one input_layernorm"),
    ("falcon-7b", "block_kind", "parallel", "config: parallel_attn true"),
    ("falcon-7b", "tie_word_embeddings", True, "FalconForCausalLM ties lm_head"),
    ("falcon-40b", "n_kv_heads", 8, "falcon-40b config: num_kv_heads 8"),
    ("falcon-40b", "norms_per_block", 2, "new_decoder_architecture: ln_attn + ln_mlp"),
    ("falcon-180b", "hidden_size", 14848, "falcon-180B config"),
    ("falcon-180b", "num_attention_heads", 232, "falcon-180B config"),
    ("falcon-180b", "num_hidden_layers", 80, "falcon-180B config"),
    # Gemma / Gemma 2 papers Table 1 and config.json.
    ("gemma-7b", "head_dim", 256, "gemma-7b config head_dim (not 3072/16 = 192)"),
    ("gemma-2b", "attention_kind", "MQA", "Gemma Table 1: num KV heads 1"),
    ("gemma-2-9b", "norms_per_block", 4, "Gemma 2: pre- and post-norm on both sub-layers"),
    ("gemma-2-27b", "head_dim", 128, "Gemma 2 Table 1"),
    ("gemma-2-9b", "sliding_window", 4096, "Gemma 2 Table 1: sliding window 4096"),
    # Mistral / Mixtral.
    ("mistral-7b-v0.1", "sliding_window", 4096, "Mistral 7B Table 1: window_size 4096"),
    ("mixtral-8x7b", "sliding_window", None, "Mixtral config: sliding_window null"),
    ("mixtral-8x7b", "num_local_experts", 8, "Mixtral config"),
    ("mixtral-8x7b", "num_experts_per_tok", 2, "Mixtral config"),
    # Qwen2 config.json + transformers Qwen2Attention.
    ("qwen2-7b", "qkv_bias", True, "Qwen2 report Sec. 2.2: QKV bias"),
    ("qwen2-7b", "attn_out_bias", False, "Qwen2Attention o_proj bias=False"),
    ("qwen2-7b", "sliding_window", None, "config: use_sliding_window false"),
    ("qwen2-0.5b", "tie_word_embeddings", True, "Qwen2 report Table 1: embedding tying"),
    ("qwen2-1.5b", "tie_word_embeddings", True, "Qwen2 report Table 1: embedding tying"),
    ("qwen2-72b", "tie_word_embeddings", False, "Qwen2 report Table 1: embedding tying"),
]


@pytest.mark.parametrize(("name", "prop", "expected", "cite"), FACTS)
def test_architecture_fact(name, prop, expected, cite):
    assert getattr(calc.load_preset(name), prop) == expected, cite


# Context (max_position_embeddings) and vocabulary per family, from the official configs.
FAMILY_SHAPE = {
    "llama-1": (2048, 32000),  # huggyllama/llama-*: max_position_embeddings 2048
    "llama-2": (4096, 32000),  # Llama 2 paper Table 1: 4k context
    "llama-3": (8192, 128256),  # Meta-Llama-3-* config.json
    "llama-3.1": (131072, 128256),  # Llama-3.1-* config.json
}


@pytest.mark.parametrize("name", [n for n in EXPECTED_PRESETS if n.startswith("llama")])
def test_llama_context_and_vocab(name):
    spec = calc.load_preset(name)
    assert (spec.max_position_embeddings, spec.vocab_size) == FAMILY_SHAPE[spec.family]


def test_sliding_layers():
    # Gemma 2: layer 0 slides, layer 1 is global, alternating (transformers Gemma2: even layers
    # slide); 42 layers -> 21 sliding + 21 global.
    g = calc.load_preset("gemma-2-9b")
    assert g.layer_is_sliding[:4] == (True, False, True, False)
    assert (g.n_sliding_layers, g.n_full_layers) == (21, 21)
    # Mistral: every one of the 32 layers slides.
    m = calc.load_preset("mistral-7b-v0.1")
    assert (m.n_sliding_layers, m.n_full_layers) == (32, 0)
    # Qwen2 and Mixtral: no layer slides.
    for name in ("qwen2-72b", "mixtral-8x7b"):
        assert calc.load_preset(name).n_sliding_layers == 0


# --- loader errors -----------------------------------------------------------------------------

VALID = """
name = "toy"
num_hidden_layers = 2
hidden_size = 64
num_attention_heads = 8
intermediate_size = 128
vocab_size = 100
"""


def _error(text: str) -> str:
    with pytest.raises(ValueError) as info:
        spec_from_toml_text(text, origin="toy.toml")
    msg = str(info.value)
    assert "\n" not in msg and msg.startswith("toy.toml: ")
    return msg


def test_valid_text_loads():
    assert spec_from_toml_text(VALID).num_hidden_layers == 2


def test_unknown_name_lists_closest():
    with pytest.raises(ValueError) as info:
        calc.load_preset("llama-3-7b")
    msg = str(info.value)
    assert "'llama-3-7b'" in msg and "closest" in msg
    assert "llama-3-8b" in msg and "llama-3-70b" in msg


def test_unknown_name_without_close_match():
    with pytest.raises(ValueError, match="unknown preset 'zzzz-qqqq'"):
        calc.load_preset("zzzz-qqqq")


def test_malformed_toml():
    assert "malformed TOML" in _error(VALID + "hidden_size = [\n")


def test_wrong_type_names_field_and_value():
    msg = _error(VALID.replace("hidden_size = 64", 'hidden_size = "big"'))
    assert "'hidden_size'" in msg and "'big'" in msg


def test_negative_size_names_field_and_value():
    msg = _error(VALID.replace("vocab_size = 100", "vocab_size = -100"))
    assert "'vocab_size'" in msg and "greater than 0" in msg and "-100" in msg


def test_kv_heads_must_divide_heads():
    msg = _error(VALID + "num_key_value_heads = 3\n")
    assert msg == "toy.toml: 'num_key_value_heads' must divide num_attention_heads=8: got 3"


def test_hidden_size_must_divide_by_heads_without_head_dim():
    msg = _error(VALID.replace("num_attention_heads = 8", "num_attention_heads = 7"))
    assert "'hidden_size'" in msg and "num_attention_heads=7" in msg and "got 64" in msg


def test_unknown_field_is_named():
    msg = _error(VALID + "num_layers = 2\n")
    assert "'num_layers'" in msg and "got 2" in msg


def test_name_must_equal_file_name(tmp_path, monkeypatch):
    (tmp_path / "toy-b.toml").write_text(VALID, encoding="utf-8")  # holds name = "toy"
    monkeypatch.setattr(presets_mod, "_preset_files", lambda: {"toy-b": tmp_path / "toy-b.toml"})
    presets_mod.load_preset.cache_clear()
    try:
        with pytest.raises(ValueError) as info:
            presets_mod.load_preset("toy-b")
    finally:
        presets_mod.load_preset.cache_clear()
    msg = str(info.value)
    assert "'name'" in msg and "'toy-b'" in msg and "got 'toy'" in msg
