"""calc.weight_bytes / weight_bytes_breakdown for quantized specs, against totals written out from
the configs' shapes and the layouts' tensors (calc/quant/layout.py cites the libraries)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import calc
from calc.quant import parse_quantization_config

QUANT = Path(__file__).parent / "fixtures" / "quant_configs"


def with_quant(spec, qc: dict, dtype: str = "bf16"):
    return spec.replace(quantization=parse_quantization_config(qc, dtype=dtype).model_dump())


def test_unquantized_is_params_times_dtype():
    spec = calc.load_preset("llama-3-8b")
    assert calc.weight_bytes(spec) == 2 * calc.param_count(spec)
    assert calc.weight_bytes(spec, dtype="float32") == 4 * calc.param_count(spec)


def test_qwen3_moe_fp8_blocks_with_every_router_listed():
    """Qwen/Qwen3-30B-A3B-FP8: 48 layers, hidden 2048, 32 x 128 query heads, 4 KV heads, 128
    experts of 768, vocab 151936, untied. modules_to_not_convert lists each layer's mlp.gate
    (and norms), so the routers stay bf16; every other matrix is fp8 with fp32 128x128 block
    scales; q_norm / k_norm (128 each) are bf16."""
    cfg = json.loads((QUANT / "qwen3-30b-a3b-fp8.config.json").read_text())
    spec = calc.from_hf_config(cfg)
    h, L, E, f, V = 2048, 48, 128, 768, 151936

    def fp8(out, inp):  # weight + ceil(out/128) x ceil(in/128) fp32 scales
        return out * inp + -(-out // 128) * -(-inp // 128) * 4

    attn = fp8(4096, h) + 2 * fp8(512, h) + fp8(h, 4096)
    experts = E * (2 * fp8(f, h) + fp8(h, f))
    bf16 = 2 * (E * h + 2 * h + 2 * 128)  # router, 2 norms, q_norm, k_norm
    total = L * (attn + experts + bf16) + 2 * (2 * V * h + h)
    assert calc.weight_bytes(spec) == total
    parts = calc.weight_bytes_breakdown(spec)
    assert parts["router"] == L * E * h * 2 and "router:packed" not in parts
    assert parts["mlp:scales"] == L * E * (2 * 6 * 16 + 16 * 6) * 4


GPTQMODEL_META = {
    "quantizer": ["gptqmodel:2.2.0"],
    "uri": "https://github.com/modelcloud/gptqmodel",
}


@pytest.mark.parametrize(
    ("extra", "zero_bias"),
    [
        ({"meta": GPTQMODEL_META}, False),  # GPTQModel: a bias only where the layer has one
        ({"dataset": "c4", "model_seqlen": 2048, "use_exllama": True}, False),  # optimum
        ({"damp_percent": 0.1, "static_groups": False, "model_file_base_name": "model"}, True),
    ],
    ids=["gptqmodel", "optimum", "autogptq"],
)
def test_gptq_llama_written_out(extra, zero_bias):
    """Llama-3-8B shapes, GPTQ 4-bit g128 with desc_act, fp16: every block projection packed,
    embeddings, LM head and norms fp16. AutoGPTQ's quantize_config (no `meta`, no optimum keys)
    adds an fp16 zero bias (out,) to every QuantLinear (auto_gptq make_quant, bias=True)."""
    spec = with_quant(
        calc.load_preset("llama-3-8b"),
        {"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": True, **extra},
        dtype="float16",
    )
    h, f, kv, V, L = 4096, 14336, 1024, 128256, 32

    def gptq(out, inp):
        g = inp // 128
        bias = out * 2 if zero_bias else 0
        return inp // 8 * out * 4 + g * out // 8 * 4 + g * out * 2 + inp * 4 + bias

    layer = gptq(h, h) + 2 * gptq(kv, h) + gptq(h, h) + 2 * gptq(f, h) + gptq(h, f) + 2 * h * 2
    assert calc.weight_bytes(spec) == L * layer + 2 * V * h * 2 + h * 2
    parts = calc.weight_bytes_breakdown(spec)
    assert sum(parts.values()) == calc.weight_bytes(spec)
    assert parts["mlp:g_idx"] == L * (2 * h + f) * 4


def test_compressed_tensors_w4a16_ignoring_lm_head():
    spec = with_quant(
        calc.load_preset("llama-3-8b"),
        {
            "quant_method": "compressed-tensors",
            "format": "pack-quantized",
            "config_groups": {
                "g": {"targets": ["Linear"], "weights": {"num_bits": 4, "group_size": 128}}
            },
            "ignore": ["lm_head"],
        },
    )
    h, f, kv, V, L = 4096, 14336, 1024, 128256, 32

    def w4(out, inp):  # weight_packed int32, weight_scale bf16 per group, weight_shape int64[2]
        return out * inp // 8 * 4 + out * inp // 128 * 2 + 16

    layer = 2 * w4(h, h) + 2 * w4(kv, h) + 2 * w4(f, h) + w4(h, f) + 2 * h * 2
    assert calc.weight_bytes(spec) == L * layer + 2 * V * h * 2 + h * 2


def test_modelopt_fp8_kv_scales_counted():
    spec = with_quant(
        calc.load_preset("llama-3-8b"),
        {
            "quant_method": "modelopt",
            "quant_algo": "FP8",
            "kv_cache_quant_algo": "FP8",
            "exclude_modules": ["lm_head"],
        },
    )
    parts = calc.weight_bytes_breakdown(spec)
    assert parts["kv_scales"] == 32 * 2 * 4  # k_scale, v_scale fp32 per layer
    assert parts["attn/q:scales"] == 32 * 4 and parts["attn/q:act_scales"] == 32 * 4


def test_mixtral_awq_router_skipped_by_name_experts_kept():
    """AutoAWQ matches modules_to_not_convert as substrings of transformers 4.x names:
    "gate" skips block_sparse_moe.gate but not the experts' w1 / w2 / w3."""
    spec = with_quant(
        calc.load_preset("mixtral-8x7b"),
        {"quant_method": "awq", "bits": 4, "group_size": 128, "modules_to_not_convert": ["gate"]},
        dtype="float16",
    )
    parts = calc.weight_bytes_breakdown(spec)
    assert parts["router"] == 32 * 8 * 4096 * 2
    assert parts["mlp"] == 0 and parts["mlp:packed"] == 32 * 8 * 3 * 4096 * 14336 // 2


