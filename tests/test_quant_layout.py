"""calc.quant.layout: one linear's stored bytes, against tensor shapes written out from the
libraries that save them and from tensors listed in public checkpoints."""

from __future__ import annotations

import pytest

from calc.quant import QuantScheme, linear_bytes

# --- GPTQ / AWQ: shapes from AutoGPTQ QuantLinear and AutoAWQ WQLinear ---------------------------


def test_gptq_4bit_group_128_every_tensor():
    s = QuantScheme(layout="gptq", bits=4, group_size=128, scale_dtype="fp16")
    b = linear_bytes(s, 14336, 4096)  # Llama-3-8B gate_proj: out 14336, in 4096
    assert b.packed == (4096 // 32 * 4) * 14336 * 4  # qweight int32 (512, 14336)
    assert b.zeros == (4096 // 128) * (14336 // 32 * 4) * 4  # qzeros int32 (32, 1792)
    assert b.scales == (4096 // 128) * 14336 * 2  # scales fp16 (32, 14336)
    assert b.g_idx == 4096 * 4  # g_idx int32 (4096,), stored with or without desc_act
    assert b.total == 29360128 + 229376 + 917504 + 16384


def test_gptq_desc_act_stores_the_same_g_idx_and_group_minus_one_is_one_group():
    plain = QuantScheme(layout="gptq", bits=4, group_size=128)
    ordered = QuantScheme(layout="gptq", bits=4, group_size=128, act_order=True)
    assert linear_bytes(plain, 4096, 4096) == linear_bytes(ordered, 4096, 4096)
    row = linear_bytes(QuantScheme(layout="gptq", bits=8, group_size=None), 1024, 4096)
    assert row.scales == 1 * 1024 * 2 and row.zeros == 1 * (1024 // 32 * 8) * 4
    assert row.packed == 4096 // 32 * 8 * 1024 * 4  # 8-bit: 4 values per int32


def test_gptq_3bit_packs_32_values_in_three_words():
    b = linear_bytes(QuantScheme(layout="gptq", bits=3, group_size=128), 4096, 4096)
    assert b.packed == 4096 // 32 * 3 * 4096 * 4
    assert b.zeros == 32 * (4096 // 32 * 3) * 4


def test_gptq_bias_is_stored_in_the_scale_dtype():
    b = linear_bytes(QuantScheme(layout="gptq", bits=4, group_size=128), 512, 3584, bias=True)
    assert b.bias == 512 * 2  # Qwen2 k_proj bias, fp16


def test_awq_gemm_and_gemv():
    gemm = QuantScheme(layout="awq-gemm", bits=4, group_size=128, symmetric=False)
    b = linear_bytes(gemm, 1024, 4096)  # k_proj
    assert (b.packed, b.zeros, b.scales) == (4096 * 128 * 4, 32 * 128 * 4, 32 * 1024 * 2)
    gemv = QuantScheme(layout="awq-gemv", bits=4, group_size=64, symmetric=False)
    v = linear_bytes(gemv, 1024, 4096)
    # calculate_zeros_width(4096, 64): ceil(64 / 8) = 8 words, rounded to a multiple of 2 -> 8
    assert (v.packed, v.zeros, v.scales) == (1024 * 512 * 4, 1024 * 8 * 4, 1024 * 64 * 2)
    odd = linear_bytes(gemv, 1024, 4160)  # 65 groups of 64 -> 9 words -> 10 (multiple of 2)
    assert odd.zeros == 1024 * 10 * 4 and odd.scales == 1024 * 80 * 2


# --- bitsandbytes --------------------------------------------------------------------------------

# google/gemma.cpp issue #533 lists a Gemma 3 1B nf4 checkpoint's tensors (hidden 1152, one KV
# head of 256, q 4 x 256, MLP 6912): k_proj.weight (147456, 1) uint8, absmax (4608,),
# quant_map (16,), quant_state.bitsandbytes__nf4 (80,); q_proj 589824 / 18432 / 81;
# down_proj (3981312, 1), absmax (124416,), quant_state (81,).
GEMMA3_1B_NF4 = [  # (out, in, packed, absmax, quant_state bytes)
    (256, 1152, 147456, 4608, 80),
    (1024, 1152, 589824, 18432, 81),
    (1152, 6912, 3981312, 124416, 81),
]


@pytest.mark.parametrize(("out", "inp", "packed", "absmax", "state"), GEMMA3_1B_NF4)
def test_bnb_nf4_matches_a_listed_checkpoint(out, inp, packed, absmax, state):
    s = QuantScheme(layout="bnb-4bit", bits=4, group_size=64, quant_type="nf4", scale_dtype="fp32")
    b = linear_bytes(s, out, inp, dtype="fp32")
    assert b.packed == packed
    assert b.scales == absmax * 4  # float32 absmax, no double quantization
    assert b.meta == 16 * 4 + state  # quant_map + JSON quant state


def test_bnb_nf4_double_quant_tensors():
    s = QuantScheme(layout="bnb-4bit", bits=4, group_size=64, quant_type="nf4", double_quant=True)
    b = linear_bytes(s, 4096, 4096, dtype="bf16")
    blocks = 4096 * 4096 // 64
    assert b.scales == blocks * 1 + (blocks // 256) * 4  # uint8 absmax + fp32 nested_absmax
    # bitsandbytes QuantState.as_dict(packed=True) -> json.dumps; the nested_offset float is
    # counted as a 19-character repr (repr(float(np.float32(0.0198))) = "0.01979999989271164")
    state = (
        '{"quant_type": "nf4", "blocksize": 64, "dtype": "bfloat16", "shape": [4096, 4096], '
        '"nested_blocksize": 256, "nested_dtype": "float32", "nested_offset": 0.01979999989271164}'
    )
    assert b.meta == 16 * 4 + 256 * 4 + len(state)  # quant_map + nested_quant_map + JSON


def test_bnb_int8_weight_scb_and_format_byte():
    s = QuantScheme(layout="bnb-8bit", bits=8, strategy="channel", scale_dtype="fp32")
    b = linear_bytes(s, 14336, 4096, dtype="fp32")
    assert (b.packed, b.scales, b.meta) == (14336 * 4096, 14336 * 4, 1)


# --- fp8, compressed-tensors, fp4 ------------------------------------------------------------------


def test_fp8_block_scales_round_up():
    s = QuantScheme(
        layout="fp8", bits=8, strategy="block", block_size=(128, 128), scale_dtype="fp32"
    )
    b = linear_bytes(s, 576, 7168)  # DeepSeek-V3 kv_a_proj_with_mqa: 512 + 64 rows
    assert b.packed == 576 * 7168 and b.scales == 5 * 56 * 4  # ceil(576/128) x 7168/128
    tensor = QuantScheme(
        layout="fp8", bits=8, strategy="tensor", scale_dtype="fp32", input_scale="tensor"
    )
    t = linear_bytes(tensor, 4096, 4096)
    assert (t.scales, t.act_scales) == (4, 4)


def test_compressed_tensors_pack_quantized_w4a16():
    s = QuantScheme(layout="ct-pack", bits=4, group_size=128, scale_dtype="bf16")
    b = linear_bytes(s, 4096, 4096)
    assert b.packed == 4096 * (4096 // 8) * 4  # weight_packed int32 (4096, 512)
    assert b.scales == 4096 * 32 * 2  # weight_scale bf16 (4096, 32)
    assert b.meta == 2 * 8 and b.zeros == 0  # weight_shape int64 (2,); symmetric
    asym = linear_bytes(s.model_copy(update={"symmetric": False, "act_order": True}), 4096, 4096)
    assert asym.zeros == (4096 // 8) * 32 * 4  # packed along dim 0
    assert asym.g_idx == 4096 * 4


def test_compressed_tensors_int8_and_fp8_channel():
    s = QuantScheme(
        layout="ct-int", bits=8, strategy="channel", scale_dtype="bf16", input_scale="tensor"
    )
    b = linear_bytes(s, 1024, 4096)
    assert (b.packed, b.scales, b.act_scales) == (1024 * 4096, 1024 * 2, 1 * 2)
    f = QuantScheme(layout="ct-float", bits=8, strategy="channel", scale_dtype="bf16")
    assert linear_bytes(f, 1024, 4096).total == 1024 * 4096 + 1024 * 2


def test_nvfp4_and_mxfp4():
    mo = QuantScheme(layout="modelopt-nvfp4", bits=4, group_size=16, scale_dtype="fp8_e4m3")
    b = linear_bytes(mo, 4096, 4096)
    assert (b.packed, b.scales, b.act_scales) == (4096 * 2048, 4096 * 256 + 4, 4)
    ct = QuantScheme(layout="ct-nvfp4", bits=4, group_size=16, input_global_scale=True)
    assert linear_bytes(ct, 4096, 4096).total == 4096 * 2048 + 4096 * 256 + 4 + 4
    mx = QuantScheme(layout="mxfp4", bits=4, group_size=32, scale_dtype="e8m0")
    # gpt-oss-20b gate_up_proj per expert: blocks (5760, 90, 16) + scales (5760, 90)
    assert linear_bytes(mx, 5760, 2880).total == 5760 * 90 * 16 + 5760 * 90


# --- refusals -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("scheme", "out", "inp", "message"),
    [
        (
            QuantScheme(layout="gptq", bits=4, group_size=100),
            4096,
            4096,
            "'group_size' must divide in_features=4096",
        ),
        (
            QuantScheme(layout="awq-gemm", bits=4, group_size=128),
            4100,
            4096,
            "'out_features' must be a multiple of 8",
        ),
        (QuantScheme(layout="gptq", bits=4), 4096, 4100, "'in_features' must be a multiple of 32"),
        (
            QuantScheme(layout="mxfp4", bits=4, group_size=32),
            64,
            48,
            "'in_features' must be a multiple of 32",
        ),
        (
            QuantScheme(layout="ct-pack", bits=4, group_size=48),
            64,
            4096,
            "'group_size' must divide in_features=4096",
        ),
    ],
)
def test_widths_a_layout_cannot_hold_are_refused(scheme, out, inp, message):
    with pytest.raises(ValueError, match=message):
        linear_bytes(scheme, out, inp, module="self_attn.q_proj")
