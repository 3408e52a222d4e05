"""Attention cost: query-key pairs, FLOPs (2 per multiply-add), score-matrix and fused bytes.

Pair counts are checked against a brute-force count over the mask definition (transformers
masking_utils: causal kv_idx <= q_idx; sliding_window_overlay kv_idx > q_idx - window), and
every FLOP figure against arithmetic written out for a toy model.
"""

from __future__ import annotations

import pytest
from conftest import toy

from calc import (
    attention_flops_decode,
    attention_flops_prefill,
    attention_pairs,
    forward_flops_decode,
    forward_flops_prefill,
    fused_attention_bytes,
    matmul_params,
    score_matrix_bytes,
    training_flops_per_token,
)

# L=4, h=32, H=4 (d=8), G=2, gated f=64, V=100
PER_PAIR = 4 * 4 * 8  # 2*H*d for Q K^T + 2*H*d for A V = 128 FLOPs per pair per layer
# W_q 32x32 + W_k, W_v 32x16 each + W_o 32x32 + gate/up/down 3 x 32x64, per layer; + LM head
MATMUL = 4 * (32 * 32 + 2 * 32 * 16 + 32 * 32 + 3 * 32 * 64) + 100 * 32  # 40064


def brute_pairs(n: int, causal: bool, window: int | None) -> int:
    count = 0
    for q in range(n):
        for k in range(n):
            if causal and k > q:
                continue
            if causal and window is not None and not k > q - window:
                continue
            count += 1
    return count


# --- pairs ----------------------------------------------------------------------------------


def test_pairs_closed_forms():
    assert attention_pairs(4, causal=False) == 16  # n^2
    assert attention_pairs(4, causal=True) == 4 * 5 // 2 == 10  # n(n+1)/2
    # window 4 over 10 tokens: queries 0..3 see 1, 2, 3, 4 keys, queries 4..9 see 4 each
    assert attention_pairs(10, causal=True, window=4) == 1 + 2 + 3 + 4 + 6 * 4 == 34
    assert attention_pairs(0) == 0


@pytest.mark.parametrize("n", [0, 1, 2, 3, 7, 16, 31])
@pytest.mark.parametrize("window", [None, 1, 2, 5, 16, 40])
@pytest.mark.parametrize("causal", [True, False])
def test_pairs_match_the_mask(n, window, causal):
    # without causal the count is what a dense kernel computes: n^2, whatever the window
    expected = brute_pairs(n, causal, window if causal else None)
    assert attention_pairs(n, causal=causal, window=window) == expected


# --- prefill and decode FLOPs ---------------------------------------------------------------


def test_prefill_flops_by_hand():
    s = toy()
    # 4 layers x 128 FLOPs per pair x 55 causal pairs (n = 10) x 2 sequences
    assert attention_flops_prefill(s, 10, 2) == 4 * PER_PAIR * 55 * 2 == 56320
    assert attention_flops_prefill(s, 10, 2, causal=False) == 4 * PER_PAIR * 100 * 2


def test_per_pair_uses_query_heads():
    # GQA shares K/V storage, not the products: the same FLOPs for G = 4, 2, 1
    flops = {g: attention_flops_prefill(toy(num_key_value_heads=g), 10) for g in (4, 2, 1)}
    assert len(set(flops.values())) == 1


def test_prefill_flops_with_sliding_pattern():
    # pattern 2, window 4: 2 global layers x 55 pairs + 2 sliding layers x 34 pairs (n = 10)
    s = toy(sliding_window=4, sliding_window_pattern=2)
    assert attention_flops_prefill(s, 10) == PER_PAIR * (2 * 55 + 2 * 34)
    # full (dense) counts n^2 on every layer
    assert attention_flops_prefill(s, 10, causal=False) == PER_PAIR * 4 * 100


def test_decode_flops_by_hand():
    # one new token against 10 cached keys on each of 4 layers, 3 sequences
    assert attention_flops_decode(toy(), 10, 3) == 3 * 4 * PER_PAIR * 10
    # window 4 on layers 0 and 2: those see 4 keys
    s = toy(sliding_window=4, sliding_window_pattern=2)
    assert attention_flops_decode(s, 10) == PER_PAIR * (2 * 10 + 2 * 4)
    assert attention_flops_decode(s, 3) == PER_PAIR * 4 * 3  # below the window: all see 3


@pytest.mark.parametrize("changes", [{}, {"sliding_window": 4, "sliding_window_pattern": 2}])
def test_decoding_token_by_token_costs_the_causal_prefill(changes):
    # the k-th decode step (context k, itself included) is row k of the causal mask, so
    # decoding n tokens one at a time scores exactly the pairs a causal prefill of n scores
    s = toy(**changes)
    for n in (1, 4, 5, 13):
        steps = sum(attention_flops_decode(s, k) for k in range(1, n + 1))
        assert steps == attention_flops_prefill(s, n)


