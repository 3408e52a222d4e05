"""vLLM's DeepSeek-V4 KV cache after 0.23 (calc.serving.v4_cache / v4_groups), release group by
release group, against arithmetic written out here from the PyPI sdists 0.24.0 - 0.29.0
(file:line of the release named; the 0.20 - 0.23 tests are in test_serving_v4_cache.py).

DeepSeek-V4-Flash (config.json: 43 decoder layers, compress_ratios 0, 0, then 4 / 128
alternating, ending 4), block 256, fp8_ds_mla, one rank. Pages, as every release 0.20 - 0.29
computes them (0.28.0 kv_cache_interface.py:251 heads x block / compress x content, rounded up
to 576 by _apply_alignment_padding; fp8_ds_mla content 584 B, attention.py:737):
  C4 latent 64 x 584 -> 37440, C4 indexer 64 x 132 -> 8640, C128 latent 2 x 584 -> 1728,
  SWA 64 x 584 -> 37440, C4 states 4 x 2048 x 4 -> 32832 and 4 x 512 x 4 -> 8640,
  C128 state 8 x 1024 x 4 -> 32832.
"""

from __future__ import annotations

import pytest

from calc.serving.v4_cache import V4Attention, v4_layout

FLASH = V4Attention(compress_ratios=(0, 0) + (4, 128) * 20 + (4,))
L, MNBT = 30000, 16384


