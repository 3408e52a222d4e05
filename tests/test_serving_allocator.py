"""calc.serving.allocator: torch's CUDA caching allocator and what vLLM allocates at load.

The constructed cases are worked out by hand from c10/cuda/CUDACachingAllocator.cpp
(pytorch/pytorch@001074d25084fdb87a799823e395a50f5ec044d3): round_size to 512 B; the small pool
for <= 1 MiB (2 MiB segments, split when >= 512 B remain); the large pool above it (20 MiB
segments under 10 MiB, else the request rounded up to 2 MiB; split only when > 1 MiB remains,
else the whole block is allocated); best fit among cached free blocks; freed neighbours merge.
The log cases' expected figures are the logs' own lines."""

from pathlib import Path

import pytest

from calc.serving.allocator import Free, caching_allocator
from calc.serving.evidence import _settings, case_spec, load_cases
from calc.serving.load_events import attention_scalars
from calc.serving.plan import engine_plan

MiB, GIB = 2**20, 2**30
KiB = 1024
FOLDER = Path(__file__).parent.parent / "benchmarks" / "engine_logs"
CASES = {c["id"]: c for c in load_cases(FOLDER)}


def test_small_requests_round_to_512_bytes_in_one_2_mib_segment():
    assert caching_allocator([1]) == (512, 2 * MiB)
    assert caching_allocator([1000, 8192, 1 * MiB]) == (1024 + 8192 + MiB, 2 * MiB)
    # 1 MiB + 1 KiB no longer fits the first segment's 1 MiB - 1 KiB - 8 KiB: a second one
    assert caching_allocator([1000, 8192, MiB, KiB]) == (1024 + 8192 + MiB + KiB, 2 * MiB)
    assert caching_allocator([1000, 8192, MiB, MiB]) == (1024 + 8192 + 2 * MiB, 4 * MiB)


def test_a_large_request_keeps_its_segment_unless_over_1_mib_is_left():
    # 35 MiB: a 36 MiB segment, 1 MiB left (not > kSmallSize): the whole 36 MiB is allocated
    assert caching_allocator([35 * MiB]) == (36 * MiB, 36 * MiB)
    # 24.5 MiB: a 26 MiB segment, 1.5 MiB left: split, 24.5 MiB allocated
    assert caching_allocator([24 * MiB + 512 * KiB]) == (24 * MiB + 512 * KiB, 26 * MiB)
    # 11 MiB + 1 B rounds to 11 MiB + 512 B; 12 MiB segment, 1 MiB - 512 B left: whole block
    assert caching_allocator([11 * MiB + 1]) == (12 * MiB, 12 * MiB)
    # a multiple of 2 MiB is exact
    assert caching_allocator([224 * MiB]) == (224 * MiB, 224 * MiB)


