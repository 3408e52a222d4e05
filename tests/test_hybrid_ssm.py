"""Mamba-2 hybrids (nemotron_h, granitemoehybrid): counts against transformers' own model on the
meta device, the cache tensors it allocates, formulas written out from the modeling code and
vLLM's state shapes, and the config fields that are refused by name.

Fixtures: tests/fixtures/hf/modern/nemotron-3-nano-30b-a3b.json and granite-4.0-h-small.json
(the presets' configs: their `notes` say where each was read; test_presets_modern.py checks them
like every modern preset); tests/fixtures/hf/hybrid_ssm/granite-4.0-h-tiny.json, assembled from a
public quote of ibm-granite/granite-4.0-h-tiny's config.json ("GRANITE_H_TINY_HF", a simulator's
hf_to_config test, found through the look-up index; mamba_conv_bias / mamba_proj_bias from an
mlx_lm param-count test quoting "granite-4.0-h-tiny's real field values"; NoPE and bfloat16 as IBM's
model card states for the family).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import calc
from calc.spec import ModelSpec

HF = Path(__file__).parent / "fixtures" / "hf"
NANO = HF / "modern" / "nemotron-3-nano-30b-a3b.json"
SMALL = HF / "modern" / "granite-4.0-h-small.json"
TINY = HF / "hybrid_ssm" / "granite-4.0-h-tiny.json"


def _load(path: Path) -> dict:
    return json.loads(path.read_text())


# --- written out from the modeling code ------------------------------------------------------


def test_nemotron_nano_written_out():
    # transformers 5.x modeling_nemotron_h.py, with the config.json's numbers: h 2688, vocab
    # 131072 untied; hybrid_override_pattern has 23 "M", 6 "*", 23 "E".
    h, V = 2688, 131072
    H, G, d = 32, 2, 128  # NemotronHAttention: q, k, v, o, no bias
    attn = h * H * d + 2 * h * G * d + H * d * h
    heads, P, N, groups, k = 64, 64, 128, 8, 4  # NemotronHMamba2Mixer
    inner = heads * P  # mamba_num_heads x mamba_head_dim (expand is not read)
    conv_dim = inner + 2 * groups * N
    mamba = (
        h * (inner + conv_dim + heads)  # in_proj (use_bias false)
        + conv_dim * k
        + conv_dim  # depthwise conv1d weight + bias (use_conv_bias)
        + 3 * heads  # dt_bias, A_log, D
        + inner  # NemotronHRMSNormGated weight
        + inner * h  # out_proj
    )
    E, f, fs = 128, 1856, 3712  # NemotronHMoE: up / down experts, router, shared MLP
    moe = E * 2 * h * f + E * h + 2 * h * fs
    total = 6 * attn + 23 * mamba + 23 * moe + 52 * h + h + 2 * V * h  # block norms, norm_f
    spec = calc.load_preset("nemotron-3-nano-30b-a3b")
    assert calc.param_count(spec) == total == 31_577_937_344
    # a token uses 6 of the 128 routed experts
    assert calc.active_param_count(spec) == total - 23 * (E - 6) * 2 * h * f
    # KV: the 6 attention layers only, K and V of 2 heads x 128
    assert calc.kv_bytes_per_token(spec, "bf16") == 6 * 2 * G * d * 2
    # the e_score_correction_bias buffers (fp32, E per MoE block) are stored, not counted
    assert calc.weight_bytes(spec, "bf16") == 2 * total + 23 * E * 4


def test_engine_state_is_vllm_mamba2_state_shape():
    # vLLM 0.33.0 MambaStateShapeCalculator.mamba2_state_shape (tp 1): conv state
    # (intermediate + 2 x n_groups x state, conv_kernel - 1), temporal state (heads, head_dim,
    # state); dtypes (_mamba_state_dtype): conv in the cache dtype, the SSM state in
    # mamba_ssm_cache_dtype, which NemotronHForCausalLMConfig.update_mamba_ssm_cache_dtype
    # reads from the config (default float32); for Granite "auto" = the conv state's dtype.
    nano = calc.load_preset("nemotron-3-nano-30b-a3b")
    conv = (64 * 64 + 2 * 8 * 128) * 3
    ssm = 64 * 64 * 128
    assert calc.state_bytes_per_sequence(nano, "bf16") == 23 * (2 * conv + 4 * ssm)
    small = calc.load_preset("granite-4.0-h-small")
    conv = (128 * 64 + 2 * 1 * 128) * 3
    ssm = 128 * 64 * 128
    assert calc.state_bytes_per_sequence(small, "bf16") == 36 * 2 * (conv + ssm)
    # and the cache holds no tokens in them: one layer after 10 or 10^5 tokens is the same
    one, many = (calc.kv_cache_layer_bytes(small, n, 1, "bf16")[0] for n in (10, 100_000))
    assert one == many == 2 * (conv + ssm)


def test_mixer_less_blocks_cache_nothing_and_have_no_attention_flops():
    nano = calc.load_preset("nemotron-3-nano-30b-a3b")
    per_layer = calc.kv_cache_layer_bytes(nano, 4096, 1, "bf16")
    kinds = nano.attention_types
    assert {b for b, k in zip(per_layer, kinds, strict=True) if k == "none"} == {0}
    assert kinds.count("none") == 23 and nano.mlp_types.count("none") == 29
    # decode attention FLOPs: the 6 attention layers' 4 x H x d per key, plus the Mamba-2
    # layers' recurrent update (5 FLOPs a state element) and conv (2 x conv_dim x kernel)
    ctx = 1000
    want = 6 * 4 * 32 * 128 * ctx + 23 * (5 * 64 * 64 * 128 + 2 * (4096 + 2048) * 4)
    assert calc.attention_flops_decode(nano, ctx) == want


# --- against transformers on the meta device -----------------------------------------------


def _hf_model(d: dict, **kw):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    transformers.logging.set_verbosity_error()
    drop = ("architectures", "torch_dtype", "dtype")
    d = {k: v for k, v in d.items() if k not in drop}
    cfg = transformers.AutoConfig.for_model(d.pop("model_type"), **d)
    with torch.device("meta"):
        return transformers.AutoModelForCausalLM.from_config(cfg, **kw)


def test_granite_tiny_numel_on_meta():
    model = _hf_model(_load(TINY))
    numel = sum(p.numel() for p in model.parameters())
    assert calc.param_count(calc.from_hf_config(TINY)) == numel


SMALL_NEMOTRON = {  # every block kind, small; biases on to check they are honoured
    "model_type": "nemotron_h", "hidden_size": 64, "vocab_size": 100,
    "hybrid_override_pattern": "M*-EM", "num_attention_heads": 4, "num_key_value_heads": 2,
    "head_dim": 16, "intermediate_size": 96, "mamba_num_heads": 8, "mamba_head_dim": 16,
    "ssm_state_size": 8, "n_groups": 2, "conv_kernel": 3, "use_bias": True,
    "mamba_proj_bias": True, "mlp_bias": True, "n_routed_experts": 4, "num_experts_per_tok": 2,
    "moe_intermediate_size": 32, "moe_shared_expert_intermediate_size": 48,
    "use_conv_bias": False,
}  # fmt: skip
SMALL_GRANITE_DENSE = {  # granite-4.0-h-micro's shape of model: no experts, the shared MLP only
    "model_type": "granitemoehybrid", "hidden_size": 64, "vocab_size": 100,
    "num_hidden_layers": 3, "layer_types": ["mamba", "attention", "mamba"],
    "num_attention_heads": 4, "num_key_value_heads": 2, "num_local_experts": 0,
    "shared_intermediate_size": 80, "mamba_n_heads": 4, "mamba_d_state": 16,
    "mamba_n_groups": 2, "mamba_expand": 2, "attention_bias": True, "mamba_conv_bias": False,
    "mamba_proj_bias": True, "position_embedding_type": "rope",
}  # fmt: skip


@pytest.mark.parametrize("cfg", [SMALL_NEMOTRON, SMALL_GRANITE_DENSE], ids=["nemotron", "granite"])
def test_small_configs_numel_and_cache(cfg):
    torch = pytest.importorskip("torch")
    from test_reference_modern import _cache_layer_bytes

    model = _hf_model(cfg, dtype=torch.bfloat16)
    spec = calc.from_hf_config(cfg)
    assert calc.param_count(spec) == sum(p.numel() for p in model.parameters())
    with torch.device("meta"), torch.no_grad():
        ids = torch.zeros(2, 20, dtype=torch.long)
        cache = model(input_ids=ids, use_cache=True).past_key_values
    want = calc.kv_cache_layer_bytes(spec, 20, 2, "bf16", convention="transformers")
    assert _cache_layer_bytes(cache) == want


# --- refused by name ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"moe_latent_size": 512}, "moe_latent_size"),
        ({"num_nextn_predict_layers": 1}, "num_nextn_predict_layers"),
        ({"mamba_proj_bias": True}, "mamba_proj_bias"),
        ({"n_shared_experts": 2}, "n_shared_experts"),
        ({"num_hidden_layers": 51}, "num_hidden_layers"),
        ({"attention_bias": True}, "attention_bias"),
        ({"tie_word_embeddings": True}, "tie_word_embeddings"),  # transformers never ties
        ({"sliding_window": 4096}, "sliding_window"),
        ({"hybrid_override_pattern": "MEX"}, "hybrid_override_pattern"),
        ({"n_groups": 7}, "n_groups"),  # 64 heads do not split into 7 groups
    ],
)
def test_nemotron_refusals(change, field):
    with pytest.raises(ValueError, match=f"'{field}'"):
        calc.from_hf_config({**_load(NANO), **change})


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"mamba_d_head": 96}, "mamba_d_head"),  # 96 x 128 != 2 x 4096
        ({"num_local_experts": 1}, "num_local_experts"),
        ({"layer_types": ["mamba"] * 39}, "layer_types"),
        ({"position_embedding_type": "alibi"}, "position_embedding_type"),
    ],
)
def test_granite_refusals(change, field):
    with pytest.raises(ValueError, match=f"'{field}'"):
        calc.from_hf_config({**_load(SMALL), **change})


def test_spec_checks():
    base = dict(
        name="t", num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
        intermediate_size=96, vocab_size=100, layer_types=["mamba", "full_attention"],
        mamba_num_heads=8, mamba_head_dim=16, ssm_state_size=8, n_groups=2, conv_kernel=4,
    )  # fmt: skip
    ModelSpec(**base)
    with pytest.raises(ValueError, match="'conv_kernel' must be set"):
        ModelSpec(**{**base, "conv_kernel": None})
    with pytest.raises(ValueError, match="'n_groups' must divide mamba_num_heads=8: got 3"):
        ModelSpec(**{**base, "n_groups": 3})
    with pytest.raises(ValueError, match="neither a mixer nor an MLP"):
        ModelSpec(**{**base, "layer_types": ["mamba", "none"], "mlp_layer_types": ["none"] * 2})
    with pytest.raises(ValueError, match="'mamba_ssm_cache_dtype' must be a dtype"):
        ModelSpec(**{**base, "mamba_ssm_cache_dtype": "float33"})


# --- CLI ------------------------------------------------------------------------------------


def test_cli_show_and_kv(capsys):
    from calc import cli

    assert cli.main(["kv", "nemotron-3-nano-30b-a3b", "--seq", "131072"]) == 0
    out = capsys.readouterr().out
    assert "K+V per token, 6 attention layers" in out
    assert "23 Mamba-2 layers (constant state)" in out
    assert cli.main(["show", "granite-4.0-h-small"]) == 0
    out = capsys.readouterr().out
    assert "128 heads x 64, state 128, 1 groups, conv kernel 4" in out


# engine plans (vLLM MambaSpec groups, SGLang's mamba pool): tests/test_serving_mamba2.py
