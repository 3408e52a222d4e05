"""Bytes of ONE quantized linear weight (out_features x in_features) as its library stores it.

Every formula below is the shape of the tensors the writing library registers or saves, cited at
the formula; nothing is estimated. A width the layout cannot hold (a group that does not divide
the input width, an output that does not fill whole int32 words) is refused with a ValueError
naming the field, never rounded.

>>> from calc.quant.config import QuantScheme
>>> gptq = QuantScheme(layout="gptq", bits=4, group_size=128, scale_dtype="fp16")
>>> linear_bytes(gptq, 4096, 4096).total   # qweight 8 MiB + qzeros 64 KiB + scales 256 KiB + g_idx
8732672
"""

from __future__ import annotations

import json
from typing import NamedTuple

from calc.quant.config import TORCH_NAMES, QuantScheme, dtype_bytes


class LinearBytes(NamedTuple):
    """A linear's stored bytes, by part."""

    packed: int = 0  # the quantized weight data
    scales: int = 0  # weight scales: per tensor / channel / group / block, absmax, SCB, globals
    zeros: int = 0  # zero points
    g_idx: int = 0  # activation-order group indices
    meta: int = 0  # bookkeeping: weight_shape, quant_map, quant_state JSON, weight_format
    act_scales: int = 0  # static activation (input) scales and zero points
    bias: int = 0

    @property
    def total(self) -> int:
        return sum(self)


PARTS: tuple[str, ...] = LinearBytes._fields


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _need(cond: bool, field: str, rule: str, value: object, module: str) -> None:
    if not cond:
        where = f" ({module})" if module else ""
        raise ValueError(f"'{field}' must {rule}{where}: got {value}")


def _group(s: QuantScheme, inp: int, module: str) -> int:
    """The group size, checked to divide the input width (None / -1: the whole row)."""
    g = s.group_size or inp
    _need(inp % g == 0, "group_size", f"divide in_features={inp}", g, module)
    return g


