"""Quantized checkpoints: a config.json's `quantization_config` and the bytes it stores.

- calc.quant.config: `QuantConfig` / `QuantScheme` (frozen): method, layout, bits, group size,
  symmetry, activation order, scale granularity and dtype, skipped modules, KV-cache scales;
- calc.quant.parse (+ parse_ct): `parse_quantization_config(dict)`, refusing what it cannot count;
- calc.quant.layout: `linear_bytes(scheme, out, in)`, one weight's stored bytes by part;
- calc.quant.kv: `kv_scale_bytes(...)`, the scales of an fp8 / int8 / int4 KV cache (and the
  `kv_scales=` option of calc.kv_cache_bytes);
- calc.quant.weights: `weight_bytes(spec)` (calc.weight_bytes); calc.quant.sharding: per GPU.

>>> q = parse_quantization_config({"quant_method": "awq", "bits": 4, "group_size": 128,
...                                "zero_point": True, "version": "gemm"}, dtype="fp16")
>>> linear_bytes(q.scheme, 4096, 4096).total   # qweight 8 MiB + qzeros 64 KiB + scales 256 KiB
8716288
"""

from calc.quant.config import KVCacheScheme, QuantConfig, QuantScheme
from calc.quant.kv import (
    KV_SCALES,
    KVScales,
    cache_layer_scale_bytes,
    checkpoint_kv_scale_bytes,
    kv_scale_bytes,
)
from calc.quant.layout import PARTS, LinearBytes, linear_bytes
from calc.quant.parse import parse_quantization_config

__all__ = [
    "KV_SCALES",
    "PARTS",
    "KVScales",
    "cache_layer_scale_bytes",
    "KVCacheScheme",
    "LinearBytes",
    "QuantConfig",
    "QuantScheme",
    "checkpoint_kv_scale_bytes",
    "kv_scale_bytes",
    "linear_bytes",
    "parse_quantization_config",
]
