"""ModelOpt FP8 / NVFP4 stored bytes (calc.weight_bytes) against totals written out here from
the configs' shapes and the tensors ModelOpt's export stores, as vLLM's loader expects them
(vllm 0.19.0 sdist, vllm/model_executor/layers/quantization/modelopt.py:
ModelOptFp8LinearMethod.create_weights and ModelOptNvFp4LinearMethod.create_weights; the
checkpoint keeps q / k / v and gate / up apart, one scale set per matrix).

No public start-up log or safetensors index total of a ModelOpt FP8 / NVFP4 checkpoint of an
architecture kvcalc reads was found (the logs found are of NemotronH hybrids, self-quantized or
unnamed checkpoints, or paraphrased): these tests check the layout against the loader's tensor
list written out below, not against a published checkpoint figure."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import calc
from calc.quant import parse_quantization_config

QUANT = Path(__file__).parent / "fixtures" / "quant_configs"

# meta-llama/Llama-3.1-70B-Instruct config.json (the preset): 80 layers, hidden 8192, MLP
# 28672, 64 query heads and 8 KV heads of 128, vocab 128256, untied, bf16
L, H, INTER, KV, V = 80, 8192, 28672, 8 * 128, 128256
# (out, in) of the seven matrices a layer stores: q, k, v, o, gate, up, down
MATS = [(H, H), (KV, H), (KV, H), (H, H), (INTER, H), (INTER, H), (H, INTER)]
BF16_REST = 2 * (2 * V * H + (2 * L + 1) * H)  # embedding, lm_head, 2 norms a layer + final


def _spec(preset: str, qc: dict):
    spec = calc.load_preset(preset)
    return spec.replace(quantization=parse_quantization_config(qc, dtype="bf16").model_dump())


def test_modelopt_fp8_llama_70b_stored_bytes():
    """nvidia/Llama-3.1-70B-Instruct-FP8 (hf_quant_config.json fixture: quant_algo FP8,
    kv_cache_quant_algo FP8, lm_head excluded). Per matrix: `weight` float8_e4m3fn [out, in],
    `weight_scale` and `input_scale` fp32 scalars; per layer `k_proj.k_scale` and
    `v_proj.v_scale` fp32 scalars (the FP8 KV cache's); the rest bf16."""
    qc = json.loads((QUANT / "llama-3.1-70b-instruct-fp8.hf_quant_config.json").read_text())
    spec = _spec("llama-3.1-70b", qc)
    per_layer = sum(o * i + 4 + 4 for o, i in MATS) + 2 * 4
    assert calc.weight_bytes(spec) == L * per_layer + BF16_REST == 72_656_376_832


def test_modelopt_nvfp4_llama_70b_stored_bytes():
    """A ModelOpt NVFP4 export of the same model (quant_algo NVFP4, group_size 16, lm_head
    excluded, no KV quantization; the shape of nvidia/Llama-3.3-70B-Instruct-FP4's config as
    ModelOpt writes it, not a copy of that file). Per matrix: `weight` uint8 [out, in / 2],
    `weight_scale` float8_e4m3fn [out, in / 16], `weight_scale_2` and `input_scale` fp32."""
    qc = {"quantization": {"quant_algo": "NVFP4", "group_size": 16, "exclude_modules": ["lm_head"]}}
    spec = _spec("llama-3.1-70b", qc)
    per_layer = sum(o * i // 2 + o * i // 16 + 4 + 4 for o, i in MATS)
    assert calc.weight_bytes(spec) == L * per_layer + BF16_REST


def test_modelopt_nvfp4_group_size_refused_when_input_not_multiple():
    """vLLM create_weights raises for in_features % 16 != 0; kvcalc names the field."""
    qc = {"quantization": {"quant_algo": "NVFP4", "group_size": 16, "exclude_modules": ["lm_head"]}}
    spec = _spec("llama-3.1-70b", qc).replace(intermediate_size=28664)  # down_proj in % 16 = 8
    with pytest.raises(ValueError, match="in_features"):
        calc.weight_bytes(spec)