def test_score_matrix_bytes():
    # batch x H x n x n elements: 2 x 4 x 100 x 100 x 2 B (bf16)
    assert score_matrix_bytes(toy(), 100, 2, "bf16") == 2 * 4 * 100 * 100 * 2 == 160_000
    assert score_matrix_bytes(toy(), 100, 2, "fp32") == 320_000
    # 3 heads, one token: 3 int4 scores = 1.5 B -> 2 B
    s = toy(hidden_size=24, num_attention_heads=3, num_key_value_heads=None)
    assert score_matrix_bytes(s, 1, 1, "int4") == 2


def test_fused_attention_bytes():
    # output batch x n x H x d (bf16) + one fp32 log-sum-exp per row and head
    assert fused_attention_bytes(toy(), 100, 2, "bf16") == 2 * 100 * 32 * 2 + 2 * 4 * 100 * 4
    assert fused_attention_bytes(toy(), 100, 2) == 16_000  # 10x less than the scores at n=100


def test_fused_is_linear_and_scores_quadratic():
    s = toy()
    assert fused_attention_bytes(s, 2000) == 2 * fused_attention_bytes(s, 1000)
    assert score_matrix_bytes(s, 2000) == 4 * score_matrix_bytes(s, 1000)


def test_matmul_params_of_the_toy():
    assert matmul_params(toy()) == MATMUL == 40064


def test_forward_prefill():
    # 2 FLOPs per weight per token + attention: 2 x 40064 x 10 tokens + 4 x 128 x 55
    assert forward_flops_prefill(toy(), 10) == 2 * MATMUL * 10 + 4 * PER_PAIR * 55 == 829_440
    assert forward_flops_prefill(toy(), 10, 3) == 3 * 829_440
    assert forward_flops_prefill(toy(), 10, causal=False) == 2 * MATMUL * 10 + 4 * PER_PAIR * 100


def test_forward_decode():
    # one token per sequence: 2 x 40064 + attention over 10 keys on 4 layers
    assert forward_flops_decode(toy(), 10) == 2 * MATMUL + 4 * PER_PAIR * 10 == 85_248
    assert forward_flops_decode(toy(), 10, 2) == 2 * 85_248


def test_training_is_three_forwards():
    # forward + backward ~= 3 x forward (Kaplan et al. 2020): 3 x 829,440 / 10 tokens
    assert training_flops_per_token(toy(), 10) == 3 * 829_440 / 10 == 248_832.0
    # with one token there is one pair per layer: 3 x (2 x 40064 + 4 x 128) -> the 6N rule + attn
    assert training_flops_per_token(toy(), 1) == 6 * MATMUL + 3 * 4 * PER_PAIR


def test_moe_flops_use_routed_experts():
    dense = toy()
    moe = toy(num_local_experts=4, num_experts_per_tok=2)
    # 2 experts (3 x 32 x 64 each) instead of 1, plus the router (32 x 4), per layer
    extra = 4 * (3 * 32 * 64 + 32 * 4)
    assert forward_flops_decode(moe, 10) - forward_flops_decode(dense, 10) == 2 * extra


# --- bad input ------------------------------------------------------------------------------

CALLS = {
    "attention_flops_prefill": (attention_flops_prefill, "seq_len", ">= 0"),
    "attention_flops_decode": (attention_flops_decode, "context", ">= 0"),
    "score_matrix_bytes": (score_matrix_bytes, "seq_len", ">= 0"),
    "fused_attention_bytes": (fused_attention_bytes, "seq_len", ">= 0"),
    "forward_flops_prefill": (forward_flops_prefill, "seq_len", ">= 0"),
    "forward_flops_decode": (forward_flops_decode, "context", ">= 0"),
}


@pytest.mark.parametrize("name", sorted(CALLS))
@pytest.mark.parametrize("bad", [-1, True, 2.5, "8"])
def test_bad_length(name, bad):
    fn, field, bound = CALLS[name]
    with pytest.raises(ValueError) as info:
        fn(toy(), bad)
    assert str(info.value) == f"'{field}' must be an integer {bound}: got {bad!r}"


@pytest.mark.parametrize("name", sorted(CALLS))
@pytest.mark.parametrize("bad", [0, -3, True, "2"])
def test_bad_batch(name, bad):
    fn = CALLS[name][0]
    with pytest.raises(ValueError) as info:
        fn(toy(), 10, bad)
    assert str(info.value) == f"'batch' must be an integer > 0: got {bad!r}"


@pytest.mark.parametrize("fn", [score_matrix_bytes, fused_attention_bytes])
def test_bad_dtype(fn):
    with pytest.raises(ValueError) as info:
        fn(toy(), 10, 1, "fp12")
    assert str(info.value).endswith("got 'fp12'")


def test_bad_pairs_arguments():
    with pytest.raises(ValueError, match=r"^'n' must be an integer >= 0: got -3$"):
        attention_pairs(-3)
    with pytest.raises(ValueError, match=r"^'n' must be an integer >= 0: got True$"):
        attention_pairs(True)
    with pytest.raises(ValueError, match=r"^'window' must be an integer > 0: got 0$"):
        attention_pairs(5, window=0)


@pytest.mark.parametrize("bad", [0, -5, False])
def test_training_needs_tokens(bad):
    with pytest.raises(ValueError) as info:
        training_flops_per_token(toy(), bad)
    assert str(info.value) == f"'seq_len' must be an integer > 0: got {bad!r}"
