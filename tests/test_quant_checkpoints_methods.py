"""calc.weight_bytes against published quantized checkpoints, one method at a time (AWQ,
GPTQ, compressed-tensors): an index's `total_size` where one is public, else the per-dtype
element counts huggingface.js reads from the checkpoint's own safetensors headers. Each expected
value is also written out by hand from the writer library's tensor shapes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import calc
from calc.quant import parse_quantization_config

FIXTURES = Path(__file__).parent / "fixtures" / "checkpoints"

# huggingface.js packages/hub/src/lib/parse-safetensors-metadata.spec.ts: parameter counts by
# safetensors dtype, read from each checkpoint's shard headers at a pinned revision.
# HFJS at e2765e25 (2026-07-28) and de70b251 (2025-09-25), commits of
# https://github.com/huggingface/huggingface.js (mirror read 2026-11-23); the older counts skip
# GPTQ/AWQ qzeros, g_idx and scales by suffix, the newer skip every scale and index tensor.


def _load(name: str) -> tuple[dict, dict]:
    d = FIXTURES / name
    return json.loads((d / "config.json").read_text()), json.loads((d / "index.json").read_text())


def _awq(i: int, o: int, g: int = 128) -> int:
    """AutoAWQ WQLinear_GEMM: qweight int32 (in, out/8), qzeros int32 (in/g, out/8),
    scales fp16 (in/g, out); no bias on a Cohere linear."""
    return i * o // 2 + (i // g) * (o // 8) * 4 + (i // g) * o * 2


def test_awq_aya_23_35b_equals_its_index_total():
    """alegchenko/aya-23-35B-AWQ-ru-v0 (revision 714953f4): AutoAWQ GEMM, 4 bits, on Command R's
    architecture: 40 layers of hidden 8192, 64 x 128 query and KV heads, MLP 22528, one
    weight-only LayerNorm per (parallel) block, vocabulary 256000 tied to the LM head."""
    cfg, index = _load("aya-23-35b-awq-ru-v0")
    h, f, L, V = 8192, 22528, 40, 256000
    layer = 4 * _awq(h, h) + 2 * _awq(h, f) + _awq(f, h) + h * 2  # q k v o, gate up, down, norm
    written_out = L * layer + V * h * 2 + h * 2  # + fp16 embedding and final norm
    assert written_out == index["total_size"] == 21_278_900_224
    assert calc.weight_bytes(calc.from_hf_config(cfg)) == index["total_size"]


@pytest.mark.parametrize("group", [32, 64])
def test_awq_aya_other_group_sizes_do_not_match(group):
    """The fixture's config.json is rebuilt (the checkpoint's own is not public in the store):
    the group size it assumes, 128, is the only one of AutoAWQ's that reproduces the index."""
    cfg, index = _load("aya-23-35b-awq-ru-v0")
    cfg = {**cfg, "quantization_config": {**cfg["quantization_config"], "group_size": group}}
    got = calc.weight_bytes(calc.from_hf_config(cfg))
    h, f, L, V = 8192, 22528, 40, 256000
    layer = 4 * _awq(h, h, group) + 2 * _awq(h, f, group) + _awq(f, h, group) + h * 2
    assert got == L * layer + V * h * 2 + h * 2 != index["total_size"]


def _quantized(preset: str, qc: dict, dtype: str) -> dict[str, int]:
    q = parse_quantization_config(qc, dtype=dtype)
    spec = calc.load_preset(preset).replace(quantization=q.model_dump())
    return calc.weight_bytes_breakdown(spec)


def _part(parts: dict[str, int], suffix: str) -> int:
    return sum(v for k, v in parts.items() if k.endswith(f":{suffix}"))


def _base(parts: dict[str, int]) -> int:
    return sum(v for k, v in parts.items() if ":" not in k)


def test_compressed_tensors_w4a16_actorder_llama_3_3_70b_against_its_headers():
    """RedHatAI/Llama-3.3-70B-Instruct-quantized.w4a16 (revision 7177921d), pack-quantized int4
    with actorder "group" (HFJS at e2765e25): I32 68,451,041,280 weights (packed words x 8),
    6,225,920 weight_g_idx indices (one int32 per input column of each linear), weight_shape
    stored as I64, BF16 2,102,665,216 unquantized values (embedding, lm_head, norms). Llama 3.3
    70B: 80 layers of hidden 8192, 8 KV heads of 128, MLP 28672, vocabulary 128256."""
    h, kv, f, L, V = 8192, 1024, 28672, 80, 128256
    shapes = [(h, h), (h, kv), (h, kv), (h, h), (h, f), (h, f), (f, h)]  # (in, out)
    assert L * sum(i * o for i, o in shapes) == 68_451_041_280
    assert L * sum(i for i, _ in shapes) == 6_225_920
    assert 2 * V * h + (2 * L + 1) * h == 2_102_665_216
    parts = _quantized(
        "llama-3.1-70b",  # the 3.3 release keeps 3.1's architecture
        {"quant_method": "compressed-tensors", "format": "pack-quantized", "ignore": ["lm_head"],
         "config_groups": {"group_0": {"targets": ["Linear"], "weights": {
             "num_bits": 4, "type": "int", "symmetric": True, "strategy": "group",
             "group_size": 128, "actorder": "group"}}}},
        "bf16",
    )  # fmt: skip
    assert _part(parts, "packed") == 68_451_041_280 // 8 * 4
    assert _part(parts, "g_idx") == 6_225_920 * 4
    assert _part(parts, "meta") == L * len(shapes) * 2 * 8  # weight_shape: int64 (2,)
    assert _base(parts) == 2 * 2_102_665_216