def cdiv(a, b):
    return -(-a // b)


def pad576(n):
    return cdiv(n, 576) * 576


C4_LATENT, C4_INDEX, C128_LATENT = pad576(64 * 584), pad576(64 * 132), pad576(2 * 584)
SWA = pad576(64 * 584)
C4_STATE, C4_INDEX_STATE, C128_STATE = pad576(4 * 2048 * 4), pad576(4 * 512 * 4), pad576(8 * 4096)


def test_page_arithmetic():
    assert (C4_LATENT, C4_INDEX, C128_LATENT, SWA) == (37440, 8640, 1728, 37440)
    assert (C4_STATE, C4_INDEX_STATE, C128_STATE) == (32832, 8640, 32832)


def sliding_pages(in_flight: int) -> int:
    """Pages one request of L tokens takes in the four sliding groups (two SWA groups, C4
    states, C128 state): cdiv(min(window - 1 + in-flight tokens, L), block) + 1."""
    swa = cdiv(min(128 - 1 + in_flight, L), 64) + 1
    c4 = cdiv(min(8 - 1 + in_flight, L), 4) + 1
    c128 = cdiv(min(128 - 1 + in_flight, L), 8) + 1
    return 2 * swa + c4 + c128


def pages_per_request(in_flight: int) -> int:
    return cdiv(L, 256) + sliding_pages(in_flight)


@pytest.mark.parametrize("version", [(0, 24, 0), (0, 25, 0)])
def test_024_025_keep_023s_cache(version):
    """0.24.0 renames the allocator (_get_kv_cache_config_packed, kv_cache_utils.py:1282; its
    divisor is 0.23.0's per-page-size buckets); 0.25.0 only re-aligns non-fp8_ds_mla pages to
    512 (compressor.py:165, attention.py:621/659). Block: 37440 x 22 (the larger SWA group) +
    8640 x 21 + 1728 x 20; one request: 22 tuples x pages x (37440 + 8640 + 1728)."""
    lay = v4_layout(FLASH, version)
    assert lay.block_bytes() == 37440 * 22 + 8640 * 21 + 1728 * 20
    assert lay.request_bytes(L, MNBT) == 22 * pages_per_request(MNBT) * 47808
    assert [len(g.pages) for g in lay.groups] == [62, 22, 21, 42, 20]


def test_026_admits_two_batches_in_flight():
    """0.26.0: SlidingWindowSpec admits window - 1 + max_in_flight_tokens (kv_cache_interface
    .py:584), = max_concurrent_batches (2: async scheduling, PP 1; config/vllm.py:512-522) x
    max_num_batched_tokens (:524-533); without async scheduling 1 x."""
    lay = v4_layout(FLASH, (0, 26, 0))
    assert lay.request_bytes(L, MNBT) == 22 * pages_per_request(2 * MNBT) * 47808
    sync = v4_layout(FLASH, (0, 26, 0), async_scheduling=False)
    assert sync.request_bytes(L, MNBT) == 22 * pages_per_request(MNBT) * 47808
    assert lay.block_bytes() == 37440 * 22 + 8640 * 21 + 1728 * 20  # unchanged
    # concurrency, 0.23-0.26 form: groups' page sums x the widest group (62 layers); before
    # 0.27 a state page is padded to the next full page: 32832 -> 37440, 8640 stays
    n = 10000
    usage = (
        cdiv(L, 256) * (37440 + 8640) * 21
        + cdiv(L, 256) * 1728 * 20
        + (cdiv(min(127 + 2 * MNBT, L), 64) + 1) * 37440 * (22 + 21)
        + (cdiv(min(7 + 2 * MNBT, L), 4) + 1) * (37440 + 8640) * 21
        + (cdiv(min(127 + 2 * MNBT, L), 8) + 1) * 37440 * 20
    )
    per_block = ((37440 + 8640) * 21 + 1728 * 20) * 62
    assert lay.max_concurrency(n, L, MNBT) == n / cdiv(62 * usage, per_block)


@pytest.mark.parametrize("version", [(0, 27, 0), (0, 27, 1), (0, 28, 0)])
def test_027_028_unpadded_pages_and_largest_group_block(version):
    """0.27.0: sliding pages keep their own size (kv_cache_utils.py:1717-1725); the block is
    the largest group's sum of pages (_get_packed_kv_cache_layout :1283-1306, :1342): the
    full-MLA group's 37440 x 21 + 8640 x 21 + 1728 x 20 = 1,002,240 beats SWA 22 x 37440,
    C4 states 21 x (32832 + 8640), C128 20 x 32832; concurrency = blocks / the groups' pages
    per request (get_max_concurrency_for_kv_cache_config :937-960). The refusal keeps the
    tuple form (_max_memory_usage_bytes_from_groups)."""
    lay = v4_layout(FLASH, version)
    sums = [37440 * 21 + 8640 * 21 + 1728 * 20, 22 * 37440, 21 * 37440]
    sums += [21 * (C4_STATE + C4_INDEX_STATE), 20 * C128_STATE]
    assert [sum(g.pages) for g in lay.groups] == sums
    assert lay.block_bytes() == 1_002_240
    assert lay.num_blocks(5 * 2**30) == 5 * 2**30 // 1_002_240
    assert lay.max_concurrency(12345, L, MNBT) == 12345 / pages_per_request(2 * MNBT)
    assert lay.gpu_kv_cache_tokens(12345, L, MNBT) == int(12345 / pages_per_request(2 * MNBT) * L)
    assert lay.request_bytes(L, MNBT) == 22 * pages_per_request(2 * MNBT) * 47808


@pytest.mark.parametrize("version", [(0, 29, 0), (0, 30, 0), (0, 31, 0), (0, 32, 0), (0, 33, 0)])
def test_029_to_033_packed_groups(version):
    """0.29.0 _get_packed_kv_cache_groups (kv_cache_utils.py:1668-1781): buckets full (21 / 21
    / 20 pages: unbalanced, kept whole), SWA (43: balanced), C4 states (21 / 21: balanced, two
    sizes: floor 21), C128 state (20); repeats = _approximate_gcd([43, 21, 20], >= 21) = 22
    (padding 1 + 1 + 2 = 4; 21 gives 20 + 0 + 1); SWA in cdiv(43, 22) = 2 groups. One request:
    block bytes x the groups' pages (_max_memory_usage_bytes_from_groups :2041-2071).
    0.30.0 - 0.33.0 keep all of it for V4 with block 256 (v4_cache's docstring: 0.32.0's
    block-stride alignment is 1 when every fixed kernel block equals the block)."""
    lay = v4_layout(FLASH, version)
    shape = sorted((g.kind, g.block_size, g.window, len(g.pages)) for g in lay.groups)
    assert shape == sorted(
        [
            ("full", 256, None, 62),
            ("sliding", 64, 128, 22),
            ("sliding", 64, 128, 21),
            ("sliding", 4, 8, 42),
            ("sliding", 8, 128, 20),
        ]
    )
    assert lay.block_bytes() == 1_002_240
    assert lay.request_bytes(L, MNBT) == 1_002_240 * pages_per_request(2 * MNBT)
    assert lay.max_concurrency(777, L, MNBT) == 777 / pages_per_request(2 * MNBT)


def test_029_refusal_holds_back_the_null_block():
    """0.29.0 get_kv_cache_configs (kv_cache_utils.py:2316-2336): the one-request check gets the
    memory less one block (the BlockPool's null block); 0.28.0 checks the whole memory."""
    new, old = v4_layout(FLASH, (0, 29, 0)), v4_layout(FLASH, (0, 28, 0))
    need_new = 1_002_240 * pages_per_request(2 * MNBT)
    assert new.refusal(need_new + 1_002_240, L, MNBT) is None
    assert "available KV cache memory" in new.refusal(need_new + 1_002_239, L, MNBT)
    need_old = 22 * pages_per_request(2 * MNBT) * 47808
    assert old.refusal(need_old, L, MNBT) is None
    assert old.refusal(need_old - 1, L, MNBT) is not None


def test_029_splits_a_balanced_full_bucket():
    """A model with as many C4 as C128 layers (20 + 20, 2 SWA-only): the full bucket is
    balanced (20 / 20 / 20) with three sizes, floor 20; repeats = _approximate_gcd([20, 42,
    20, 20], >= 20) = 21 (padding 1 + 0 + 1 + 1 = 3; 20 gives 0 + 18 + 0 + 0): the full
    bucket stays one group (cdiv(20, 21)), SWA 42 splits in 2 of 21."""
    m = V4Attention(compress_ratios=(0, 0) + (4, 128) * 20)
    lay = v4_layout(m, (0, 29, 0))
    assert sorted(len(g.pages) for g in lay.groups) == [20, 21, 21, 40, 60]


def test_later_releases_are_refused():
    with pytest.raises(ValueError, match="'version' must be below 0.34.0"):
        v4_layout(FLASH, (0, 34, 0))


# A public 0.27.1 deployment (2 x DGX Spark, TP 2, DeepSeek-V4-Flash-0731, fp8_ds_mla, block 256,
# max_num_batched_tokens 8192, --async-scheduling), its ops note quoting the report in prose:
# https://github.com/nepenth/deepseek-v4-flash-gb10/blob/a53fa250d88211423d2818db102eb5aa06e67a4c/docs/OPS_400K_KVMEM_2026-08-13.md
# "First 400k boot without `--kv-cache-memory`: 18.18 GiB / **944,766** tokens (2.36×)" and
# "`--kv-cache-memory=28235618304` (26.3 GiB ...) Result: **1,366,743 tokens · 3.42×**".
# The 1M boot of the same serve, quoted as log lines, is an engine_logs case
# (benchmarks/engine_logs/vllm-nepenth-gb10-v4-flash-0731-1m-kvmem.toml).
def test_0271_at_400k_reproduces_the_ops_note():
    lay = v4_layout(FLASH, (0, 27, 1))
    n = 28235618304 // 1_002_240
    pages = cdiv(400000, 256) + 2 * 259 + 4099 + 2065  # sliding ones at 2 x 8192 in flight
    assert sliding_pages(2 * 8192) == 2 * 259 + 4099 + 2065  # windows end below L either way
    assert lay.num_blocks(28235618304) == n == 28172
    assert lay.gpu_kv_cache_tokens(n, 400000, 8192) == int(n / pages * 400000) == 1_366_743
    assert f"{lay.max_concurrency(n, 400000, 8192):.2f}" == "3.42"
    lo = lay.num_blocks(int(18.175 * 2**30))
    hi = lay.num_blocks(int(18.185 * 2**30))
    tokens = [lay.gpu_kv_cache_tokens(k, 400000, 8192) for k in (lo, hi)]
    assert tokens[0] <= 944_766 <= tokens[1]
