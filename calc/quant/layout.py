"""Bytes of ONE quantized linear weight (out_features x in_features) as its library stores it.

Every formula (here for GPTQ, AWQ and bitsandbytes; fp8, compressed-tensors and fp4 in
layout_fp.py) is the shape of the tensors the writing library registers or saves, cited at
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

from calc.quant.config import TORCH_NAMES, QuantScheme, dtype_bytes
from calc.quant.layout_base import PARTS, LinearBytes, _cdiv, _group, _need
from calc.quant.layout_fp import (
    _ct_mxfp4,
    _ct_naive,
    _ct_nvfp4,
    _ct_pack,
    _fp8,
    _modelopt_fp8,
    _modelopt_nvfp4,
    _mxfp4,
)

__all__ = ["PARTS", "LinearBytes", "linear_bytes"]


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
    #   whether or not desc_act (so every GPTQ checkpoint stores it); bias (out,) if the layer
    #   has one, or on every layer when AutoGPTQ wrote it (QuantScheme.bias_always).
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
        bias=out * sb if bias or s.bias_always else 0,
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

BNB_BLOCKSIZE = 64  # bitsandbytes Params4bit / functional.quantize_4bit default; not a config field
BNB_NESTED_BLOCKSIZE = 256  # quantize_4bit(compress_statistics=True) -> quantize_blockwise(256)
BNB_QUANT_MAP = 16  # quant_map: the nf4 / fp4 code, 16 float32 values
BNB_NESTED_QUANT_MAP = 256  # nested_quant_map: create_dynamic_map(), 256 float32 values
# The quant_state JSON's `nested_offset` is absmax.mean().item(): a float32 read as a Python
# float, written by json.dumps as repr(), whose length depends on the value, which no config
# holds. 19 characters is the usual length: repr of a float32 in [0.01, 0.1) has 19 characters
# for about two thirds of values (20 or 18 for most others), and unsloth/Meta-Llama-3.1-8B-
# Instruct-bnb-4bit's 224 matrices average 19.28 (tests/test_quant_bnb.py derives it from the
# Hub's counts). So a double-quantized matrix is exact up to about one byte.
BNB_NESTED_OFFSET_CHARS = 19


def bnb_quant_state_json(s: QuantScheme, out: int, inp: int, dtype: str) -> str:
    """The JSON bitsandbytes packs into `weight.quant_state.bitsandbytes__{nf4,fp4}` (a uint8
    tensor of its UTF-8 bytes) for one `out x inp` weight stored from `dtype`.

    functional.py QuantState.as_dict(packed=True) keeps the non-tensor items in insertion order:
    quant_type, blocksize, dtype (str(torch dtype) stripped of "torch."), shape (a tuple, so a
    JSON list) and, with double quantization, nested_blocksize, nested_dtype ("float32": the
    absmax statistics) and nested_offset (the float; written here as 0.0, see
    BNB_NESTED_OFFSET_CHARS). utils.pack_dict_to_tensor: json.dumps(...) with its default
    separators ", " and ": ".

    >>> from calc.quant.config import QuantScheme
    >>> s = QuantScheme(layout="bnb-4bit", bits=4, group_size=64, quant_type="nf4")
    >>> bnb_quant_state_json(s, 4096, 4096, "bf16")
    '{"quant_type": "nf4", "blocksize": 64, "dtype": "bfloat16", "shape": [4096, 4096]}'
    """
    _need(dtype in TORCH_NAMES, "dtype", "be fp16, bf16 or fp32 for bitsandbytes 4-bit", dtype, "")
    state: dict[str, object] = {
        "quant_type": s.quant_type,
        "blocksize": BNB_BLOCKSIZE,
        "dtype": TORCH_NAMES[dtype],
        "shape": [out, inp],
    }
    if s.double_quant:
        state |= {
            "nested_blocksize": BNB_NESTED_BLOCKSIZE,
            "nested_dtype": "float32",
            "nested_offset": 0.0,
        }
    return json.dumps(state)


def _bnb_state_bytes(s: QuantScheme, out: int, inp: int, dtype: str) -> int:
    """Bytes of the packed quant_state JSON, the nested_offset counted as
    BNB_NESTED_OFFSET_CHARS characters."""
    n = len(bnb_quant_state_json(s, out, inp, dtype).encode())
    return n - len("0.0") + BNB_NESTED_OFFSET_CHARS if s.double_quant else n


def _bnb_4bit(s, out, inp, bias, dtype, module):
    # bitsandbytes (commit 95f9af30) nn/modules.py Linear4bit._save_to_state_dict saves the
    # weight, the bias and QuantState.as_dict(packed=True) under "weight.":
    #   weight: _ops.py quantize_4bit out ((n + 1) // (itemsize * 2), 1) of quant_storage;
    #   absmax: one per 64-value block, float32; with compress_statistics (double quant) the
    #     uint8 codes of quantize_blockwise(absmax - offset, blocksize=256), plus
    #     nested_absmax float32, one per 256 blocks, and nested_quant_map float32 (256,);
    #   quant_map float32 (16,); quant_state.bitsandbytes__{nf4,fp4} (bnb_quant_state_json).
    # bias: the Linear's own, in the model dtype.
    n = out * inp
    item = dtype_bytes(s.storage_dtype)
    blocks = _cdiv(n, BNB_BLOCKSIZE)
    meta = BNB_QUANT_MAP * 4 + _bnb_state_bytes(s, out, inp, dtype)
    if s.double_quant:
        scales = blocks * 1 + _cdiv(blocks, BNB_NESTED_BLOCKSIZE) * 4
        meta += BNB_NESTED_QUANT_MAP * 4
    else:
        scales = blocks * 4
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
