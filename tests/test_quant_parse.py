"""calc.quant.parse: real quantization_configs read into QuantConfig; bad ones refused by name.

Configs come from tests/fixtures/checkpoints/*/config.json and tests/fixtures/quant_configs/
(sources in SOURCES.json and each index.json).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from calc.quant import parse_quantization_config

FIXTURES = Path(__file__).parent / "fixtures"


def checkpoint_config(name: str) -> dict:
    return json.loads((FIXTURES / "checkpoints" / name / "config.json").read_text())


def quant_config(name: str) -> dict:
    return json.loads((FIXTURES / "quant_configs" / name).read_text())


# --- real configs --------------------------------------------------------------------------------


def test_gpt_oss_mxfp4():
    cfg = checkpoint_config("gpt-oss-20b")
    q = parse_quantization_config(cfg["quantization_config"])  # no torch_dtype: bf16
    assert (q.method, q.scheme.layout, q.scheme.group_size, q.dtype) == (
        "mxfp4",
        "mxfp4",
        32,
        "bf16",
    )
    assert q.ignore == (
        "model.layers.*.self_attn",
        "model.layers.*.mlp.router",
        "model.embed_tokens",
        "lm_head",
    )


def test_bitsandbytes_nf4_with_explicit_skip_list():
    cfg = checkpoint_config("molmo-7b-d-bnb-nf4")
    q = parse_quantization_config(cfg["quantization_config"], dtype=cfg["torch_dtype"])
    s = q.scheme
    assert (s.layout, s.quant_type, s.double_quant, s.storage_dtype) == (
        "bnb-4bit",
        "nf4",
        False,
        "uint8",
    )
    assert q.dtype == "fp16"
    assert q.ignore == (
        "model.vision_backbone",
        "model.transformer.ff_out",
        "model.transformer.ln_f",
    )


def test_bitsandbytes_int8_default_skip_is_the_lm_head():
    cfg = checkpoint_config("llama-3.1-8b-networks-bnb-int8")
    q = parse_quantization_config(cfg["quantization_config"], dtype=cfg["torch_dtype"])
    assert (q.scheme.layout, q.ignore, q.dtype) == ("bnb-8bit", ("lm_head",), "fp32")


def test_deepseek_v3_fp8_blocks():
    q = parse_quantization_config(quant_config("deepseek-v3.config.json")["quantization_config"])
    s = q.scheme
    assert (s.layout, s.strategy, s.block_size, s.scale_dtype, s.input_scale) == (
        "fp8",
        "block",
        (128, 128),
        "fp32",
        None,
    )
    assert q.ignore == ("lm_head",)  # modules_to_not_convert absent: transformers' default


def test_qwen3_moe_fp8_lists_every_router():
    qc = quant_config("qwen3-30b-a3b-fp8.config.json")["quantization_config"]
    q = parse_quantization_config(qc)
    assert "model.layers.0.mlp.gate" in q.ignore and "lm_head" in q.ignore
    assert q.scheme.block_size == (128, 128)


def test_modelopt_nvfp4_and_fp8_hf_quant_configs():
    nv = parse_quantization_config(quant_config("qwen3-235b-a22b-nvfp4.hf_quant_config.json"))
    assert (nv.method, nv.scheme.layout, nv.scheme.group_size) == ("modelopt", "modelopt-nvfp4", 16)
    assert nv.kv_cache is not None and nv.kv_cache.layout == "modelopt"
    assert nv.ignore_style == "fnmatch" and "model.layers.0.mlp.gate" in nv.ignore
    f8 = parse_quantization_config(quant_config("llama-3.1-70b-instruct-fp8.hf_quant_config.json"))
    assert (f8.scheme.layout, f8.ignore) == ("modelopt-fp8", ("lm_head",))


def test_modelopt_config_in_config_json():
    qc = quant_config("gemma-4-31b-it-nvfp4.config.json")["quantization_config"]
    q = parse_quantization_config(qc)
    assert q.scheme.layout == "modelopt-nvfp4" and q.kv_cache is not None
    assert "lm_head" in q.ignore and q.ignore_style == "fnmatch"


def test_compressed_tensors_pack_quantized_int4():
    qc = quant_config("kimi-k2.5.config.json")["text_config"]["quantization_config"]
    q = parse_quantization_config(qc)
    s = q.scheme
    assert (q.method, q.format, s.layout, s.bits, s.group_size, s.symmetric) == (
        "compressed-tensors",
        "pack-quantized",
        "ct-pack",
        4,
        32,
        True,
    )
    assert "re:.*self_attn.*" in q.ignore and q.kv_cache is None


def test_compressed_tensors_w8a8_static_and_fp8_dynamic():
    # the shapes of RedHatAI's w8a8 and FP8-dynamic configs (compressed-tensors QuantizationArgs)
    w8a8 = {
        "quant_method": "compressed-tensors",
        "format": "int-quantized",
        "config_groups": {
            "group_0": {
                "targets": ["Linear"],
                "weights": {"num_bits": 8, "type": "int", "symmetric": True, "strategy": "channel"},
                "input_activations": {
                    "num_bits": 8,
                    "type": "int",
                    "symmetric": False,
                    "strategy": "tensor",
                    "dynamic": False,
                },
            }
        },
        "ignore": ["lm_head"],
        "kv_cache_scheme": {"num_bits": 8, "type": "float", "strategy": "tensor", "dynamic": False},
    }
    q = parse_quantization_config(w8a8, dtype="bfloat16")
    s = q.scheme
    assert (s.layout, s.strategy, s.scale_dtype, s.input_scale, s.input_symmetric) == (
        "ct-int",
        "channel",
        "bf16",
        "tensor",
        False,
    )
    assert q.kv_cache.strategy == "tensor" and q.kv_cache.scale_dtype == "bf16"
    fp8 = {**w8a8, "format": "float-quantized"}
    fp8["config_groups"] = {
        "g": {
            "targets": ["Linear"],
            "weights": {"num_bits": 8, "type": "float", "strategy": "channel"},
            "input_activations": {
                "num_bits": 8,
                "type": "float",
                "strategy": "token",
                "dynamic": True,
            },
        }
    }
    d = parse_quantization_config(fp8).scheme
    assert (d.layout, d.input_scale) == ("ct-float", None)  # dynamic activations store nothing


def test_gptq_and_awq_fields():
    g = parse_quantization_config(
        {"quant_method": "gptq", "bits": 4, "group_size": -1, "desc_act": True, "lm_head": True},
        dtype="float16",
    )
    assert (g.scheme.group_size, g.scheme.act_order, g.quantize_lm_head, g.scheme.scale_dtype) == (
        None,
        True,
        True,
        "fp16",
    )
    a = parse_quantization_config(
        {"quant_method": "awq", "w_bit": 4, "q_group_size": 64, "version": "GEMV"}
    )
    assert (a.scheme.layout, a.scheme.group_size, a.ignore_style) == ("awq-gemv", 64, "substring")


# --- refusals ------------------------------------------------------------------------------------

BAD = [
    ({"quant_method": "hqq"}, "'quant_method' must be one of gptq, awq"),
    ({"bits": 4}, "'quant_method' must be one of"),
    ({"quant_method": "awq", "bits": 3}, "'bits' must be one of 4: got 3"),
    ({"quant_method": "gptq", "bits": 5}, "'bits' must be one of 2, 3, 4, 8: got 5"),
    (
        {"quant_method": "gptq", "bits": 4, "group_size": 0},
        "'group_size' must be a positive integer or -1",
    ),
    (
        {"quant_method": "gptq", "bits": 4, "checkpoint_format": "marlin"},
        "'checkpoint_format' must be 'gptq'",
    ),
    ({"quant_method": "gptq", "bits": 4, "desc_act": "yes"}, "'desc_act' must be true or false"),
    ({"quant_method": "gptq", "bits": 4, "meta": "gptqmodel"}, "'meta' must be a JSON object"),
    (
        {"quant_method": "gptq", "bits": 4, "meta": {"quantizer": 2}},
        "'meta' 'quantizer' must be a string or a list of strings: got 2",
    ),
    ({"quant_method": "awq", "bits": 4, "zero_point": False}, "'zero_point' must be true"),
    (
        {"quant_method": "awq", "bits": 4, "version": "marlin"},
        "'version' must be one of gemm, gemv",
    ),
    ({"quant_method": "bitsandbytes"}, "'load_in_4bit' must be true for exactly one"),
    (
        {"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "int4"},
        "'bnb_4bit_quant_type' must be one of nf4, fp4",
    ),
    (
        {"quant_method": "fp8", "weight_block_size": [128]},
        "'weight_block_size' must be two positive integers",
    ),
    (
        {"quant_method": "fp8", "modules_to_convert": ["embed_tokens"]},
        "'modules_to_convert' must be empty",
    ),
    ({"quant_method": "fp8", "expert_dtype": "fp6"}, "'expert_dtype' must be one of fp8, fp4"),
    (
        {"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION"},
        "'quant_algo' must be one of fp8, nvfp4",
    ),
    (
        {"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 32},
        "'group_size' must be one of 16",
    ),
    ({"quant_method": "compressed-tensors"}, "'config_groups' must map group names"),
    (
        {
            "quant_method": "compressed-tensors",
            "format": "marlin-24",
            "config_groups": {"g": {"weights": {"num_bits": 4}}},
        },
        "'format' must be one of pack-quantized",
    ),
    (
        {
            "quant_method": "compressed-tensors",
            "format": "nvfp4-pack-quantized",
            "config_groups": {
                "g": {
                    "weights": {
                        "num_bits": 8,
                        "type": "float",
                        "strategy": "tensor_group",
                        "group_size": 16,
                    }
                }
            },
        },
        "'config_groups.g.weights.num_bits' must be 4 for nvfp4-pack-quantized",
    ),
    (
        {
            "quant_method": "compressed-tensors",
            "format": "pack-quantized",
            "config_groups": {"g": {"weights": {"num_bits": 4, "strategy": "group"}}},
        },
        "'config_groups.g.weights.group_size' must be a positive integer for group",
    ),
    (
        {
            "quant_method": "compressed-tensors",
            "format": "pack-quantized",
            "sparsity_config": {"format": "sparse-24-bitmask"},
            "config_groups": {"g": {"weights": {"num_bits": 4}}},
        },
        "'sparsity_config' must be empty",
    ),
]


@pytest.mark.parametrize(("qc", "message"), BAD)
def test_bad_configs_name_the_field(qc, message):
    with pytest.raises(ValueError, match=message):
        parse_quantization_config(qc, origin="config.json")


def test_bad_dtype_and_non_object():
    with pytest.raises(ValueError, match="'torch_dtype' must be a dtype"):
        parse_quantization_config({"quant_method": "mxfp4"}, dtype="int3")
    with pytest.raises(ValueError, match="quantization_config: must be a JSON object: got list"):
        parse_quantization_config([])
