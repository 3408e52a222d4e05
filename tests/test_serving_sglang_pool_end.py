"""SGLang's "Memory pool end. avail mem" (calc.serving.sglang_pool_end): the pools' segments
against torch's allocator rules and against published start-up logs."""

from __future__ import annotations

import random

import pytest

from calc.serving.allocator import caching_allocator
from calc.serving.hardware import resolve_hardware
from calc.serving.logs import parse_log
from calc.serving.plan import engine_plan, prepare
from calc.serving.sglang_memory import sglang_load_extra_bytes
from calc.serving.sglang_pool_end import (
    not_modelled,
    pool_bytes,
    pool_tensors,
    reserved_bytes,
    rope_delta_bytes,
)
from calc.serving.sglang_requests import request_pool_size
from calc.serving.sglang_swa_pool_end import swa_reserved_bytes

MiB = 1 << 20


def test_reserved_bytes_follows_the_caching_allocator_simulator():
    # the closed form counts copies that no free block fits at once; the simulator walks every
    # request (calc.serving.allocator, from c10/cuda/CUDACachingAllocator.cpp's rules)
    rng = random.Random(7)
    for _ in range(2000):
        tensors = [
            (
                rng.choice(
                    [
                        rng.randint(1, 3 * MiB),
                        rng.randint(MiB, 12 * MiB),
                        rng.randint(10 * MiB, 900 * MiB),
                    ]
                ),
                rng.randint(1, 5),
            )
            for _ in range(rng.randint(1, 5))
        ]
        events = [b for b, c in tensors for _ in range(c)]
        assert reserved_bytes(tensors) == caching_allocator(events)[1], tensors


