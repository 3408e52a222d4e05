"""Attention cost as the context grows: the O(n^2) part, and the whole forward around it.

Counting convention: 2 FLOPs per multiply-add (as `torch.utils.flop_counter` and the PaLM MFU
appendix). Per layer and sequence, Q K^T costs 2 * H * d per query-key pair and A V the same,
so attention is 4 * H * d FLOPs per pair, with H the *query* heads (GQA shares K/V storage, not
the products). Full mask: n^2 pairs (what a dense kernel computes and what the torch counter
reports). Causal: n(n+1)/2 pairs exactly; a sliding layer of window w: sum_i min(i+1, w).
But: softmax, scaling, masking, norms, activations and residual adds are not counted; nor are
bias adds. The LM head is counted on every position of a prefill, as HF models compute it.

>>> attention_pairs(4, causal=True), attention_pairs(4, causal=False)
(10, 16)
"""

from __future__ import annotations

from calc.dtypes import dtype_bits
from calc.errors import check_count
from calc.layers import KINDS, causal_pairs
from calc.params import matmul_params
from calc.spec import ModelSpec

TRAINING_MULTIPLIER = (
    3  # backward ~= 2x forward (grads w.r.t. inputs and weights): Kaplan et al. 2020
)


def attention_pairs(n: int, causal: bool = True, window: int | None = None) -> int:
    """Query-key pairs one sequence of n tokens scores in one head.

    Without `causal` this is what a dense kernel computes, n^2, whatever the window.
    """
    n = check_count("n", n, allow_zero=True)
    if window is not None:
        window = check_count("window", window)
    return _pairs(n, causal, window)


def _pairs(n: int, causal: bool, window: int | None = None) -> int:
    """attention_pairs without the argument checks, for callers that checked them."""
    return causal_pairs(n, window) if causal else n * n


def attention_flops_prefill(
    spec: ModelSpec,
    seq_len: int,
    batch: int = 1,
    causal: bool = True,
    *,
    mla_absorbed: bool = False,
) -> int:
    """QK^T + AV FLOPs over all layers for a prefill of `seq_len` tokens (linear-attention
    layers: their per-token state work instead). MLA: naive per-head products by default,
    `mla_absorbed` for scores and values taken in the latent space."""
    seq_len = check_count("seq_len", seq_len, allow_zero=True)
    batch = check_count("batch", batch)
    return batch * prefill_attention_flops(spec, seq_len, causal, mla_absorbed=mla_absorbed)


def prefill_attention_flops(
    spec: ModelSpec, seq_len, causal: bool = True, *, mla_absorbed: bool = False, minimum=min
):
    """attention_flops_prefill of one sequence, unchecked; `seq_len` may be a numpy array (pass
    minimum=np.minimum, and floats where int64 could overflow)."""
    total = 0
    for kind, n in spec.attention_counts.items():
        k = KINDS[kind]
        per_layer = k.flops_per_pair(spec, mla_absorbed) * k.pairs(spec, seq_len, causal, minimum)
        index = k.index_flops_per_pair(spec)
        if index:  # an indexer's scores (V3.2: every earlier key; V4's CSA: every closed entry)
            per_layer = per_layer + index * k.index_pairs(spec, seq_len, causal, minimum)
        total = total + n * (per_layer + k.token_flops(spec) * seq_len)
    return total


def attention_flops_decode(
    spec: ModelSpec, context: int, batch: int = 1, *, mla_absorbed: bool = False
) -> int:
    """QK^T + AV FLOPs over all layers for one new token attending to `context` tokens.

    A sliding layer attends to at most `sliding_window` of them, a chunked layer to its chunk.
    """
    context = check_count("context", context, allow_zero=True)
    batch = check_count("batch", batch)
    total = 0
    for kind, n in spec.attention_counts.items():
        k = KINDS[kind]
        total += n * (k.flops_per_pair(spec, mla_absorbed) * k.decode_keys(spec, context))
        total += n * k.index_flops_per_pair(spec) * k.index_decode_keys(spec, context)
        total += n * k.token_flops(spec)
    return batch * total


def score_matrix_bytes(spec: ModelSpec, seq_len: int, batch: int = 1, dtype: str = "bf16") -> int:
    """One layer's materialized scores: batch x H x n x n elements (the O(n^2) memory)."""
    seq_len = check_count("seq_len", seq_len, allow_zero=True)
    batch = check_count("batch", batch)
    elems = batch * spec.num_attention_heads * seq_len * seq_len
    return -(-elems * dtype_bits(dtype) // 8)


def fused_attention_bytes(
    spec: ModelSpec, seq_len: int, batch: int = 1, dtype: str = "bf16"
) -> int:
    """One layer's fused-kernel (FlashAttention-style) outputs: O(n), no n x n matrix.

    The output (batch x n x H x d) plus one fp32 log-sum-exp per query row and head.
    """
    seq_len = check_count("seq_len", seq_len, allow_zero=True)
    batch = check_count("batch", batch)
    out = -(-batch * seq_len * spec.num_attention_heads * spec.v_dim * dtype_bits(dtype) // 8)
    row_stats = batch * spec.num_attention_heads * seq_len * 4  # fp32 logsumexp
    return out + row_stats


def forward_flops_prefill(
    spec: ModelSpec,
    seq_len: int,
    batch: int = 1,
    causal: bool = True,
    *,
    mla_absorbed: bool = False,
) -> int:
    """Whole forward over a prompt: 2 x matmul params per token + attention."""
    # check before multiplying: 2 * "8" * params would build a string, not raise
    seq_len = check_count("seq_len", seq_len, allow_zero=True)
    batch = check_count("batch", batch)
    dense = 2 * batch * seq_len * matmul_params(spec)
    return dense + attention_flops_prefill(spec, seq_len, batch, causal, mla_absorbed=mla_absorbed)


def forward_flops_decode(
    spec: ModelSpec, context: int, batch: int = 1, *, mla_absorbed: bool = False
) -> int:
    """One decode step (one token per sequence) at `context` tokens of cache.

    MLA: `mla_absorbed=True` is a decode against the latent cache (the engines' way, and
    kv_cache_bytes' default "engine" convention); False the naive per-head products over an
    expanded K/V cache (transformers' convention)."""
    batch = check_count("batch", batch)  # before 2 * batch: a str would repeat, not raise
    attn = attention_flops_decode(spec, context, batch, mla_absorbed=mla_absorbed)
    return 2 * batch * matmul_params(spec) + attn


def training_flops_per_token(spec: ModelSpec, seq_len: int) -> float:
    """Forward + backward per token of a causal training sequence (~3x forward)."""
    seq_len = check_count("seq_len", seq_len)
    return _training_per_token(forward_flops_prefill(spec, seq_len), seq_len)


def _training_per_token(forward_flops: int, tokens: int) -> float:
    # int / int is correctly rounded in Python, so a batch's forward over batch * n tokens gives
    # the same float as one sequence's forward over n tokens
    return TRAINING_MULTIPLIER * forward_flops / tokens
