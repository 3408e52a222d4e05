"""DeepSeek-V4's stored bytes (calc.weight_bytes, calc/quant/weights_v4.py) against its
checkpoint's index: tests/fixtures/deepseek_v4/flash_index_facts.toml (total_size, the routed
experts' bytes, per-dtype counts and some tensors' dtypes and shapes, with their sources)."""

from __future__ import annotations

import json
import tomllib
from math import ceil, prod
from pathlib import Path

import pytest

import calc
from calc.hf import from_hf_config
from calc.presets import load_preset

FIX = Path(__file__).parent / "fixtures"
FACTS = tomllib.loads((FIX / "deepseek_v4" / "flash_index_facts.toml").read_text())
CONFIG = FIX / "hf" / "modern" / "deepseek-v4-flash.json"
BYTES = {"BF16": 2, "F32": 4, "F8_E4M3": 1, "F8_E8M0": 1, "I64": 8, "I8": 1}


def tensor_bytes(name: str) -> int:
    dtype, shape = FACTS["tensors"][name]
    return BYTES[dtype] * prod(shape)


@pytest.fixture(scope="module")
def flash():
    return load_preset("deepseek-v4-flash")


def test_total_is_the_index_total_size(flash):
    assert calc.weight_bytes(flash) == FACTS["index"]["total_size"]


def test_the_config_json_reads_to_the_same_total():
    # config.json's top-level expert_dtype is folded into quantization_config as
    # DeepseekV4Config.__post_init__ does; num_hash_layers (3) is kept
    spec = from_hf_config(CONFIG)
    assert spec.quantization.expert_dtype == "fp4" and spec.num_hash_layers == 3
    assert calc.weight_bytes(spec) == FACTS["index"]["total_size"]


def test_routed_experts_and_the_rest_match_the_index(flash):
    b = calc.weight_bytes_breakdown(flash)
    L = flash.num_hidden_layers
    experts = b["mlp:packed"] + b["mlp:scales"]  # the 43 decoder layers'; the MTP block has
    assert experts * (L + 1) // L == FACTS["index"]["routed_expert_bytes"]  # one more set
    # one expert's w1, from its tensors: I8 [2048, 2048] + F8_E8M0 [2048, 128]
    w1 = tensor_bytes("layers.0.ffn.experts.0.w1.weight") + tensor_bytes(
        "layers.0.ffn.experts.0.w1.scale"
    )
    E = flash.num_local_experts
    assert experts == L * E * 3 * w1  # w1 and w3 (2048 x 4096), w2 (4096 x 2048): same bytes


