"""calc.quant.kv: scales of a quantized KV cache, and those a checkpoint stores, written out."""

from __future__ import annotations

import pytest

from calc.quant import KVCacheScheme, checkpoint_kv_scale_bytes, kv_scale_bytes


def test_fp8_per_tensor_and_per_head():
    # Llama-3-70B: 80 layers, 8 KV heads of 128; one fp32 K and V scale per layer (vLLM)
    assert kv_scale_bytes(layers=80, kv_heads=8, head_dim=128) == 80 * 2 * 4
    assert kv_scale_bytes(layers=80, kv_heads=8, head_dim=128, granularity="head") == 80 * 2 * 8 * 4


def test_int4_group_scales_grow_with_tokens():
    # 32 layers x 8 heads, group 32 of a 128-wide head: 4 groups; fp16 scale + fp16 zero each
    b = kv_scale_bytes(
        layers=32,
        kv_heads=8,
        head_dim=128,
        tokens=1000,
        batch=3,
        granularity="group",
        group_size=32,
        scale_dtype="fp16",
        zero_point=True,
    )
    assert b == 32 * 3 * 1000 * 2 * 8 * 4 * (2 + 2)
    assert (
        kv_scale_bytes(layers=32, kv_heads=8, head_dim=128, granularity="group") == 0
    )  # no tokens


def test_checkpoint_kv_scales():
    mo = KVCacheScheme(layout="modelopt", scale_dtype="fp32")
    assert checkpoint_kv_scale_bytes(mo, layers=80, kv_heads=8, head_dim=128) == 80 * 2 * 4
    ct = KVCacheScheme(strategy="attn_head", scale_dtype="bf16")
    assert checkpoint_kv_scale_bytes(ct, layers=36, kv_heads=8, head_dim=128) == 36 * 2 * 8 * 2


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"granularity": "token"}, "'granularity' must be one of tensor, head, group"),
        (
            {"granularity": "group", "group_size": 48},
            "'group_size' must divide head_dim=128: got 48",
        ),
        ({"scale_dtype": "int3"}, "'scale_dtype' must be a dtype"),
        ({"tokens": -1}, "'tokens' must be an integer >= 0"),
    ],
)
def test_refusals(kwargs, message):
    with pytest.raises(ValueError, match=message):
        kv_scale_bytes(layers=2, kv_heads=2, head_dim=128, **kwargs)


def test_group_kv_scheme_is_not_stored_in_checkpoints():
    with pytest.raises(ValueError, match="'kv_cache_scheme.strategy' must be tensor or attn_head"):
        checkpoint_kv_scale_bytes(
            KVCacheScheme(strategy="group", group_size=32), layers=1, kv_heads=1, head_dim=64
        )