def test_requests_of_1_to_10_mib_share_20_mib_segments():
    assert caching_allocator([3 * MiB, 3 * MiB]) == (6 * MiB, 20 * MiB)
    # 15 MiB then 1.5 MiB: 3.5 MiB would be left of the free 5 MiB: split, 1.5 MiB allocated
    assert caching_allocator([9 * MiB, 6 * MiB, 3 * MiB // 2]) == (33 * MiB // 2, 20 * MiB)
    # 18 MiB then 1.5 MiB: 0.5 MiB would be left (not > 1 MiB): the whole 2 MiB is allocated
    assert caching_allocator([9 * MiB, 9 * MiB, 3 * MiB // 2]) == (20 * MiB, 20 * MiB)


def test_a_large_remainder_serves_a_later_request_whole():
    # 24.5 MiB leaves a 1.5 MiB block; 1.25 MiB takes it (0.25 MiB left): 1.5 MiB allocated
    got = caching_allocator([24 * MiB + 512 * KiB, 5 * MiB // 4])
    assert got == (26 * MiB, 26 * MiB)


def test_frees_are_cached_merged_and_reused_by_best_fit():
    # two 3 MiB blocks of one 20 MiB segment, freed: they merge back with the free 14 MiB, and
    # 19.5 MiB then takes the whole segment (0.5 MiB left, not split)
    events = [3 * MiB, 3 * MiB, Free(0), Free(1), 19 * MiB + 512 * KiB]
    assert caching_allocator(events) == (20 * MiB, 20 * MiB)
    # free 40 and 30 MiB segments; 28 MiB takes the 30 MiB one (best fit) and splits it
    events = [40 * MiB, 30 * MiB, Free(0), Free(1), 28 * MiB]
    assert caching_allocator(events) == (28 * MiB, 70 * MiB)
    # a freed 36 MiB block taken by 35.5 MiB: 0.5 MiB left, the whole 36 MiB allocated
    events = [35 * MiB + 512 * KiB, Free(0), 35 * MiB + 512 * KiB]
    assert caching_allocator(events) == (36 * MiB, 36 * MiB)


def test_the_r1_distill_layer_one_reuses_the_rotary_temporaries():
    # vllm#13061's first layers at TP 2 (qkv 35 MiB, o 25 MiB; the rotary table's float32
    # temporaries freqs / cos / sin 32 MiB and cat 64 MiB, freed after the bf16 table takes
    # freqs' block): layer 1's qkv and o then fit the free 64 MiB block with > 1 MiB left, so
    # they cost 35 + 25 MiB instead of 36 + 26.
    t = 512 * KiB
    rope = [t, 32 * MiB, 32 * MiB, 32 * MiB, 64 * MiB, Free(2), Free(3), Free(4), Free(5)]
    rope += [32 * MiB, Free(6)]
    layer0 = [35 * MiB, 25 * MiB] + rope
    events = layer0 + [35 * MiB, 25 * MiB]
    assert caching_allocator(events)[0] == (36 + 26 + 32 + 35 + 25) * MiB


def test_bad_events_are_refused():
    with pytest.raises(ValueError, match="'events' frees request 0 twice"):
        caching_allocator([MiB, Free(0), Free(0)])
    with pytest.raises(ValueError, match="'events' must ask for a positive number of bytes"):
        caching_allocator([0])


def test_attention_scalars_by_release():
    # Attention.__init__'s fp32 scalars (vllm/attention/layer.py of the sdists): none in 0.6.6;
    # _k_scale, _v_scale, k_range, v_range in 0.7.0; + _q_scale, q_range in 0.8.3; + _prob_scale
    # in 0.8.5
    assert [attention_scalars(v) for v in ((0, 6, 6), (0, 7, 2), (0, 8, 3), (0, 19, 0))] == [
        0,
        4,
        6,
        7,
    ]


def _weights(case_id: str) -> int:
    case = CASES[case_id]
    spec, s = case_spec(case), _settings(case)
    return engine_plan(spec, "h100-sxm", available_kv_gib=1.0, **s).weights_bytes


def test_vllm_13061_r1_distill_qwen_14b_tp2_to_the_printed_digit():
    # "Loading model weights took 13.9476 GB" (V0, %.4f of GiB), vllm#13061
    assert f"{_weights('vllm-13061-r1-distill-qwen-14b-tp2') / GIB:.4f}" == "13.9476"


def test_llmd_qwen25_7b_weights_to_the_printed_digit():
    # "Model loading took 14.25 GiB" / "7.12" / "3.55" (llm-d-planner d3121e0, vLLM 0.19.0)
    for case_id, logged in (
        ("llmd-019-qwen25-7b-tp1-8192", "14.25"),
        ("llmd-019-qwen25-7b-tp2-8192", "7.12"),
        ("llmd-019-qwen25-7b-tp4-8192", "3.55"),
        ("llmd-019-qwen25-72b-tp2-8192", "67.80"),
        ("llmd-019-phi4-tp1-8192", "27.39"),
    ):
        assert f"{_weights(case_id) / GIB:.2f}" == logged, case_id


def test_llama31_8b_logs_stay_exact():
    # vllm#10517 "Loading model weights took 14.9888 GB" (0.6.4); llm-d 0.19.0 "14.99 GiB"
    assert f"{_weights('vllm-10517-llama31-8b-3090-20k') / GIB:.4f}" == "14.9888"
    assert f"{_weights('llmd-019-llama31-8b-tp1-8192') / GIB:.2f}" == "14.99"


def test_empty_cache_releases_only_segments_with_no_block_in_use():
    """torch.cuda.empty_cache() (release_cached_blocks) frees every segment none of whose blocks
    is allocated: a 30 MiB request takes a 30 MiB segment; freed, empty_cache returns it; a
    12 MiB request still alive keeps its 12 MiB segment (> 10 MiB: rounded to 2 MiB)."""
    MiB = 2**20
    events = [30 * MiB, 12 * MiB, Free(0)]
    assert caching_allocator(events) == (12 * MiB, 42 * MiB)
    assert caching_allocator(events, empty_cache=True) == (12 * MiB, 12 * MiB)
