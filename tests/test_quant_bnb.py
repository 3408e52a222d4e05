"""bitsandbytes 4-bit checkpoints: every tensor a Linear4bit saves, against public checkpoints.

What bitsandbytes (commit 95f9af309d4d5793847169c39288dcd3fcbdf564) writes per quantized
Linear, read from its source (nn/modules.py Linear4bit._save_to_state_dict, functional.py
quantize_4bit and QuantState.as_dict(packed=True), utils.pack_dict_to_tensor, _ops.py):
  weight            uint8 ((n + 1) // 2, 1)  n = out x in, two 4-bit codes a byte
  weight.absmax     float32 (ceil(n / 64),)  one per 64-value block (blocksize default 64);
                    double quant: uint8 codes of quantize_blockwise(absmax - offset, 256)
  weight.nested_absmax      float32 (ceil(blocks / 256),)   double quant only
  weight.nested_quant_map   float32 (256,)                   double quant only
  weight.quant_map          float32 (16,)
  weight.quant_state.bitsandbytes__nf4  uint8: the UTF-8 bytes of json.dumps of quant_type,
                    blocksize, dtype, shape (+ nested_blocksize, nested_dtype, nested_offset)
Every expected value below is written out from that list and the checkpoints' configs.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import calc
from calc.quant import QuantScheme, linear_bytes, parse_quantization_config
from calc.quant.layout import bnb_quant_state_json

FIX = Path(__file__).parent / "fixtures" / "checkpoints"


def _json_bytes(out: int, inp: int, dtype: str) -> int:
    """The packed quant_state of an nf4 weight without double quant, written out as
    bitsandbytes' json.dumps writes it (default separators ", " and ": ")."""
    text = f'{{"quant_type": "nf4", "blocksize": 64, "dtype": "{dtype}", "shape": [{out}, {inp}]}}'
    return len(text)


def nf4_bytes(out: int, inp: int, dtype: str = "float16") -> int:
    """One nf4 Linear without double quant: packed + absmax + quant_map + quant_state."""
    n = out * inp
    return n // 2 + -(-n // 64) * 4 + 16 * 4 + _json_bytes(out, inp, dtype)


# --- the quant_state JSON ----------------------------------------------------------------------


def test_quant_state_json_is_what_bitsandbytes_packs():
    s = QuantScheme(layout="bnb-4bit", bits=4, group_size=64, quant_type="nf4")
    assert bnb_quant_state_json(s, 37888, 3584, "fp16") == (
        '{"quant_type": "nf4", "blocksize": 64, "dtype": "float16", "shape": [37888, 3584]}'
    )
    dq = s.model_copy(update={"double_quant": True, "quant_type": "fp4"})
    assert bnb_quant_state_json(dq, 1024, 4096, "bf16") == (
        '{"quant_type": "fp4", "blocksize": 64, "dtype": "bfloat16", "shape": [1024, 4096], '
        '"nested_blocksize": 256, "nested_dtype": "float32", "nested_offset": 0.0}'
    )


def test_quant_storage_bf16_halves_the_number_of_packed_elements():
    # _ops.py quantize_4bit: out ((n + 1) // (quant_storage.itemsize * 2), 1): 4 codes per bf16
    s = QuantScheme(
        layout="bnb-4bit", bits=4, group_size=64, quant_type="nf4", storage_dtype="bf16"
    )
    b = linear_bytes(s, 4096, 14336, dtype="bf16")
    assert b.packed == (4096 * 14336 + 1) // 4 * 2
    assert b.scales == 4096 * 14336 // 64 * 4


def test_unsupported_base_dtype_and_storage_are_refused_by_name():
    qc = {"quant_method": "bitsandbytes", "load_in_4bit": True}
    with pytest.raises(ValueError, match="'torch_dtype' must be float16, bfloat16 or float32"):
        parse_quantization_config(qc, dtype="int8")
    with pytest.raises(ValueError, match="'bnb_4bit_quant_storage' must be a dtype"):
        parse_quantization_config(qc | {"bnb_4bit_quant_storage": "float4"}, dtype="bf16")


