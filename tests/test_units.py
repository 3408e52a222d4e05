"""Human formatting: every expected string is worked out by hand in the comment beside it."""

import pytest

from calc.units import (
    fmt_bytes,
    fmt_duration,
    fmt_flops,
    fmt_params,
    group,
    human_count,
    iec_bytes,
    percent,
    plural,
    si_bytes,
    si_flops,
)

# --- bytes: SI (10^3) and IEC (2^10) -----------------------------------------------------------


def test_llama_65b_cache_in_both_units():
    n = 2 * 80 * 64 * 128 * 2048 * 2  # LLaMA 65B, 2048 tokens, fp16 = 5,368,709,120 B
    # 5368709120 / 10^9 = 5.3687...; 5368709120 / 2^30 = 5 exactly
    assert fmt_bytes(n) == "5,368,709,120 B = 5.37 GB = 5.00 GiB"


def test_llama_3_70b_cache_in_both_units():
    n = 2 * 80 * 8 * 128 * 8192 * 2  # 2,684,354,560 B
    assert si_bytes(n) == "2.68 GB"  # 2.684354560
    assert iec_bytes(n) == "2.50 GiB"  # 2684354560 / 2^30 = 2.5


@pytest.mark.parametrize(
    ("n", "si", "iec"),
    [
        (0, "0 B", "0 B"),
        (999, "999 B", "999 B"),
        (1000, "1.00 kB", "1000 B"),  # SI steps at 1000, IEC at 1024
        (1024, "1.02 kB", "1.00 KiB"),
        (1536, "1.54 kB", "1.50 KiB"),
        (10**6, "1.00 MB", "976.56 KiB"),  # 10^6 / 1024 = 976.5625
        (2**40, "1.10 TB", "1.00 TiB"),  # 1,099,511,627,776 B
        (10**15, "1.00 PB", "909.49 TiB"),  # 10^15 / 2^40 = 909.4947...
    ],
)
def test_byte_prefixes(n, si, iec):
    assert si_bytes(n) == si
    assert iec_bytes(n) == iec


def test_small_byte_counts_show_only_the_exact_figure():
    assert fmt_bytes(512) == "512 B"
    assert fmt_bytes(4096) == "4,096 B = 4.10 kB = 4.00 KiB"


# --- FLOPs and parameters ----------------------------------------------------------------------


def test_flops():
    assert si_flops(2 * 10**15) == "2.00 PFLOPs"
    assert fmt_flops(21_474_836_480) == "21,474,836,480 FLOPs = 21.47 GFLOPs"
    assert fmt_flops(12) == "12 FLOPs"
    # a per-token average need not be whole: one decimal in the exact part
    assert fmt_flops(149_742_157_824.5) == "149,742,157,824.5 FLOPs = 149.74 GFLOPs"


@pytest.mark.parametrize(
    ("n", "short"),
    [
        (70_553_706_496, "70.55B"),
        (124_439_808, "124.44M"),  # GPT-2 small
        (7_000, "7.00K"),
        (1_500_000_000_000, "1.50T"),
        (999, "999"),
    ],
)
def test_human_count(n, short):
    assert human_count(n) == short


def test_fmt_params():
    assert fmt_params(70_553_706_496) == "70,553,706,496 (70.55B)"
    assert fmt_params(42) == "42"


def test_group_and_percent():
    assert group(5_368_709_120) == "5,368,709,120"
    assert group(2.0) == "2"
    assert group(1234.56) == "1,234.6"
    assert percent(1 - 8 / 64) == "87.50%"
    assert percent(1 - 1 / 48) == "97.92%"  # 0.979166...


# --- past the largest unit, durations, plurals ---------------------------------------------------


def test_sizes_past_the_largest_unit_go_scientific_not_20_digit_mantissas():
    # 2,684,354,560 B per sequence x 10^30 sequences: past YB (10^24), no float artefacts
    assert si_bytes(2_684_354_560 * 10**30) == "2.68e+39 B"
    assert human_count(2.1e21) == "2.10e+21"  # past T (10^12) x 1000
    assert human_count(999 * 10**12) == "999.00T"  # the largest unit is still used below 1000


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0.02835, "28.35 ms"),  # 28.35 ms
        (2.3256, "2.33 s"),
        (90, "1.50 min"),  # 90 / 60
        (7200, "2.00 h"),  # 7200 / 3600
        (3 * 86400, "3.00 days"),
        # the 1,567,194,725,094 ms = 1,567,194,725.094 s / 31,557,600 s per Julian year
        (1_567_194_725.094, "49.66 years"),
        (1e30, "3.17e+22 years"),  # 1e30 / 31,557,600
    ],
)
def test_durations_read_in_the_unit_that_fits(seconds, text):
    assert fmt_duration(seconds) == text


def test_plural_agrees_with_the_count():
    assert plural(1, "claim") == "1 claim"
    assert plural(3, "claim") == "3 claims"
    assert plural(2, "query head per KV head", "query heads per KV head") == (
        "2 query heads per KV head"
    )
