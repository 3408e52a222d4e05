"""Typed reports built from the pure functions: what the CLI, dashboard and API return.

>>> from calc.presets import load_preset
>>> c = compare_attention(load_preset("llama-2-70b"), seq_len=4096)
>>> [(r.variant, r.kv_heads, r.savings) for r in c.rows]
[('MHA', 64, 0.0), ('GQA', 8, 0.875), ('MQA', 1, 0.984375)]
"""

from __future__ import annotations

from calc import attention as att
from calc.dtypes import canonical_dtype
from calc.errors import check_count
from calc.kvcache import (
    WindowTokens,
    kv_bytes_per_token,
    kv_bytes_per_token_per_layer,
    kv_cache_bytes,
    kv_cache_layer_bytes,
)
from calc.params import active_param_count, non_embedding_param_count, param_breakdown
from calc.results import (
    AttentionComparison,
    AttentionReport,
    AttentionVariant,
    KVCacheReport,
    ParamReport,
)
from calc.spec import ModelSpec


def params_report(spec: ModelSpec) -> ParamReport:
    b = param_breakdown(spec)  # once: the total, active and non-embedding counts derive from it
    total = sum(b.values())
    return ParamReport(
        model=spec.name,
        breakdown=b,
        total=total,
        active_per_token=active_param_count(spec),
        non_embedding=non_embedding_param_count(spec),
        published=spec.published_params,
    )


def kv_cache(
    spec: ModelSpec,
    seq_len: int,
    batch: int = 1,
    dtype: str = "bf16",
    *,
    block_size: int | None = None,
    window_tokens: WindowTokens = "window",
) -> KVCacheReport:
    layers = kv_cache_layer_bytes(
        spec, seq_len, batch, dtype, block_size=block_size, window_tokens=window_tokens
    )
    return KVCacheReport(
        model=spec.name,
        seq_len=seq_len,
        batch=batch,
        dtype=canonical_dtype(dtype),
        block_size=block_size,
        window_tokens=window_tokens,
        bytes_per_token=kv_bytes_per_token(spec, dtype),
        bytes_per_token_per_layer=kv_bytes_per_token_per_layer(spec, dtype),
        layer_bytes=layers,
        total_bytes=sum(layers),
    )


def attention_cost(
    spec: ModelSpec, seq_len: int, batch: int = 1, dtype: str = "bf16"
) -> AttentionReport:
    # each figure once: the forward and training figures reuse the causal attention FLOPs
    seq_len = check_count("seq_len", seq_len, allow_zero=True)
    batch = check_count("batch", batch)
    dtype = canonical_dtype(dtype)
    causal = att.attention_flops_prefill(spec, seq_len, batch, causal=True)
    fwd = att.forward_flops_prefill(spec, seq_len, batch, causal=True)
    tokens = batch * seq_len
    decode_attn = att.attention_flops_decode(spec, seq_len, batch)
    decode_fwd = att.forward_flops_decode(spec, seq_len, batch)  # > 0: every weight runs once
    return AttentionReport(
        model=spec.name,
        seq_len=seq_len,
        batch=batch,
        dtype=dtype,
        prefill_attention_flops_full=att.attention_flops_prefill(
            spec, seq_len, batch, causal=False
        ),
        prefill_attention_flops_causal=causal,
        decode_attention_flops=decode_attn,
        score_matrix_bytes=att.score_matrix_bytes(spec, seq_len, batch, dtype),
        fused_attention_bytes=att.fused_attention_bytes(spec, seq_len, batch, dtype),
        prefill_forward_flops=fwd,
        prefill_forward_flops_per_token=fwd / tokens if tokens else 0.0,
        decode_forward_flops=decode_fwd,
        # = training_flops_per_token(spec, seq_len): the batch cancels exactly
        training_flops_per_token=att._training_per_token(fwd, tokens) if tokens else 0.0,
        attention_share_prefill=causal / fwd if fwd else 0.0,
        attention_share_decode=decode_attn / decode_fwd,
    )


def compare_attention(
    spec: ModelSpec,
    seq_len: int | None = None,
    batch: int = 1,
    dtype: str = "bf16",
    *,
    window: int | None = None,
) -> AttentionComparison:
    """The same model as MHA (G = H), GQA (its own G), MQA (G = 1), MLA, sliding window and
    linear attention (calc/variants.py), and as configured when its layers mix kinds.

    `seq_len` defaults to the model's context length. KV cache and attention FLOPs at that
    length; savings are 1 - cache / MHA's cache (= 1 - G/H for the full-attention rows). An MLA
    row's decode is taken against its latent cache (absorbed products).
    """
    from calc.variants import attention_variants

    n = spec.max_position_embeddings if seq_len is None else seq_len
    n, batch = check_count("seq_len", n, allow_zero=True), check_count("batch", batch)
    dtype = canonical_dtype(dtype)
    H = spec.num_attention_heads
    rows = []
    mha_cache = None
    for variant, s in attention_variants(spec, window):
        cache = kv_cache_bytes(s, n, batch, dtype)
        mha_cache = cache if mha_cache is None else mha_cache
        b = param_breakdown(s)
        g = None if (s.is_mla or set(s.attention_counts) == {"linear_attention"}) else s.n_kv_heads
        if variant == "this model":
            g = None
        rows.append(
            AttentionVariant(
                variant=variant,
                kv_heads=g,
                ratio=None if g is None else g / H,
                kv_bytes_per_token=kv_bytes_per_token(s, dtype),
                kv_cache_bytes=cache,
                kv_proj_params=b["attn/kv"] + b["attn/linear"],  # W_k + W_v (+ biases), all layers
                prefill_attention_flops=att.attention_flops_prefill(s, n, batch),
                decode_attention_flops=att.attention_flops_decode(
                    s, n, batch, mla_absorbed=s.is_mla
                ),
                savings=1 - cache / mha_cache if mha_cache else 0.0,
            )
        )
    return AttentionComparison(
        model=spec.name,
        seq_len=n,
        batch=batch,
        dtype=dtype,
        query_heads=H,
        rows=rows,
    )