# --- Molmo-7B-D nf4 (no double quant): the index total, to the byte -----------------------------

# reubzdubz/Molmo7B_D_NF4Quant (commit edf464b955f389104b80bd57a9ecf52ce5530552): config.json
# (fixture) and modeling_molmo.py. MolmoForCausalLM builds FullMolmoConfig with
# additional_vocab_size=128, vit_layers=[-2, -9], image_pooling_2d="attention-meanq",
# image_padding_embed="pad_and_partial_pad", image_projector "mlp", and a VisionBackboneConfig of
# 23 layers, emb 1024, 16 heads of 64, MLP 4096, 14 x 14 patches, 577 positions. The language
# blocks: att_proj Linear(d, d + 2 x kv x 128, bias=qkv_bias), attn_out Linear(d, d),
# ff_proj Linear(d, intermediate_size) (gate and up fused), ff_out Linear(intermediate / 2, d);
# llm_int8_skip_modules keeps the vision backbone, the LM head (transformer.ff_out) and ln_f in
# torch_dtype float16.
MOLMO = "molmo-7b-d-bnb-nf4"


def _molmo_vision_fp16_values(cfg: dict) -> int:
    """Values of what kvcalc does not model: the vision backbone (modeling_molmo.py) and the
    128 extra token embeddings (Embedding.new_embedding)."""
    d, mlp, layers, pos, patch = 1024, 4096, 23, 577, 14
    vit_layer = (
        4 * (d * d + d) + (d * mlp + mlp) + (mlp * d + d) + 2 * 2 * d
    )  # wq wk wv wo, w1 w2, 2 LN
    vit = (
        d + pos * d + patch * patch * 3 * d + 2 * d + layers * vit_layer
    )  # class, pos, patch, pre_ln
    pool = 3 * (2 * d * d + d) + (d * d + d)  # wq wk wv read 2 ViT layers (2048), wo
    proj = (
        2 * d * (cfg["intermediate_size"] // 2) + cfg["intermediate_size"] // 2 * cfg["hidden_size"]
    )
    pad = 2 * 2 * d  # pad_embed (2, 2048)
    return vit + pool + proj + pad + 128 * cfg["hidden_size"]


def test_molmo_nf4_total_written_out():
    cfg = json.loads((FIX / MOLMO / "config.json").read_text())
    index = json.loads((FIX / MOLMO / "index.json").read_text())
    h, L, V, inter = 3584, 28, 152064, 37888
    assert (cfg["hidden_size"], cfg["num_hidden_layers"], cfg["embedding_size"]) == (h, L, V)
    qkv = h + 2 * 4 * 128
    assert (_json_bytes(qkv, h, "float16"), _json_bytes(inter, h, "float16")) == (81, 82)
    block_nf4 = nf4_bytes(qkv, h) + nf4_bytes(h, h) + nf4_bytes(inter, h) + nf4_bytes(h, inter // 2)
    block_fp16 = qkv + 2 * h  # att_proj bias, attn_norm, ff_norm
    lang_fp16 = L * block_fp16 + V * h + V * h + h  # wte.embedding, ff_out (LM head), ln_f
    total = L * block_nf4 + 2 * (lang_fp16 + _molmo_vision_fp16_values(cfg))
    assert total == index["total_size"] == 6_661_964_712


def test_molmo_language_part_through_kvcalc():
    """The same language model as a kvcalc spec (Molmo is no model_type kvcalc reads): Qwen2-7B's
    shape with fused qkv and gate/up; the skip list's transformer.ff_out is kvcalc's lm_head.
    kvcalc's bytes plus the vision backbone (fp16, written out above) equal the index total."""
    cfg = json.loads((FIX / MOLMO / "config.json").read_text())
    index = json.loads((FIX / MOLMO / "index.json").read_text())
    q = parse_quantization_config(cfg["quantization_config"], dtype=cfg["torch_dtype"])
    spec = calc.ModelSpec(
        name="molmo-7b-d-language",
        num_hidden_layers=cfg["num_hidden_layers"],
        hidden_size=cfg["hidden_size"],
        num_attention_heads=cfg["num_attention_heads"],
        num_key_value_heads=cfg["num_key_value_heads"],
        intermediate_size=cfg["intermediate_size"] // 2,  # ff_proj holds gate and up
        vocab_size=cfg["embedding_size"],
        qkv_bias=cfg["qkv_bias"],
        tie_word_embeddings=cfg["weight_tying"],
        fused_qkv=True,
        fused_gate_up=True,
        quantization=q.model_copy(update={"ignore": ("lm_head",)}),
    )
    vision = 2 * _molmo_vision_fp16_values(cfg)
    assert calc.weight_bytes(spec) + vision == index["total_size"]
    parts = calc.weight_bytes_breakdown(spec)
    h, inter = 3584, 37888
    assert parts["mlp:packed"] == 28 * (inter * h // 2 + h * inter // 2 // 2)
    assert parts["mlp:scales"] == 28 * (inter * h // 64 + h * inter // 2 // 64) * 4
    assert parts["mlp:meta"] == 28 * (2 * 16 * 4 + 82 + 82)  # quant_maps + JSON of ff_proj / ff_out


# --- unsloth Llama-3.1-8B nf4 with double quant: the Hub's counts --------------------------------

# huggingface.js commit e2765e25c (packages/hub/src/lib/parse-safetensors-metadata.spec.ts and
# the commit message): unsloth/Meta-Llama-3.1-8B-Instruct-bnb-4bit (revision f15c379f) counts
# BF16 1,050,939,392 values and U8 3,489,660,928 packed bytes (x 2) once the bookkeeping is
# excluded; before that commit the Hub counted 8,248,929,342: every U8 tensor (packed weight,
# uint8 absmax, quant_state JSON) x 2 and every F32 one (nested_absmax, quant_map,
# nested_quant_map) x 1 (the parent commit's getQuantizationMultiplier / shouldSkipTensor).
BF16, PACKED, BEFORE = 1_050_939_392, 3_489_660_928, 8_248_929_342


def test_unsloth_llama_double_quant_against_the_hub_counts():
    h, f, kv, L = 4096, 14336, 1024, 32
    shapes = [(h, h), (kv, h), (kv, h), (h, h), (f, h), (f, h), (h, f)] * L
    assert sum(o * i for o, i in shapes) // 2 == PACKED
    absmax = sum(o * i // 64 for o, i in shapes)  # uint8, one per 64 values
    nested = sum(o * i // 64 // 256 for o, i in shapes)  # float32, one per 256 blocks
    f32 = nested + len(shapes) * (16 + 256)  # + quant_map + nested_quant_map
    json_total = (BEFORE - BF16 - f32) // 2 - PACKED - absmax
    assert (BEFORE - BF16 - f32) % 2 == 0
    # the JSON without the nested_offset value; what is left is the offsets' reprs
    bare = sum(
        len(
            f'{{"quant_type": "nf4", "blocksize": 64, "dtype": "bfloat16", "shape": [{o}, {i}], '
            f'"nested_blocksize": 256, "nested_dtype": "float32", "nested_offset": }}'
        )
        for o, i in shapes
    )
    offsets = json_total - bare
    assert 18 * len(shapes) < offsets < 20 * len(shapes)  # 4,319 characters: 19.28 a float
    stored = 2 * BF16 + PACKED + absmax + 4 * f32 + json_total

    spec = calc.load_preset("llama-3.1-8b").replace(
        quantization=parse_quantization_config(
            {"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4",
             "bnb_4bit_use_double_quant": True, "llm_int8_skip_modules": None}
        ).model_dump()
    )  # fmt: skip
    parts = calc.weight_bytes_breakdown(spec)
    assert sum(v for k, v in parts.items() if k.endswith(":packed")) == PACKED
    assert sum(v for k, v in parts.items() if k.endswith(":scales")) == absmax + 4 * nested
    # exact but for the nested_offset digits: 19 characters a float, the nearest whole number
    # to the 19.28 above, so within half a byte a matrix (-63 bytes)
    assert abs(calc.weight_bytes(spec) - stored) <= len(shapes) // 2
