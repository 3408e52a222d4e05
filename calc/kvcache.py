"""KV-cache size: per layer kind, tokens kept x elements per token x bytes, plus constant states.

A softmax layer caches K and V: 2 x KV heads x head_dim elements per token (MLA: one latent of
kv_lora_rank + qk_rope_head_dim); a sliding layer keeps at most its window of tokens, a chunked
layer its chunk, a linear-attention or Mamba-2 layer no tokens but a fixed conv + recurrent
state per sequence, a mixer-less block (Nemotron-H's MLP / MoE blocks) nothing; DeepSeek-V4's compressed layers add one entry per compress rate tokens (calc/layers_v4.py).
The formulas live with the layer kinds (calc/layers.py); here they are summed over the model's
layer groups.

Conventions (`convention`, or the older `window_tokens`): "engine" (default) is what the
architecture needs, as vLLM / SGLang allocate it; "transformers" (= `window_tokens="window-1"`)
is what transformers' DynamicCache holds: window - 1 tokens in sliding and chunked layers, full
per-head K and V for MLA, a conv state of `kernel` columns. Paged rounding (`block_size`) rounds
each sequence's tokens per layer up to whole blocks.
But: no prefix sharing between sequences; the scales of an fp8 / int8 / int4 cache are counted
only when asked for (`kv_scales=`, calc/quant/kv.py).

>>> from calc.presets import load_preset
>>> kv_cache_bytes(load_preset("llama-1-65b"), 2048, dtype="fp16")   # 2*80*64*128*2048*2
5368709120
"""

from __future__ import annotations

from typing import Literal

from calc.dtypes import canonical_dtype, dtype_bits
from calc.errors import check_count
from calc.layers import KINDS, Convention, convention_of
from calc.layout import NO_KV_TYPES, STATE_TYPES
from calc.quant.kv import KVScales, cache_layer_scale_bytes, resolve_kv_scales
from calc.spec import ModelSpec

WindowTokens = Literal["window", "window-1"]


