"""KV-cache bytes: 2 (K and V) x layers x KV heads x head_dim x tokens x bytes, written out.

Sliding windows, paged blocks and int4 are checked against the same arithmetic by hand; the
LLaMA-1 65B figure is the lecture seed's (seeds/000, section 11.1) worked example.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import toy

from calc import (
    ModelSpec,
    kv_bytes_per_token,
    kv_bytes_per_token_per_layer,
    kv_cache_bytes,
    kv_cache_layer_bytes,
    load_preset,
)
from calc.kvcache import cached_tokens

# L=4 layers, G=2 KV heads, d=8: one token in one layer is 2 x 2 x 8 = 32 elements (64 B bf16)


def test_formula_written_out():
    # 2 (K, V) x 4 layers x 2 KV heads x 8 (head_dim) x 10 tokens x 3 sequences x 2 B (bf16)
    assert kv_cache_bytes(toy(), 10, 3, "bf16") == 2 * 4 * 2 * 8 * 10 * 3 * 2 == 7680
    assert kv_bytes_per_token_per_layer(toy(), "bf16") == 2 * 2 * 8 * 2 == 64
    assert kv_bytes_per_token(toy(), "bf16") == 4 * 64


@pytest.mark.parametrize(
    ("dtype", "bytes_per_elem_x2"),  # twice the bytes per element, so int4 stays whole
    [("fp32", 8), ("fp16", 4), ("bf16", 4), ("fp8", 2), ("int8", 2), ("int4", 1)],
)
def test_dtypes(dtype, bytes_per_elem_x2):
    # 4 layers x 32 elements x 10 tokens x bytes per element
    assert kv_cache_bytes(toy(), 10, 1, dtype) * 2 == 4 * 32 * 10 * bytes_per_elem_x2


def test_int4_is_half_a_byte_per_element():
    # head_dim 3, one KV head: K and V of one token are 6 int4 values = 3 bytes
    s = toy(num_key_value_heads=1, head_dim=3)
    assert kv_bytes_per_token_per_layer(s, "int4") == 6 // 2 == 3
    # 7 tokens: 4 layers x 7 x 6 values x 0.5 B = 84 B exactly (no per-token rounding)
    assert kv_cache_bytes(s, 7, 1, "int4") == 4 * 7 * 6 // 2 == 84


def test_llama_1_65b_seed_example():
    # seeds/000 section 11.1: 2 x 80 layers x 64 heads x 128 x 2048 tokens x 2 B (FP16).
    # The seed calls it "about 5.2 GB"; it is 5,368,709,120 B = 5.37 GB = 5.00 GiB.
    expected = 2 * 80 * 64 * 128 * 2048 * 2
    assert expected == 5_368_709_120
    assert kv_cache_bytes(load_preset("llama-1-65b"), 2048, 1, "fp16") == expected


def test_llama_2_70b_gqa():
    # Llama-2-70b-hf config.json: 80 layers, 8 KV heads, 8192 / 64 = 128 head_dim
    expected = 2 * 80 * 8 * 128 * 4096 * 2
    assert kv_cache_bytes(load_preset("llama-2-70b"), 4096, 1, "bf16") == expected == 1_342_177_280


# --- paged blocks ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("seq_len", "block", "tokens"),
    [(0, 16, 0), (1, 16, 16), (16, 16, 16), (17, 16, 32), (33, 16, 48), (100, 1, 100)],
)
def test_block_rounding(seq_len, block, tokens):
    # each sequence's tokens round up to whole blocks: ceil(n / block) * block
    assert cached_tokens(toy(), seq_len, sliding=False, block_size=block) == tokens
    assert kv_cache_bytes(toy(), seq_len, 2, block_size=block) == 4 * 64 * tokens * 2


# --- sliding windows ------------------------------------------------------------------------


def test_window_on_every_layer():
    s = toy(sliding_window=4)
    # "window": a sliding layer keeps min(n, 4) tokens; 10 tokens -> 4, 3 tokens -> 3
    assert kv_cache_bytes(s, 10) == 4 * 64 * 4
    assert kv_cache_bytes(s, 3) == 4 * 64 * 3
    # "window-1" (transformers' sliding caches): min(n, 3)
    assert kv_cache_bytes(s, 10, window_tokens="window-1") == 4 * 64 * 3
    assert kv_cache_bytes(s, 2, window_tokens="window-1") == 4 * 64 * 2


def test_window_with_pattern():
    # pattern 2: layers 0 and 2 slide, 1 and 3 are global (Gemma 2)
    s = toy(sliding_window=4, sliding_window_pattern=2)
    assert kv_cache_layer_bytes(s, 10) == [4 * 64, 10 * 64, 4 * 64, 10 * 64]
    assert kv_cache_bytes(s, 10) == (2 * 4 + 2 * 10) * 64
    assert kv_cache_layer_bytes(s, 10, window_tokens="window-1") == [3 * 64, 10 * 64] * 2


def test_window_and_blocks():
    # sliding layers keep 4 tokens -> one 16-token block; global layers 20 -> two blocks
    s = toy(sliding_window=4, sliding_window_pattern=2)
    assert kv_cache_layer_bytes(s, 20, block_size=16) == [16 * 64, 32 * 64] * 2


def test_gemma_2_9b_local_global():
    # google/gemma-2-9b config.json: 42 layers, 8 KV heads, head_dim 256, sliding_window 4096,
    # even layers slide. At 8192 tokens (bf16): 21 layers hold 8192 tokens, 21 hold 4096.
    s = ModelSpec(
        name="gemma-2-9b-shape",
        num_hidden_layers=42,
        hidden_size=3584,
        num_attention_heads=16,
        num_key_value_heads=8,
        head_dim=256,
        intermediate_size=14336,
        vocab_size=256000,
        sliding_window=4096,
        sliding_window_pattern=2,
    )
    per_token_layer = 2 * 8 * 256 * 2  # 8192 B
    expected = (21 * 8192 + 21 * 4096) * per_token_layer
    assert expected == 2_113_929_216
    assert kv_cache_bytes(s, 8192) == expected
    # below the window nothing is capped: all 42 layers x 1000 tokens
    assert kv_cache_bytes(s, 1000) == 42 * 1000 * per_token_layer


def test_mistral_window_caps_the_cache():
    # Mistral 7B v0.1 (paper Table 1): 32 layers, 8 KV heads, head_dim 128, window 4096, all
    # layers. At 16384 tokens the cache holds 4096: 2 x 32 x 8 x 128 x 4096 x 2 B
    s = toy(
        num_hidden_layers=32,
        hidden_size=4096,
        num_attention_heads=32,
        num_key_value_heads=8,
        sliding_window=4096,
    )
    assert kv_cache_bytes(s, 16384) == 2 * 32 * 8 * 128 * 4096 * 2 == 536_870_912
    # kv_bytes_per_token is before any window: one more token on every layer
    assert kv_bytes_per_token(s) == 32 * 2 * 8 * 128 * 2


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"sliding_window": 5},
        {"sliding_window": 5, "sliding_window_pattern": 2},
        {"sliding_window": 5, "sliding_window_pattern": 3, "num_hidden_layers": 7},
        {"num_key_value_heads": 1, "head_dim": 3},
    ],
)
@pytest.mark.parametrize("opts", [{}, {"block_size": 16}, {"window_tokens": "window-1"}])
@pytest.mark.parametrize("seq_len", [0, 1, 4, 5, 6, 33])
@pytest.mark.parametrize("dtype", ["bf16", "int4"])
def test_layer_list_sums_to_total(changes, opts, seq_len, dtype):
    s = toy(**changes)
    layers = kv_cache_layer_bytes(s, seq_len, 3, dtype, **opts)
    assert len(layers) == s.num_hidden_layers
    assert sum(layers) == kv_cache_bytes(s, seq_len, 3, dtype, **opts)


def test_zero_tokens_is_zero_bytes():
    assert kv_cache_bytes(toy(), 0) == 0
    assert kv_cache_layer_bytes(toy(), 0) == [0, 0, 0, 0]


def test_numpy_integers_are_accepted_exactly():
    # int64 would overflow here (2**40 tokens x 2**20 sequences x 4 layers x 128 B);
    # the result must be the exact Python int
    n, b = np.int64(2**40), np.int64(2**20)
    assert kv_cache_bytes(toy(), n, b, "fp32") == 2**40 * 2**20 * 4 * 32 * 4
    assert type(kv_cache_bytes(toy(), n, b)) is int


# --- bad input --------------------------------------------------------------------------------


@pytest.mark.parametrize("fn", [kv_cache_bytes, kv_cache_layer_bytes])
@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        ((-1,), {}, "'seq_len' must be an integer >= 0: got -1"),
        ((10, 0), {}, "'batch' must be an integer > 0: got 0"),
        ((10, -2), {}, "'batch' must be an integer > 0: got -2"),
        ((True,), {}, "'seq_len' must be an integer >= 0: got True"),
        ((10, True), {}, "'batch' must be an integer > 0: got True"),
        ((10.0,), {}, "'seq_len' must be an integer >= 0: got 10.0"),
        (("10",), {}, "'seq_len' must be an integer >= 0: got '10'"),
        ((10,), {"block_size": 0}, "'block_size' must be an integer > 0: got 0"),
        ((10,), {"block_size": -16}, "'block_size' must be an integer > 0: got -16"),
        ((10,), {"block_size": False}, "'block_size' must be an integer > 0: got False"),
        ((10,), {"window_tokens": "w"}, "'window_tokens' must be 'window' or 'window-1': got 'w'"),
    ],
)
def test_bad_input(fn, args, kwargs, message):
    with pytest.raises(ValueError) as info:
        fn(toy(), *args, **kwargs)
    assert str(info.value) == message


@pytest.mark.parametrize(
    "call",
    [
        lambda: kv_cache_bytes(toy(), 10, 1, "fp12"),
        lambda: kv_cache_layer_bytes(toy(), 10, 1, "fp12"),
        lambda: kv_bytes_per_token(toy(), "fp12"),
        lambda: kv_bytes_per_token_per_layer(toy(), "fp12"),
    ],
)
def test_unknown_dtype(call):
    with pytest.raises(ValueError) as info:
        call()
    assert str(info.value).startswith("'dtype' must be one of fp32, fp16, bf16")
    assert str(info.value).endswith("got 'fp12'")
