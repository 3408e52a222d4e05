"""Scales of a quantized KV cache: what engines keep beside fp8 / int8 / int4 K and V.

Three granularities, as serving engines store them:
- "tensor": one K and one V scale per attention layer (vLLM Attention._k_scale / _v_scale,
  float32; SGLang's k_scale / v_scale): fp8 KV with checkpoint or calibrated scales;
- "head": one K and one V scale per KV head per layer (compressed-tensors kv_cache_scheme
  strategy "attn_head", shape (heads, 1, 1));
- "group": int8 / int4 caches quantized per token, one scale (and, asymmetric, one zero point)
  per `group_size` channels of each head, for K and V (LMDeploy's kv int8/int4 keeps a scale
  and zero per head and token: group_size = head_dim). These grow with the tokens cached.

`kv_scale_bytes` is a pure function of counts, so the core's kv_cache_bytes can add it for any
layer mix; `checkpoint_kv_scale_bytes` is what a quantized checkpoint stores for its KV scheme.

>>> kv_scale_bytes(layers=32, kv_heads=8, head_dim=128, granularity="tensor")   # 32 x (k, v) x 4 B
256
>>> kv_scale_bytes(layers=32, kv_heads=8, head_dim=128, tokens=4096, granularity="group",
...                group_size=128, scale_dtype="fp16", zero_point=True)   # 32*4096*2*8*(2+2)
8388608
"""

from __future__ import annotations

from typing import Literal, NamedTuple

from calc.errors import check_count
from calc.quant.config import KVCacheScheme, dtype_bytes, dtype_name

Granularity = Literal["tensor", "head", "group"]
GRANULARITIES: tuple[str, ...] = ("tensor", "head", "group")


class KVScales(NamedTuple):
    """How a quantized KV cache keeps its scales (the `kv_scales=` option of calc.kvcache)."""

    granularity: Granularity = "tensor"
    group_size: int | None = None  # "group": channels per scale (None: a whole head)
    scale_dtype: str = "fp32"
    zero_point: bool = False  # asymmetric int caches keep a zero point beside each scale


KV_SCALES: dict[str, KVScales] = {
    # fp8 K and V with one fp32 scale each per layer (vLLM --kv-cache-dtype fp8, SGLang)
    "fp8": KVScales("tensor"),
    # fp8 with a scale per KV head (compressed-tensors kv_cache_scheme strategy attn_head)
    "fp8-head": KVScales("head"),
    # int8 / int4 per token and head, fp16 scale and zero point (LMDeploy quant_policy 8 / 4)
    "int-head": KVScales("group", None, "fp16", True),
    # int4 per token in groups of 32 channels, fp16 scale and zero point
    "int-g32": KVScales("group", 32, "fp16", True),
}


def resolve_kv_scales(value: object) -> KVScales | None:
    """None, a KVScales, or one of KV_SCALES' names; a ValueError naming 'kv_scales' else."""
    if value is None or isinstance(value, KVScales):
        return value
    if isinstance(value, str) and value in KV_SCALES:
        return KV_SCALES[value]
    raise ValueError(
        f"'kv_scales' must be a KVScales or one of {', '.join(KV_SCALES)}: got {value!r}"
    )


def cache_layer_scale_bytes(
    scales: KVScales, *, elems_per_token: int, kv_heads: int, head_dim: int, tokens: int, batch: int
) -> int:
    """Scales of ONE attention layer's cache for `batch` sequences of `tokens` cached tokens.

    `elems_per_token` is what the layer caches per token (2 x G x head_dim; MLA: its latent, one
    "head" of that width), so a group scale covers `group_size` of those elements.
    """
    if scales.granularity != "group":
        return kv_scale_bytes(
            layers=1, kv_heads=kv_heads, head_dim=head_dim, granularity=scales.granularity,
            scale_dtype=scales.scale_dtype, zero_point=scales.zero_point,
        )  # fmt: skip
    g = head_dim if scales.group_size is None else check_count("group_size", scales.group_size)
    if head_dim % g or elems_per_token % g:
        raise ValueError(f"'group_size' must divide head_dim={head_dim}: got {g}")
    per = dtype_bytes(dtype_name(scales.scale_dtype, "scale_dtype")) * (
        2 if scales.zero_point else 1
    )
    return batch * tokens * (elems_per_token // g) * per


def kv_scale_bytes(
    *,
    layers: int,
    kv_heads: int,
    head_dim: int,
    tokens: int = 0,
    batch: int = 1,
    granularity: Granularity = "tensor",
    group_size: int | None = None,
    scale_dtype: str = "fp32",
    zero_point: bool = False,
) -> int:
    """Bytes of KV-cache scales (and zero points) for `layers` attention layers.

    "tensor" and "head" scales are per layer (independent of tokens); "group" scales are per
    cached token: `batch * tokens` tokens, each with K and V, `kv_heads` heads and
    `head_dim / group_size` groups per head (group_size None: one group per head).
    """
    layers, kv_heads = (
        check_count("layers", layers, allow_zero=True),
        check_count("kv_heads", kv_heads),
    )
    head_dim = check_count("head_dim", head_dim)
    tokens, batch = check_count("tokens", tokens, allow_zero=True), check_count("batch", batch)
    per = dtype_bytes(dtype_name(scale_dtype, "scale_dtype")) * (2 if zero_point else 1)
    if granularity == "tensor":
        return layers * 2 * per
    if granularity == "head":
        return layers * 2 * kv_heads * per
    if granularity != "group":
        raise ValueError(
            f"'granularity' must be one of {', '.join(GRANULARITIES)}: got {granularity!r}"
        )
    g = head_dim if group_size is None else check_count("group_size", group_size)
    if head_dim % g:
        raise ValueError(f"'group_size' must divide head_dim={head_dim}: got {g}")
    return layers * batch * tokens * 2 * kv_heads * (head_dim // g) * per


def checkpoint_kv_scale_bytes(
    kv: KVCacheScheme, *, layers: int, kv_heads: int, head_dim: int
) -> int:
    """The k_scale / v_scale tensors a checkpoint with this KV scheme stores.

    ModelOpt: `self_attn.k_proj.k_scale` and `self_attn.v_proj.v_scale`, one fp32 each per
    layer (vLLM weight_utils maybe_remap_kv_scale_name reads them); compressed-tensors:
    initialize_attn_qparams registers k/v scales of shape (1,) per layer for "tensor", (heads, 1,
    1) for "attn_head", in the model dtype, plus zero points when asymmetric.
    """
    if kv.strategy not in ("tensor", "attn_head"):
        raise ValueError(
            f"'kv_cache_scheme.strategy' must be tensor or attn_head to be stored: got {kv.strategy!r}"
        )
    return kv_scale_bytes(
        layers=layers,
        kv_heads=kv_heads,
        head_dim=head_dim,
        granularity="tensor" if kv.strategy == "tensor" else "head",
        scale_dtype=kv.scale_dtype,
        zero_point=not kv.symmetric,
    )