def cached_tokens(
    spec: ModelSpec,
    seq_len: int,
    *,
    sliding: bool | None = None,
    kind: str | None = None,
    block_size: int | None = None,
    window_tokens: WindowTokens = "window",
    convention: Convention | None = None,
) -> int:
    """Tokens one sequence keeps in one layer of `kind` (or `sliding`) after `seq_len` tokens."""
    conv = convention_of(window_tokens, convention)
    if kind is None:
        kind = "sliding_attention" if sliding else "full_attention"
    n = KINDS[kind].cached_tokens(spec, seq_len, conv)
    if block_size is not None:
        n = -(-n // block_size) * block_size  # whole blocks
    return n


def kv_bytes_per_token_per_layer(
    spec: ModelSpec, dtype: str = "bf16", *, convention: Convention = "engine"
) -> int:
    """One token in one softmax-attention layer: K and V (2 x G x head_dim), or MLA's latent."""
    kind = next((g.attention for g in spec.layer_groups if g.attention not in NO_KV_TYPES), None)
    if kind is None:
        return 0
    return -(-KINDS[kind].kv_elems_per_token(spec, convention) * dtype_bits(dtype) // 8)


def kv_bytes_per_token(
    spec: ModelSpec, dtype: str = "bf16", *, convention: Convention = "engine"
) -> int:
    """One more token of context, all layers, before any window caps it."""
    bits = dtype_bits(dtype)
    total = 0
    for kind, n in spec.attention_counts.items():
        total += n * -(-KINDS[kind].kv_elems_per_token(spec, convention) * bits // 8)
    return total


def state_bytes_per_sequence(
    spec: ModelSpec, dtype: str = "bf16", *, convention: Convention = "engine"
) -> int:
    """The constant per-sequence state of all linear-attention and Mamba-2 layers (0 without
    them); `dtype` is the cache's (a Mamba-2 SSM state may keep its own: calc/layers_ssm.py)."""
    canonical_dtype(dtype)
    total = 0
    for kind in STATE_TYPES:
        n = spec.attention_counts.get(kind, 0)
        if n:
            total += n * -(-KINDS[kind].state_bits(spec, dtype_bits(dtype), convention) // 8)
    return total


def kv_cache_group_bytes(
    spec: ModelSpec,
    seq_len: int,
    batch: int = 1,
    dtype: str = "bf16",
    *,
    block_size: int | None = None,
    window_tokens: WindowTokens = "window",
    convention: Convention | None = None,
    kv_scales: KVScales | str | None = None,
) -> dict[str, int]:
    """{attention type: bytes of one such layer} for `batch` sequences of `seq_len` tokens.

    `kv_scales` (calc.quant.kv.KV_SCALES names or a KVScales): add the scales a quantized cache
    keeps beside K and V (fp8 per tensor / per head, int per token and group)."""
    seq_len, batch, block_size = _validate(seq_len, batch, dtype, block_size)
    scales = resolve_kv_scales(kv_scales)
    conv = convention_of(window_tokens, convention)
    bits = dtype_bits(dtype)
    size = {}
    if scales is not None and spec.is_v4:
        raise ValueError(
            "'kv_scales' is not supported for DeepSeek-V4's compressed attention (its cache "
            f"holds window tokens and compressed entries, not per-token K/V): got {kv_scales!r}"
        )
    for kind in spec.attention_counts:
        k = KINDS[kind]
        t = cached_tokens(spec, seq_len, kind=kind, block_size=block_size, convention=conv)
        per_token = k.kv_elems_per_token(spec, conv)
        layer_bits = k.cache_bits(spec, seq_len, bits, conv, block_size)
        size[kind] = -(-(batch * layer_bits) // 8)
        if scales is not None and per_token:  # issue 11: a quantized cache's scales
            heads, width = (1, per_token) if spec.is_mla else (spec.n_kv_heads, spec.head_dim)
            size[kind] += cache_layer_scale_bytes(
                scales, elems_per_token=per_token, kv_heads=heads, head_dim=width, tokens=t,
                batch=batch,
            )  # fmt: skip
    return size


def kv_cache_layer_bytes(
    spec: ModelSpec,
    seq_len: int,
    batch: int = 1,
    dtype: str = "bf16",
    *,
    block_size: int | None = None,
    window_tokens: WindowTokens = "window",
    convention: Convention | None = None,
    kv_scales: KVScales | str | None = None,
) -> list[int]:
    """Bytes per layer (index = layer), for `batch` sequences of `seq_len` tokens."""
    size = kv_cache_group_bytes(
        spec, seq_len, batch, dtype, block_size=block_size, window_tokens=window_tokens,
        convention=convention, kv_scales=kv_scales,
    )  # fmt: skip
    return [size[t] for t in spec.attention_types]


def kv_cache_bytes(
    spec: ModelSpec,
    seq_len: int,
    batch: int = 1,
    dtype: str = "bf16",
    *,
    block_size: int | None = None,
    window_tokens: WindowTokens = "window",
    convention: Convention | None = None,
    kv_scales: KVScales | str | None = None,
) -> int:
    """Total cache bytes (KV and constant states) for `batch` sequences of `seq_len` tokens.

    The same as `sum(kv_cache_layer_bytes(...))`, by layer kind rather than layer by layer.
    """
    size = kv_cache_group_bytes(
        spec, seq_len, batch, dtype, block_size=block_size, window_tokens=window_tokens,
        convention=convention, kv_scales=kv_scales,
    )  # fmt: skip
    return sum(n * size[kind] for kind, n in spec.attention_counts.items())


def _validate(seq_len, batch, dtype, block_size) -> tuple[int, int, int | None]:
    """The checked counts as Python ints; raises naming the first bad argument."""
    seq_len = check_count("seq_len", seq_len, allow_zero=True)
    batch = check_count("batch", batch)
    canonical_dtype(dtype)
    if block_size is not None:
        block_size = check_count("block_size", block_size)
    return seq_len, batch, block_size