def test_gptq_autogptq_llama_3_1_8b_stores_a_zero_bias_on_every_linear():
    """neuralmagic (RedHatAI)/Meta-Llama-3.1-8B-Instruct-quantized.w4a16 (revision 3921b6ae), an
    AutoGPTQ checkpoint (quantize_config.json, tagged gptq): HFJS at de70b251 counts I32
    6,979,321,856 (qweight words x 8; qzeros, g_idx and scales skipped by suffix) and F16
    1,052,315,648. The F16 values exceed the embedding, lm_head and norms by exactly one value
    per output feature of every block linear: AutoGPTQ's make_quant built every QuantLinear with
    bias=True (https://github.com/AutoGPTQ/AutoGPTQ/issues/601, fixed by PR #602 in no release),
    so the checkpoint holds a zero fp16 bias, which kvcalc counts for a config AutoGPTQ wrote
    (no `meta.quantizer`, no optimum keys)."""
    h, kv, f, L, V = 4096, 1024, 14336, 32, 128256
    shapes = [(h, h), (h, kv), (h, kv), (h, h), (h, f), (h, f), (f, h)]  # (in, out)
    assert L * sum(i * o for i, o in shapes) == 6_979_321_856
    bias = L * sum(o for _, o in shapes)
    assert 2 * V * h + (2 * L + 1) * h + bias == 1_052_315_648
    parts = _quantized(
        "llama-3.1-8b",
        {"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": True, "sym": True,
         "damp_percent": 0.1, "static_groups": False, "true_sequential": True,
         "model_name_or_path": None, "model_file_base_name": None},
        "fp16",
    )  # fmt: skip
    assert _part(parts, "packed") == 6_979_321_856 // 8 * 4
    assert _base(parts) + _part(parts, "bias") == 1_052_315_648 * 2


def test_compressed_tensors_int4_g32_kimi_k2_5_experts_against_its_headers():
    """moonshotai/Kimi-K2.5 (revision 2426b45b): pack-quantized int4, group 32, routed experts
    only (60 MoE layers x 384 experts x gate / up / down of 7168 x 2048). HFJS at 0b0fb12e counted
    I32 1,014,687,129,600 and BF16 43,902,267,888; at 6dda178f, which drops weight_scale and
    weight_shape, I32 1,014,686,023,680 and BF16 12,193,329,648. So: packed words x 8 =
    1,014,686,023,680; weight_scale = 31,708,938,240 bf16 values (out x in / 32); weight_shape =
    1,105,920 / 8 = 138,240 I32 values, two per expert matrix. The text model is Kimi K2's.

    Kimi's writer stores weight_shape as int32 (2,), where compressed-tensors' own
    pack_quantized compressor writes torch.tensor(shape), int64 (RedHatAI's Llama-3.3-70B above,
    I64): no config key tells them apart, so kvcalc's 16 bytes per matrix is 8 too many here."""
    E, L, h, m = 384, 60, 7168, 2048
    mats = L * E * 3
    assert mats * h * m == 1_014_686_023_680 == 1_014_687_129_600 - 1_105_920
    assert mats * h * m // 32 == 31_708_938_240 == 43_902_267_888 - 12_193_329_648
    assert mats * 2 == 1_105_920 // 8
    parts = _quantized(
        "kimi-k2",
        {"quant_method": "compressed-tensors", "format": "pack-quantized",
         "ignore": ["lm_head", "re:.*self_attn.*", "re:.*shared_experts.*",
                    "re:.*mlp\\.(gate|up|gate_up|down)_proj.*"],
         "config_groups": {"group_0": {"targets": ["Linear"], "weights": {
             "num_bits": 4, "type": "int", "symmetric": True, "strategy": "group",
             "group_size": 32}}}},
        "bf16",
    )  # fmt: skip
    assert _part(parts, "packed") == 1_014_686_023_680 // 8 * 4
    assert _part(parts, "scales") == 31_708_938_240 * 2
    assert _part(parts, "meta") - mats * 2 * 4 == mats * 8  # int64 counted, int32 stored
