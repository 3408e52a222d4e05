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


# --- calc.kvcache's kv_scales= ---------------------------------------------------------------------


def test_kv_cache_bytes_adds_the_scales():
    import calc

    spec = calc.load_preset("llama-3-8b")  # 32 layers, 8 KV heads of 128
    plain = calc.kv_cache_bytes(spec, 4096, 2, dtype="fp8")
    assert calc.kv_cache_bytes(spec, 4096, 2, dtype="fp8", kv_scales="fp8") == plain + 32 * 2 * 4
    int8 = calc.kv_cache_bytes(spec, 4096, 2, dtype="int8")
    # per token, layer and K/V head: one fp16 scale and one fp16 zero point
    assert calc.kv_cache_bytes(spec, 4096, 2, dtype="int8", kv_scales="int-head") == (
        int8 + 32 * 2 * 4096 * (2 * 8) * (2 + 2)
    )


def test_sliding_layers_scale_only_their_window():
    import calc

    spec = calc.load_preset("gemma-2-9b")  # 42 layers alternate 4096-token sliding / global
    layers = calc.kv_cache_layer_bytes(spec, 10000, dtype="int4", kv_scales="int-g32")
    plain = calc.kv_cache_layer_bytes(spec, 10000, dtype="int4")
    groups = 2 * spec.n_kv_heads * spec.head_dim // 32
    extra = [a - b for a, b in zip(layers, plain, strict=True)]
    assert extra[0] == 4096 * groups * 4 and extra[1] == 10000 * groups * 4


def test_mla_latent_scales():
    import calc

    spec = calc.load_preset("deepseek-v3")  # 61 MLA layers caching 512 + 64 latent channels
    extra = calc.kv_cache_bytes(
        spec, 1000, dtype="fp8", kv_scales="fp8-head"
    ) - calc.kv_cache_bytes(spec, 1000, dtype="fp8")
    assert extra == 61 * 2 * 1 * 4  # one latent "head": a K and a V scale per layer
    g = calc.quant.KVScales("group", 64, "fp32")
    grouped = calc.kv_cache_bytes(spec, 1000, dtype="fp8", kv_scales=g)
    assert grouped - calc.kv_cache_bytes(spec, 1000, dtype="fp8") == 61 * 1000 * (576 // 64) * 4


def test_bad_kv_scales_are_refused():
    import calc

    with pytest.raises(ValueError, match="'kv_scales' must be a KVScales or one of fp8"):
        calc.kv_cache_bytes(calc.load_preset("llama-3-8b"), 8, kv_scales="int3")