def test_labels_match_the_published_tensors(flash):
    b = calc.weight_bytes_breakdown(flash)
    L, H = flash.num_hidden_layers, flash.num_attention_heads
    t = tensor_bytes
    assert b["embed"] == t("embed.weight") and b["lm_head"] == t("head.weight")
    # tid2eid, I64 [vocab, top-k], in the three hash-routed layers; I64 = 3 tensors
    assert b["router:tid2eid"] == FACTS["dtype_counts"]["I64"] * t("layers.0.ffn.gate.tid2eid")
    # the 40 scored layers' fp32 bias (the MTP block's is under "mtp:fp32")
    assert b["router:fp32"] == (L - 3) * t("layers.3.ffn.gate.bias")
    # wq_a's F8_E8M0 block scales [8, 32]: 128 x 128 blocks of [1024, 4096]
    assert FACTS["tensors"]["layers.0.attn.wq_a.scale"][1] == [ceil(1024 / 128), 4096 // 128]
    assert b["attn/sinks:fp32"] == L * H * 4  # attn_sink [64] fp32 (not in the facts' list)
    n_csa = flash.attention_counts["compressed_sparse_attention"]
    n_hca = flash.attention_counts["heavily_compressed_attention"]
    ape = n_csa * t("layers.2.attn.compressor.ape") + n_hca * t("layers.3.attn.compressor.ape")
    assert b["attn/compressor:fp32"] == ape
    indexer_wq_b = FACTS["tensors"]["layers.2.attn.indexer.wq_b.weight"][1]
    assert b["attn/indexer:packed"] == n_csa * prod(indexer_wq_b)


def test_non_expert_bytes_and_dtype_counts_close(flash):
    # total - routed experts = the non-expert bytes of the index (its own subtraction)
    b = calc.weight_bytes_breakdown(flash)
    L = flash.num_hidden_layers
    experts = (b["mlp:packed"] + b["mlp:scales"]) * (L + 1) // L
    assert calc.weight_bytes(flash) - experts == FACTS["index"]["non_expert_bytes"]
    # F8_E8M0 scales = one per fp8 matrix (375) + one per routed expert matrix (I8: 33,792)
    c = FACTS["dtype_counts"]
    assert c["F8_E8M0"] == c["F8_E4M3"] + c["I8"] == 375 + (L + 1) * 256 * 3


def test_fp8_experts_and_bf16_base_follow_the_config(flash):
    # expert_dtype fp8: the experts in 128 x 128 blocks like the other fp8 matrices
    q = flash.quantization.model_copy(update={"expert_dtype": "fp8"})
    b = calc.weight_bytes_breakdown(flash.replace(quantization=q))
    L, E = flash.num_hidden_layers, flash.num_local_experts
    one = 2048 * 4096 + ceil(2048 / 128) * ceil(4096 / 128)  # w1 (or w3, or w2 transposed)
    assert b["mlp:packed"] + b["mlp:scales"] == L * E * 3 * one
    # a float32 base dtype doubles the base-dtype tensors only
    b16 = calc.weight_bytes_breakdown(flash)
    b32 = calc.weight_bytes_breakdown(flash, "float32")
    assert b32["embed"] == 2 * b16["embed"] and b32["hc:fp32"] == b16["hc:fp32"]


def test_refusals_name_the_field(flash):
    q = flash.quantization
    with pytest.raises(ValueError, match="'modules_to_not_convert' must be empty"):
        calc.weight_bytes(flash.replace(quantization=q.model_copy(update={"ignore": ("x",)})))
    with pytest.raises(ValueError, match="'num_hash_layers' must be set"):
        calc.weight_bytes(flash.replace(num_hash_layers=None))
    cfg = json.loads(CONFIG.read_text())
    with pytest.raises(ValueError, match="'compress_ratios' must end with 0"):
        from_hf_config({**cfg, "compress_ratios": cfg["compress_ratios"][:-1] + [4]})
    with pytest.raises(ValueError, match="'mlp_layer_types' must list the hash_moe"):
        from_hf_config({**cfg, "mlp_layer_types": ["moe", "hash_moe"] + ["moe"] * 41})
    with pytest.raises(ValueError, match="'compress_rope_theta' must differ from rope_theta"):
        from_hf_config({**cfg, "compress_rope_theta": cfg["rope_theta"]})
    # fp4 experts are read for V4 only
    other = load_preset("deepseek-v3")
    fp4 = other.quantization.model_copy(update={"expert_dtype": "fp4"})
    with pytest.raises(ValueError, match="'expert_dtype' must be fp8 outside DeepSeek-V4"):
        calc.weight_bytes(other.replace(quantization=fp4))


def test_v4_pro_matches_its_index_and_byte_groups():
    # tests/fixtures/deepseek_v4/pro_index_facts.toml: total_size and the MTP / base / tid2eid
    # groups of deepseek-ai/DeepSeek-V4-Pro, read with the Pro config fixture
    pro = tomllib.loads((FIX / "deepseek_v4" / "pro_index_facts.toml").read_text())["index"]
    spec = from_hf_config(
        json.loads((FIX / "deepseek_v4" / "DeepSeek-V4-Pro.config.json").read_text())
    )
    b = calc.weight_bytes_breakdown(spec)
    mtp = sum(v for k, v in b.items() if k.split(":")[0] == "mtp")
    assert calc.weight_bytes(spec) == pro["total_size"]
    assert mtp == pro["mtp_total_bytes"]
    assert calc.weight_bytes(spec) - mtp == pro["base_total_bytes"]
    assert b["router:tid2eid"] == pro["base_hash_table_bytes"]
