"""Shared pieces of calc/quant/layout.py and layout_fp.py: the labelled bytes of one linear
and the scale-count helpers every layout uses."""

from __future__ import annotations

from typing import NamedTuple

from calc.quant.config import QuantScheme, dtype_bytes


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


def _act(s: QuantScheme, inp: int) -> int:
    """Static input-activation qparams (compressed-tensors initialize_qparams: tensor (1,),
    channel per input feature; the zero point is stored only when asymmetric) plus NVFP4's
    fp32 input_global_scale (TENSOR_GROUP, dynamic local: initialize.py step 0)."""
    n = {None: 0, "tensor": 1, "channel": inp}.get(s.input_scale, 1)
    sb = dtype_bytes(s.scale_dtype)
    zp = 0 if s.input_symmetric else n * dtype_bytes(s.zero_dtype)
    return n * sb + zp + (4 if s.input_global_scale else 0)