def _scale_count(s: QuantScheme, out: int, inp: int, module: str) -> int:
    """Scale elements for compressed-tensors / fp8 strategies (compressed-tensors
    lifecycle/initialize.py initialize_qparams: tensor (1,), channel (out, 1), group
    (out, in / g), block (ceil(out / r), ceil(in / c)))."""
    if s.strategy == "tensor":
        return 1
    if s.strategy == "channel":
        return out
    if s.strategy in ("group", "tensor_group"):
        return out * (inp // _group(s, inp, module))
    r, c = s.block_size  # type: ignore[misc]
    return _cdiv(out, r) * _cdiv(inp, c)


def linear_bytes(
    s: QuantScheme, out: int, inp: int, *, bias: bool = False, dtype: str = "bf16", module: str = ""
) -> LinearBytes:
    """Stored bytes of one `out x inp` weight (and its bias) under scheme `s`.

    `dtype` is the checkpoint's base dtype: bitsandbytes writes it into its quant_state, and most
    layouts store the bias in it (AutoGPTQ / AutoAWQ store theirs in the scale dtype, fp16).
    """
    fn = _LAYOUTS[s.layout]
    return fn(s, out, inp, bias, dtype, module)


# --- integer group quantization: GPTQ, AWQ ---------------------------------------------------


def _gptq(s, out, inp, bias, dtype, module):
    # AutoGPTQ nn_modules/qlinear/qlinear_cuda_old.py QuantLinear.__init__ (same in GPTQModel):
    #   qweight int32 (in // 32 * bits, out); qzeros int32 (ceil(in / g), out // 32 * bits);
    #   scales (ceil(in / g), out) in the weight dtype (fp16); g_idx int32 (in,) registered
    #   whether or not desc_act (so every GPTQ checkpoint stores it); bias (out,) if any.
    b = s.bits
    _need(inp % 32 == 0, "in_features", f"be a multiple of 32 to pack {b}-bit rows", inp, module)
    _need(out * b % 32 == 0, "out_features", f"fill whole int32 words at {b} bits", out, module)
    groups = inp // _group(s, inp, module)
    sb = dtype_bytes(s.scale_dtype)
    return LinearBytes(
        packed=inp // 32 * b * out * 4,
        zeros=groups * (out // 32 * b) * 4,
        scales=groups * out * sb,
        g_idx=inp * 4,
        bias=out * sb if bias else 0,
    )


def _awq_gemm(s, out, inp, bias, dtype, module):
    # AutoAWQ awq/modules/linear/gemm.py WQLinear_GEMM.__init__ (asserts in % g == 0 and
    #   out % (32 // w_bit) == 0): qweight int32 (in, out / 8); qzeros int32 (in / g, out / 8);
    #   scales fp16 (in / g, out); bias fp16 (out,). qzeros is registered even if unused.
    pack = 32 // s.bits
    _need(out % pack == 0, "out_features", f"be a multiple of {pack} for AWQ packing", out, module)
    groups = inp // _group(s, inp, module)
    return LinearBytes(
        packed=inp * (out // pack) * 4,
        zeros=groups * (out // pack) * 4,
        scales=groups * out * 2,
        bias=out * 2 if bias else 0,
    )


def _awq_gemv(s, out, inp, bias, dtype, module):
    # AutoAWQ awq/modules/linear/gemv.py WQLinear_GEMV: qweight int32 (out, in / 8); qzeros int32
    #   (out, w); scales fp16 (out, w * 8), w = calculate_zeros_width(in, g): ceil(in / g / 8),
    #   then rounded up to 2 (g = 64) or 4 (g = 32) words.
    pack = 32 // s.bits
    _need(out % pack == 0, "out_features", f"be a multiple of {pack} for AWQ packing", out, module)
    g = _group(s, inp, module)
    mult = {32: 4, 64: 2}.get(g, 1)
    _need(g >= 128 or g in (32, 64), "group_size", "be 32, 64 or >= 128 for AWQ GEMV", g, module)
    width = _cdiv(_cdiv(inp // g, pack), mult) * mult
    return LinearBytes(
        packed=out * (inp // pack) * 4,
        zeros=out * width * 4,
        scales=out * width * pack * 2,
        bias=out * 2 if bias else 0,
    )


# --- bitsandbytes ------------------------------------------------------------------------------

BNB_BLOCKSIZE = 64  # bitsandbytes functional.quantize_4bit default; not a config field
BNB_NESTED_BLOCKSIZE = 256  # quantize_4bit(compress_statistics=True) -> quantize_blockwise(256)
# json.dumps of QuantState's `nested_offset` (absmax.mean().item(), a float): its repr length
# depends on the value, which no config holds; 20 characters is repr(float(float32)) of a
# typical 0.0x mean ("0.021480705216526985"). Exact only up to a few bytes per matrix.
BNB_NESTED_OFFSET_CHARS = 20


def _bnb_4bit(s, out, inp, bias, dtype, module):
    # bitsandbytes _ops.py quantize_4bit: out ((n + 1) // (itemsize * 2), 1) of quant_storage;
    # absmax: one per 64-value block (float32, or uint8 + nested_absmax float32 per 256 blocks
    # when compress_statistics); QuantState.as_dict(packed=True) saves quant_map (16 x fp32),
    # nested_quant_map (256 x fp32) and the non-tensor items as UTF-8 JSON bytes
    # (utils.pack_dict_to_tensor) under weight.quant_state.bitsandbytes__{nf4,fp4}.
    n = out * inp
    item = dtype_bytes(s.storage_dtype)
    blocks = _cdiv(n, BNB_BLOCKSIZE)
    state = {
        "quant_type": s.quant_type,
        "blocksize": BNB_BLOCKSIZE,
        "dtype": TORCH_NAMES[dtype],
        "shape": [out, inp],
    }
    meta = 16 * 4  # quant_map
    if s.double_quant:
        scales = blocks + _cdiv(blocks, BNB_NESTED_BLOCKSIZE) * 4
        meta += 256 * 4  # nested_quant_map
        state |= {"nested_blocksize": BNB_NESTED_BLOCKSIZE, "nested_dtype": "float32"}
        extra = len(', "nested_offset": ') + BNB_NESTED_OFFSET_CHARS
    else:
        scales, extra = blocks * 4, 0
    meta += len(json.dumps(state)) + extra
    return LinearBytes(
        packed=(n + 1) // (item * 2) * item,
        scales=scales,
        meta=meta,
        bias=out * dtype_bytes(dtype) if bias else 0,
    )


def _bnb_8bit(s, out, inp, bias, dtype, module):
    # bitsandbytes nn/modules.py Linear8bitLt._save_to_state_dict: weight int8 (out, in),
    # SCB float32 (out,) row statistics, weight_format uint8 scalar (kept for compatibility).
    return LinearBytes(
        packed=out * inp,
        scales=out * 4,
        meta=1,
        bias=out * dtype_bytes(dtype) if bias else 0,
    )


# --- fp8 and compressed-tensors ---------------------------------------------------------------


def _act(s: QuantScheme, inp: int) -> int:
    """Static input-activation qparams (compressed-tensors initialize_qparams: tensor (1,),
    channel per input feature; the zero point is stored only when asymmetric) plus NVFP4's
    fp32 input_global_scale (TENSOR_GROUP, dynamic local: initialize.py step 0)."""
    n = {None: 0, "tensor": 1, "channel": inp}.get(s.input_scale, 1)
    sb = dtype_bytes(s.scale_dtype)
    zp = 0 if s.input_symmetric else n * dtype_bytes(s.zero_dtype)
    return n * sb + zp + (4 if s.input_global_scale else 0)


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


_LAYOUTS = {
    "gptq": _gptq,
    "awq-gemm": _awq_gemm,
    "awq-gemv": _awq_gemv,
    "bnb-4bit": _bnb_4bit,
    "bnb-8bit": _bnb_8bit,
    "fp8": _fp8,
    "ct-pack": _ct_pack,
    "ct-int": _ct_naive,
    "ct-float": _ct_naive,
    "ct-nvfp4": _ct_nvfp4,
    "ct-mxfp4": _ct_mxfp4,
    "mxfp4": _mxfp4,
    "modelopt-fp8": _modelopt_fp8,
    "modelopt-nvfp4": _modelopt_nvfp4,
}
