"""Stored bytes of fp8, compressed-tensors, MXFP4 / NVFP4 and ModelOpt linears (the integer
GPTQ / AWQ / bitsandbytes layouts are in calc/quant/layout.py, which dispatches to both)."""

from __future__ import annotations

from calc.quant.config import dtype_bytes
from calc.quant.layout_base import LinearBytes, _act, _cdiv, _group, _need, _scale_count

# --- fp8 and compressed-tensors ---------------------------------------------------------------


def _fp8(s, out, inp, bias, dtype, module):
    # transformers integrations/finegrained_fp8.py FP8Linear.__init__: weight float8 (out, in);
    # weight_scale_inv fp32 (ceil(out / r), ceil(in / c)) per block, or one fp32 scalar when
    # weight_block_size is None (AutoFP8's weight_scale is the same scalar); static activations:
    # one fp32 activation/input scale. scale_fmt "ue8m0" stores 1-byte block scales.
    scales = _scale_count(s, out, inp, module) * dtype_bytes(s.scale_dtype)
    return LinearBytes(
        packed=out * inp,
        scales=scales,
        act_scales=4 if s.input_scale else 0,
        bias=out * dtype_bytes(dtype) if bias else 0,
    )


def _ct_common(s, out, inp, module):
    scales = _scale_count(s, out, inp, module) * dtype_bytes(s.scale_dtype)
    g_idx = inp * 4 if s.act_order else 0  # weight_g_idx int32 (in,): actorder "group"
    return scales, g_idx


def _ct_naive(s, out, inp, bias, dtype, module):
    # compressed-tensors compressors/quantized_compressors/naive_quantized.py: the weight is
    # stored one value per byte (int8 / float8_e4m3fn); weight_scale and (asymmetric only,
    # base.py _skip_zp) weight_zero_point of the scale's shape.
    scales, g_idx = _ct_common(s, out, inp, module)
    zeros = 0 if s.symmetric else _scale_count(s, out, inp, module) * dtype_bytes(s.zero_dtype)
    return LinearBytes(
        packed=out * inp,
        scales=scales,
        zeros=zeros,
        g_idx=g_idx,
        act_scales=_act(s, inp),
        bias=out * dtype_bytes(dtype) if bias else 0,
    )


def _ct_pack(s, out, inp, bias, dtype, module):
    # compressed-tensors pack_quantized.py: weight_packed int32 (out, ceil(in / (32 // bits)));
    # weight_shape = torch.tensor(weight.shape), int64 (2,); asymmetric group / channel zero
    # points packed along dim 0: int32 (ceil(out / (32 // bits)), in / g).
    pack = 32 // s.bits
    scales, g_idx = _ct_common(s, out, inp, module)
    zeros = 0
    if not s.symmetric:
        if s.strategy in ("group", "channel"):
            cols = inp // _group(s, inp, module) if s.strategy == "group" else 1
            zeros = _cdiv(out, pack) * cols * 4
        else:
            zeros = _scale_count(s, out, inp, module) * dtype_bytes(s.zero_dtype)
    return LinearBytes(
        packed=out * _cdiv(inp, pack) * 4,
        scales=scales,
        zeros=zeros,
        g_idx=g_idx,
        meta=2 * 8,
        act_scales=_act(s, inp),
        bias=out * dtype_bytes(dtype) if bias else 0,
    )


def _fp4(s, out, inp, bias, dtype, module, group: int, scale_bytes: int, globals_: int):
    _need(inp % group == 0, "in_features", f"be a multiple of {group} for fp4 blocks", inp, module)
    return LinearBytes(
        packed=out * inp // 2,
        scales=out * inp // group * scale_bytes + globals_,
        act_scales=_act(s, inp),
        bias=out * dtype_bytes(dtype) if bias else 0,
    )


def _ct_nvfp4(s, out, inp, bias, dtype, module):
    # compressed-tensors fp4_quantized.py: weight_packed uint8 (out, in / 2); weight_scale
    # float8_e4m3fn (out, in / 16); weight_global_scale fp32 (1,).
    return _fp4(s, out, inp, bias, dtype, module, s.group_size or 16, 1, 4)


def _ct_mxfp4(s, out, inp, bias, dtype, module):
    # compressed-tensors fp4_quantized.py (MXFP4): weight_packed uint8 (out, in / 2); weight_scale
    # uint8 E8M0 exponents (out, in / 32); no global scale.
    return _fp4(s, out, inp, bias, dtype, module, s.group_size or 32, 1, 0)


def _mxfp4(s, out, inp, bias, dtype, module):
    # transformers integrations/mxfp4.py (gpt-oss): {proj}_blocks uint8 (out, in / 32, 16) and
    # {proj}_scales uint8 (out, in / 32) per expert; checked against openai/gpt-oss-20b's index.
    return _fp4(s, out, inp, bias, dtype, module, 32, 1, 0)


def _modelopt_fp8(s, out, inp, bias, dtype, module):
    # vLLM quantization/modelopt.py ModelOptFp8LinearMethod.create_weights: weight float8
    # (out, in); weight_scale and input_scale one fp32 per checkpoint matrix.
    return LinearBytes(
        packed=out * inp, scales=4, act_scales=4, bias=out * dtype_bytes(dtype) if bias else 0
    )


def _modelopt_nvfp4(s, out, inp, bias, dtype, module):
    # vLLM modelopt.py ModelOptNvFp4LinearMethod.create_weights: weight uint8 (out, in / 2);
    # weight_scale float8_e4m3fn (out, in / group_size); weight_scale_2 and input_scale one
    # fp32 each per checkpoint matrix.
    r = _fp4(s, out, inp, bias, dtype, module, s.group_size or 16, 1, 4)
    return r._replace(act_scales=4)