@pytest.mark.parametrize(
    ("tensors", "want"),
    [
        # 10 MiB or more: rounded up to 2 MiB each (kRoundLarge)
        ([(906_754_048, 64)], 64 * 433 * 2 * MiB),
        # 1 MiB < size < 10 MiB: a 20 MiB segment (kLargeBuffer), shared while the rest fits
        ([(3_542_000, 1)], 20 * MiB),
        ([(6 * MiB, 3)], 20 * MiB),  # 18 MiB in one segment, 2 MiB left (> 1 MiB: split off)
        ([(6 * MiB, 4)], 40 * MiB),
        # at most 1 MiB: a 2 MiB segment of the small pool (kSmallBuffer)
        ([(512, 3)], 2 * MiB),
        # a 2 MiB-rounded segment's tail is split off when over 1 MiB and takes a later request:
        # 21.5 MiB in a 22 MiB segment leaves 0.5 MiB (kept in the block): 1 MiB + 1 B needs a
        # 20 MiB segment; 20.25 MiB leaves 1.75 MiB, split off, which holds it
        ([(21 * MiB + MiB // 2, 1), (MiB + 1, 1)], 22 * MiB + 20 * MiB),
        ([(20 * MiB + MiB // 4, 1), (MiB + 1, 1)], 22 * MiB),
    ],
)
def test_segments_written_out(tensors, want):
    assert reserved_bytes(tensors) == want


# --- the pools' tensors, release by release (SGLang wheels, read for calc.serving.sglang_pool_end)

GIB = 2**30


def _prepared(model="llama-3.1-8b", gpu="h100-sxm", **settings):
    spec, hw, cfg, lay, *_ = prepare(model, gpu, "sglang", **settings)
    return spec, cfg, lay


def test_docs_llama31_8b_pool_written_out():
    # SGLang's docs (v0.4.1.post7, H100): "Load weight end ... avail mem=63.72 GB", "Memory pool
    # end. avail mem=8.34 GB", max_total_num_tokens=444500, max_running_requests=2049,
    # context_len=131072. 32 layers x (K, V) of 444,501 rows x 8 kv heads x 128 x 2 B =
    # 910,338,048 B: 435 x 2 MiB each; req_to_token 2,049 x (131,072 + 4) x 4 B = 1,074,298,896 B:
    # 513 x 2 MiB; the free list an int32 CPU tensor up to 0.4.3.post4; no RoPE rebuild
    spec, cfg, lay = _prepared(version="0.4.1.post7")
    v = (0, 4, 1, 7)
    size = request_pool_size(v, 444_500, 131_072, cfg)
    assert size == 2049  # E = 2048 (int(444,500 / 131,072 x 512) = 1,736, clamped) + 1
    got = pool_bytes(v, spec, lay, cfg, 444_500, size, 131_072)
    assert got == 64 * 435 * 2 * MiB + 513 * 2 * MiB
    assert round(63.72 - got / GIB, 2) == 8.34


def test_qwen3_32b_b200_pool_written_out():
    # sglang#22537 (v0.5.10.post1, B200, TP 4, 64-token pages): TP0 "avail mem=160.78 GB" after
    # the weights, "Memory pool end. avail mem=25.40 GB", #tokens 2,206,208. Qwen3-32B's RoPE
    # table, 40,960 x 128 x 4 B (float32 on CUDA) = 20 MiB, rebuilt at ceil128(40,960 + 256) =
    # 41,216 rows = 21,102,592 B: 11 x 2 MiB; the request pool min(4096, T // 2) = 4,096 rows
    # (0.5.10: no padding row) x 40,964 x 4 B = 671,154,176 B: 321 x 2 MiB; 128 buffers of
    # (2,206,208 + 64) x 2 kv heads x 128 x 2 B = 1,129,611,264 B: 539 x 2 MiB; the 34,472-page
    # int64 free list (275,776 B) and the pointer tables share one 2 MiB small segment
    spec, cfg, lay = _prepared("qwen3-32b", "b200", version="0.5.10.post1", tensor_parallel_size=4)
    cfg = cfg.model_copy(update={"page_size": 64})
    v = (0, 5, 10, 1)
    size = request_pool_size(v, 2_206_208, 40_960, cfg)
    assert size == 4096
    got = pool_bytes(v, spec, lay, cfg, 2_206_208, size, 40_960)
    want = (22 - 20) * MiB + 321 * 2 * MiB + 128 * 539 * 2 * MiB + 2 * MiB
    assert got == want
    assert round(160.78 - got / GIB, 2) == 25.40


@pytest.mark.parametrize(
    ("version", "rows"),
    [
        ("0.4.6.post5", 2049),  # ReqToTokenPool(size=max_num_reqs + 1)
        ("0.4.7", 2048),  # size=max_num_reqs
        ("0.5.10", 2048),  # the resolved max_running_requests
        ("0.5.11", 2049),  # the pool allocates size + 1 rows (padding row 0)
        ("0.5.23", 2049),
    ],
)
def test_request_table_rows_by_release(version, rows):
    spec, cfg, lay = _prepared(version=version, max_model_len=131_072)
    v = cfg.version_tuple
    T = 400_000  # int(T / 131,072 x 512) = 1,562: E = 2,048 in every release
    size = request_pool_size(v, T, 131_072, cfg)
    tensors = pool_tensors(v, lay, 1, T, size, 131_072)
    assert tensors[0] == (rows * (131_072 + 4) * 4, 1)


def test_free_list_moves_to_the_device_in_0_4_4():
    spec, cfg, lay = _prepared(version="0.4.3.post4")
    T = 100_000
    old = pool_tensors((0, 4, 3, 4), lay, 1, T, 2049, 8192)
    new = pool_tensors((0, 4, 4, 0), lay, 1, T, 2049, 8192)
    assert new[: len(old)] == old  # same request table and buffers (T + 1 rows = T + P, P = 1)
    assert new[len(old) :] == [(T * 8, 1)]  # arange(1, T + 1, int64) on the device
    paged = pool_tensors((0, 4, 4, 0), lay, 16, T, 2049, 8192)
    assert paged[len(old) :] == [(T // 16 * 8, 1), (8, 1)]  # free_pages, ret_values
    assert pool_tensors((0, 5, 3, 0), lay, 16, T, 2049, 8192)[-1] == (T // 16 * 8, 1)


def test_0_5_23_fuses_k_and_v_into_one_tensor_a_layer():
    spec, cfg, lay = _prepared(version="0.5.22")
    k = (100_000 + 1) * 8 * 128 * 2
    assert pool_tensors((0, 5, 22, 0), lay, 1, 100_000, 2048, 8192)[1] == (k, 64)
    assert pool_tensors((0, 5, 23, 0), lay, 1, 100_000, 2048, 8192)[1] == (2 * k, 32)


def test_rope_rebuild_from_0_5_6_only_when_the_context_outgrows_the_table():
    spec, *_ = _prepared()
    # Llama-3.1: 131,072 x 128 x 4 B = 64 MiB, rebuilt at 131,328 rows = 67,239,936 B: 66 MiB
    assert rope_delta_bytes(spec, (0, 5, 6, 0), 131_072) == 2 * MiB
    assert rope_delta_bytes(spec, (0, 5, 5, 3), 131_072) == 0
    assert rope_delta_bytes(spec, (0, 5, 6, 0), 8192) == 0  # 8,448 rows < 131,072


def test_mla_pool_is_one_latent_buffer_a_layer():
    # DeepSeek-V3 at TP 8: 61 layers of (T + P) x (512 + 64) x 2 B, and the data_ptrs table
    spec, cfg, lay = _prepared("deepseek-v3", "h200", version="0.5.9", tensor_parallel_size=8)
    tensors = pool_tensors((0, 5, 9, 0), lay, 1, 500_000, 2048, 163_840)
    assert tensors[1] == ((500_000 + 1) * 576 * 2, 61)
    assert tensors[2] == (61 * 8, 1)


def test_derived_plan_prints_the_pool_end_line():
    p = engine_plan("llama-3.1-8b", "h100-sxm", "sglang", version="0.5.9")
    line = next(x for x in p.log_lines if x.startswith("Memory pool end."))
    assert line == f"Memory pool end. avail mem={p.pool_end_free_bytes / GIB:.2f} GB"
    # the free memory after the weights and the load, less the pools
    pre = p.total_memory_bytes - p.non_torch_bytes
    after = pre - p.weights_bytes - sglang_load_extra_bytes()
    assert p.pool_end_free_bytes == after - p.pool_allocated_bytes
    # the pools hold the K / V buffers and the request table beside them
    assert p.pool_allocated_bytes > 2 * p.k_size_gib * GIB
    order = [x.split(".")[0] for x in p.log_lines]
    assert order.index("Memory pool end") == order.index("KV Cache is allocated") + 1


def test_given_budget_has_the_pools_but_no_free_figure():
    p = engine_plan("llama-3.1-8b", "h100-sxm", "sglang", available_kv_gib=40, version="0.5.9")
    assert p.pool_allocated_bytes is not None and p.pool_end_free_bytes is None
    assert not any(x.startswith("Memory pool end.") for x in p.log_lines)


@pytest.mark.parametrize(
    ("model", "settings", "why"),
    [
        ("gemma-3-27b", {"version": "0.5.9"}, "a multimodal model"),
        ("qwen3-next-80b-a3b", {"version": "0.5.9", "tensor_parallel_size": 4}, "mamba"),
        ("llama-3.1-8b", {"version": "0.5.9", "pipeline_parallel_size": 2}, "pipeline"),
    ],
)
def test_pools_kvcalc_does_not_model_carry_no_figure(model, settings, why):
    spec, cfg, lay = _prepared(model, **settings)
    assert why in not_modelled(spec, lay, cfg)
    p = engine_plan(model, "h100-sxm", "sglang", **settings)
    assert p.pool_allocated_bytes is None and p.pool_end_free_bytes is None


def test_the_logs_pool_end_is_read_on_the_load_lines_rank():
    # sglang#22537 quotes TP0's "Load weight end" and every rank's "Memory pool end"
    text = (
        "[t TP0] Load weight end. elapsed=1 s, type=X, avail mem=160.78 GB, mem usage=15.50 GB.\n"
        "[t TP1] Memory pool end. avail mem=25.37 GB\n"
        "[t TP0] Memory pool end. avail mem=25.40 GB\n"
    )
    assert parse_log(text)["sglang_pool_end_gib"] == 25.40
    assert parse_log("[t] Memory pool end. avail mem=8.34 GB")["sglang_pool_end_gib"] == 8.34


def test_calibrate_puts_kvcalcs_pool_end_beside_the_logged_one():
    from calc.serving.calibrate import calibrate

    # SGLang's docs log (v0.4.1.post7, H100): "Memory pool end. avail mem=8.34 GB"
    text = (
        "[2025-01-23 19:35:15 TP0] Load weight begin. avail mem=78.81 GB\n"
        "[2025-01-23 19:35:20 TP0] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, "
        "avail mem=63.72 GB\n"
        "[2025-01-23 19:35:20 TP0] KV Cache is allocated. K size: 27.13 GB, V size: 27.13 GB.\n"
        "[2025-01-23 19:35:20 TP0] Memory pool end. avail mem=8.34 GB\n"
        "[2025-01-23 19:35:27 TP0] max_total_num_tokens=444500, max_prefill_tokens=16384, "
        "max_running_requests=2049, context_len=131072\n"
    )
    cal = calibrate(text, "llama-3.1-8b", "h100-sxm", version="0.4.1.post7")
    (row,) = [r for r in cal.rows if r["figure"] == "SGLang Memory pool end, avail GiB"]
    assert row["logged"] == 8.34
    # calibrated on the log's own start-up memory, kvcalc's pool end lands within 0.05 GiB
    again = engine_plan(
        "llama-3.1-8b", "h100-sxm", "sglang", version="0.4.1.post7", calibration=cal.learned
    )
    assert abs(again.pool_end_free_bytes / GIB - 8.34) < 0.05


def test_dashboard_stack_shows_the_pool_tables():
    from dashboard.capacity_charts import engine_memory_chart
    from dashboard.engine_data import engine_stack_frame

    p = engine_plan("llama-3.1-8b", "h100-sxm", "sglang", version="0.5.9")
    df = engine_stack_frame(p)
    parts = dict(zip(df["category"], df["bytes"], strict=True))
    assert parts["pool tables"] == p.pool_allocated_bytes - p.available_kv_cache_bytes
    assert df["bytes"].sum() == p.total_memory_bytes
    # what stays free is the Memory pool end figure plus the load's own extra
    assert parts["free"] == p.pool_end_free_bytes + sglang_load_extra_bytes()
    engine_memory_chart(df).to_dict()
    vllm = engine_stack_frame(engine_plan("llama-3.1-8b", "h100-sxm", "vllm"))
    assert "pool tables" not in set(vllm["category"])


def test_stack_caption_gives_the_pool_end_figure():
    from dashboard.engine_data import pool_tables_bytes, stack_caption

    p = engine_plan("llama-3.1-8b", "h100-sxm", "sglang", version="0.5.9")
    text = stack_caption(p)
    assert f'"Memory pool end" leaves {p.pool_end_free_bytes / GIB:.2f} GiB' in text
    assert f"{pool_tables_bytes(p) / GIB:.2f} GiB beyond the KV budget" in text
    given = engine_plan("llama-3.1-8b", "h100-sxm", "sglang", available_kv_gib=20)
    assert "beyond the KV budget" in stack_caption(given)
    assert "Memory pool end" not in stack_caption(given)
    assert "Pool tables" not in stack_caption(engine_plan("llama-3.1-8b", "h100-sxm", "vllm"))


def test_sliding_window_pools_written_out():
    # gpt-oss-20b at TP 1 (12 full + 12 sliding layers, 8 KV heads x 64, bf16), SGLang 0.5.17
    # (mem_cache/swa_memory_pool.py: the full layers' pool first), 100,000 full and 80,000
    # sliding tokens, page 1, a request pool of 2,048 (+ 1 padding row), context 131,072:
    # - req_to_token 2,049 x 131,076 x 4 B = 1,074,298,896 B: 513 x 2 MiB
    # - 24 full buffers of 100,001 x 1,024 B = 102,401,024 B: 49 x 2 MiB each
    # - 24 sliding buffers of 80,001 x 1,024 B = 81,921,024 B: 40 x 2 MiB each
    # - small pool: the 8 pointer tables (512 B blocks) and the 800,000 / 640,000 B free lists
    #   fill one 2 MiB segment to 652,800 B free; the zeros(100,001) int64 temporary opens a
    #   second, where the 800,016 B mapping follows it; clear()'s new sliding list takes the
    #   first segment's 652,800 B, the new full list the freed temporary's block: two segments
    spec, cfg, lay = _prepared("gpt-oss-20b", version="0.5.17")
    assert lay.sglang_swa == (12, 12) and lay.kv_heads * lay.head_size * lay.kv_bytes == 1024
    got = swa_reserved_bytes((0, 5, 17, 0), lay, 1, 100_000, 80_000, 2048, 131_072)
    assert got == (513 + 24 * 49 + 24 * 40 + 2 * 1) * 2 * MiB
    # up to 0.5.16 the sliding pool is built first: the same segments here
    assert swa_reserved_bytes((0, 5, 16, 0), lay, 1, 100_000, 80_000, 2048, 131_072) == got


def test_sliding_window_plan_prints_the_pool_end():
    p = engine_plan("gpt-oss-120b", "h100-sxm", "sglang", version="0.5.17")
    assert p.pool_end_free_bytes is not None
    i = next(i for i, x in enumerate(p.log_lines) if x.startswith("SWAKVPool mem usage"))
    assert p.log_lines[i + 1] == f"Memory pool end. avail mem={p.pool_end_free_bytes / GIB:.2f} GB"


def test_a_sliding_window_log_without_its_swa_count_is_not_modelled():
    from calc.serving.evidence_sglang_pool import pool_end_checks

    spec, cfg, lay = _prepared("gpt-oss-20b", version="0.5.17")
    case = {
        "id": "gpt-oss-no-swa-count",
        "logged": {
            "sglang_avail_after_weights_gib": 60.0,
            "sglang_pool_end_gib": 10.0,
            "max_total_num_tokens": 100_000,
        },
    }
    (check, *_) = pool_end_checks(
        case, spec, resolve_hardware("h100-sxm"), {"version": "0.5.17"}, cfg, lay
    )
    assert check.verdict == "not modelled"
    with pytest.raises(ValueError, match="'swa'"):
        pool_bytes((0, 5, 17, 0), spec, lay, cfg, 100_000, 2048, 131_072)