def test_quantized_layout_refusals_reach_weight_bytes():
    spec = with_quant(
        calc.load_preset("llama-3-8b"), {"quant_method": "gptq", "bits": 4, "group_size": 96}
    )
    with pytest.raises(ValueError, match="'group_size' must divide in_features=4096"):
        calc.weight_bytes(spec)


def test_fused_matrices_leave_each_part_in_its_own_component():
    """Llama-3-8B shapes stored as Phi-3 stores them (one qkv_proj, one gate_up_proj), AWQ with
    qkv_proj left in fp16: q (4096 x 4096) and k, v (2 x 1024 x 4096) over 32 layers stay under
    attn/q and attn/kv, no component goes negative, and TP 2 halves both."""
    from calc.quant.sharding import stored_bytes_per_gpu

    spec = with_quant(
        calc.load_preset("llama-3-8b").replace(fused_qkv=True, fused_gate_up=True),
        {
            "quant_method": "awq",
            "bits": 4,
            "group_size": 128,
            "modules_to_not_convert": ["qkv_proj"],
        },
        dtype="float16",
    )
    parts = calc.weight_bytes_breakdown(spec)
    assert min(parts.values()) >= 0
    assert parts["attn/q"] == 32 * 4096 * 4096 * 2
    assert parts["attn/kv"] == 32 * 2 * 1024 * 4096 * 2
    per_gpu = stored_bytes_per_gpu(spec, tp=2)
    assert min(per_gpu.values()) >= 0
    assert (per_gpu["attn/q"], per_gpu["attn/kv"]) == (parts["attn/q"] // 2, parts["attn/kv"] // 2)
