"""kvcalc against the committed public start-up logs (benchmarks/engine_logs/*.toml).

The expected figures are the logs' own lines (URL in each file); kvcalc must reproduce every
block / token / concurrency count it models, given the logged available memory.
"""

from pathlib import Path

import pytest

from calc.serving.calibrate import calibrate
from calc.serving.evidence import case_spec, evaluate, load_cases
from calc.serving.logs import parse_log
from calc.serving.plan import engine_plan

FOLDER = Path(__file__).parent.parent / "benchmarks" / "engine_logs"
CASES = load_cases(FOLDER)
# known misses, each with its reason (the report lists them too)
EXPECTED_MISSES: set[tuple[str, str]] = {
    # SGLang v0.5.19 (llm-d README2, H100, 0.90): the logged 39,078 rows are 26 (6.5 MiB) under
    # 39,104..39,153 from "Load weight end"'s 17.40 + 61.07 GB: v0.5.19 takes the total in
    # distributed/bootstrap.py, before load_model prints "Load weight begin"; what the memory
    # saver / gVisor allocate between the readings is not logged (the case's note)
    ("sglang-llmd-snapshot-qwen3-32b-h100-0519", "#tokens (from the logged avail mem)"),
    # sglang#22537 (v0.5.10, B200 TP4): the pool follows the minimum free memory over ranks;
    # the quoted Load weight end is TP0's, TP1 / TP2 had 0.03 GB less (Memory pool end lines):
    # tests/test_serving_sglang_defaults_logs.py checks the interval from their 160.75 GB
    ("sglang-22537-qwen3-32b-b200-tp4", "#tokens (from the logged avail mem)"),
    # sglang#4760 (the PR branch after v0.4.4.post1, H100): its pools took 55.22 +- 0.01 GiB,
    # 0.073 GiB more than their tensors' segments (55.1465: the case's note); the same sums hold
    # the 0.4.1 - 0.4.3 and 0.5.10 logs to 0.01 GiB. Not explained by the source: 0.4.4's pools
    # are the first to fill their buffers (torch.zeros, a kernel) and to create a CUDA stream,
    # and no source sizes what either costs the driver
    (
        "sglang-4760-llama31-8b-h100-tp1",
        "Memory pool end, avail GiB (from the logged Load weight end)",
    ),
}


def test_at_least_twenty_public_logs_cover_the_categories():
    assert len(CASES) >= 20
    cats = {c for case in CASES for c in case.get("categories", [])}
    for want in ("dense-gqa", "moe", "mla", "sliding-hybrid", "fp8-kv", "tp>1", "pp>1", "sglang"):
        assert want in cats, want
    for case in CASES:
        # a GitHub issue / PR / file, or a public page that prints the log (a blog post)
        assert case["url"].startswith("https://")
        assert case["logged"]["excerpt"].strip()


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_every_modelled_count_matches_its_log(case):
    for check in evaluate(case):
        if check.figure in (
            "weights_gib",
            "available_kv_cache_gib",
            "activation_gib",
            "non_torch_gib",
            "suggested --kv-cache-memory, GiB",
            "Memory pool end, avail GiB",
        ):
            continue  # first-principles estimates: reported by benchmarks/engine_logs.py
        if (check.case, check.figure) in EXPECTED_MISSES:
            assert check.verdict == "miss"
            continue
        if check.verdict == "other rank":  # the case's comments give the evidence
            assert case["logged"].get("token_line_other_rank"), check
            continue
        assert check.verdict in ("exact", "in interval", "not modelled"), check


def test_vllm_21348_token_line_is_another_workers():
    # vllm#21348 (0.9.2, TP4): 178,880 tokens / 16 = 11,180 blocks of 94 layers x 16 tokens x
    # 1 KV head x 128 x 2 (K, V) x 2 B = 770,048 B a block: that worker had 8.018..8.019 GiB,
    # not the quoted 8.11 GiB (which allows 11,301..11,315 blocks)
    case = next(c for c in CASES if c["id"] == "vllm-21348-qwen3-235b-fp8-tp4")
    (check,) = [c for c in evaluate(case) if c.figure == "GPU KV cache size, tokens"]
    assert check.verdict == "other rank"
    block = 16 * 1 * 128 * 2 * 2 * 94
    low, high = 11180 * block / 2**30, 11181 * block / 2**30
    assert f"{low:.3f}..{high:.3f} GiB" in check.note
    assert check.kvcalc == (11301 * 16, 11315 * 16)


@pytest.mark.parametrize(
    ("cid", "peak", "weights"),
    [
        ("vllm-10517-llama31-8b-3090-20k", 17.06, 14.9888),
        ("vllm-10517-llama31-8b-3090-29k", 17.98, 14.9888),
    ],
)
def test_v0_profile_peak_matches_the_logged_torch_peak(cid, peak, weights):
    # vllm#10517 (0.6.4, V0, one RTX 3090): peak_torch_memory - "Loading model weights took";
    # kvcalc: T x 2 B x (3 x 4096 + 3 x 14336) with T = max_model_len (no chunked prefill)
    case = next(c for c in CASES if c["id"] == cid)
    (check,) = [c for c in evaluate(case) if c.figure == "activation_gib"]
    T = case["settings"]["max_model_len"]
    assert check.kvcalc == round(T * 2 * (3 * 4096 + 3 * 14336) / 2**30, 4)
    assert abs(check.kvcalc - (peak - weights)) / (peak - weights) < 0.01
    assert check.verdict == "within target"


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_the_excerpt_parses_to_the_logged_figures(case):
    got = parse_log(case["logged"]["excerpt"])
    keys = (
        "available_kv_cache_gib",
        "gpu_kv_cache_tokens",
        "num_gpu_blocks",
        "weights_gib",
        "max_total_num_tokens",
        "k_size_gib",
        "estimated_max_model_len",
        "kv_cache_capacity_tokens",
        "needed_kv_cache_gib",
        "kv_size_gib",
        "max_running_requests",
        "context_len",
        "max_mamba_cache_size",
        "attention_block_size",
        "mamba_page_padding_pct",
        "reserved_kv_gib",
        "init_free_gib",
        "sglang_pool_end_gib",
    )
    prose = case.get("prose_figures", [])  # a report's own words, quoted in the excerpt
    for key in keys:
        if key in prose:
            value = case["logged"][key]
            assert f"{value:,}" in case["logged"]["excerpt"], key
        elif key in case["logged"]:
            assert got.get(key) == case["logged"][key], key


def test_llama31_8b_weights_as_vllm_logs_them():
    # vllm#10517: "Loading model weights took 14.9888 GB" = 8,030,261,248 bf16 parameters
    # + the rotary table 131072 x 128 x 2 B
    want = (8_030_261_248 * 2 + 131072 * 128 * 2) / 2**30
    p = engine_plan("llama-3.1-8b", "rtx-3090", available_kv_gib=1, version="0.6.4")
    assert p.weights_bytes / 2**30 == pytest.approx(want, abs=1e-9)
    assert f"{want:.4f}" == "14.9888"


def test_calibrating_on_one_run_predicts_the_other():
    # vllm#10517: calibrate on the 20k run (activation per profiled token + non-torch memory),
    # predict the 29k run; the log says 2.89 GiB, 1478 blocks, 0.82x
    by_id = {c["id"]: c for c in CASES}
    run20 = by_id["vllm-10517-llama31-8b-3090-20k"]["logged"]["excerpt"]
    cal = calibrate(run20, "llama-3.1-8b", "rtx-3090", version="0.6.4")
    p = engine_plan(
        "llama-3.1-8b", "rtx-3090", version="0.6.4", max_model_len=29000, calibration=cal.learned
    )
    assert abs(p.available_kv_cache_bytes / 2**30 - 2.89) / 2.89 < 0.01
    assert abs(p.num_gpu_blocks - 1478) <= 0.01 * 1478
    assert p.refusal and p.refusal.startswith("The model's max seq len (29000) is larger")


def test_case_models_are_valid_specs():
    for case in CASES:
        if "model_config" in case or "preset" in case:
            assert case_spec(case).num_hidden_layers > 0


def test_qwen3_next_tp2_fp8_token_line_is_whole_attention_blocks():
    # vllm#26646 (0.11.0, Qwen3-Next-80B-A3B, TP2, fp8 KV): "GPU KV cache size: 90,048 tokens",
    # "Maximum concurrency for 215,040 tokens per request: 1.66x". Written out from vLLM 0.11
    # (models/config.py HybridAttentionMambaModelConfig, mamba_utils.gated_delta_net_state_shape,
    # kv_cache_utils._report_kv_cache_config / get_max_concurrency_for_kv_cache_config):
    conv = (2 * 16 * 128 + 32 * 128) // 2 * (4 - 1) * 2  # bf16 conv state on one of 2 ranks
    recurrent = 32 // 2 * 128 * 128 * 2
    per_token = 2 * (2 // 2) * 256 * 1  # K and V, one KV head a rank, fp8
    block = 16 * cdiv(conv + recurrent, 16 * per_token)
    assert block == 1072 and 90048 == 84 * block
    assert 90048 % (16 * cdiv(conv + recurrent, 16 * 2 * 256 * 2)) != 0  # not a bf16 cache
    per_request = cdiv(215040, block) + 3  # the full group + one page per linear group
    for blocks in (338, 339):  # blocks // 4 groups = 84, concurrency printed 1.66
        avail = blocks * block * per_token * 12  # 12 layers share a block slot
        p = engine_plan("qwen3-next-80b-a3b", "h100-sxm", available_kv_gib=avail / 2**30,
                        tensor_parallel_size=2, max_model_len=215040, kv_cache_dtype="fp8",
                        version="0.11.0")  # fmt: skip
        assert (p.num_gpu_blocks, p.gpu_kv_cache_tokens) == (blocks, 90048)
        assert f"{p.max_concurrency:.2f}" == f"{blocks / per_request:.2f}" == "1.66"


def cdiv(a, b):
    return -(-a // b)


def test_v07_profile_sum_counts_only_the_profile_runs_non_torch_increase():
    # oracle-samples troubleshooting-tips.md (vLLM 0.7.x V0, Llama-3.1-8B): "total_gpu_memory
    # (22.07GiB) x gpu_memory_utilization (0.90) = 19.86GiB"; "model weights take 14.99GiB;
    # non_torch_memory takes 0.05GiB; PyTorch activation peak memory takes 0.22GiB; the rest of
    # the memory reserved for KV Cache is 4.60GiB": 19.86 - 14.99 - 0.05 - 0.22 = 4.60, the
    # CUDA context (resident before the baseline snapshot) is not subtracted
    from calc.serving.memory import vllm_available_bytes

    got = vllm_available_bytes(22.07 * 2**30, 0.90, 14.99 * 2**30, 0.22 * 2**30, 0.05 * 2**30, 0)
    assert round(got / 2**30, 2) == 4.60
    case = next(c for c in CASES if c["id"] == "vllm-aqua-llama31-8b-131k-v0-profile")
    (check,) = [c for c in evaluate(case) if c.figure == "non_torch_gib"]
    assert abs(check.kvcalc - 0.05) <= 0.1  # the whole of 0.6.4 and before is not
    # 0.6.4 counted all non-torch memory: vllm-10517 logged "non_torch_memory=0.35GiB" for one
    # RTX 3090 (the CUDA context; no NCCL at TP 1). kvcalc's CUDA context is the calibration
    # taken on SGLang's H100 TP 1 start-up: 79.19 - 78.81 = 0.38 GiB
    old = engine_plan("llama-3.1-8b", "rtx-3090", version="0.6.4", max_model_len=20000)
    assert old.non_torch_bytes == int(0.38 * 2**30)
    assert abs(old.non_torch_bytes / 2**30 - 0.35) <= 0.1


def test_v0_profile_sentence_gives_the_weights_when_no_load_line_is_quoted():
    # vllm PR #14447 (V0 0.8.3, RTX 3090 x 16): "model weights take 21.21GiB; non_torch_memory
    # takes 0.20GiB; PyTorch activation peak memory takes 0.37GiB; the rest of the memory
    # reserved for KV Cache is 1.57GiB." (vllm/worker/worker.py, 0.8.3 sdist)
    line = (
        "INFO 04-12 08:21:19 [worker.py:267] model weights take 21.21GiB; non_torch_memory "
        "takes 0.20GiB; PyTorch activation peak memory takes 0.37GiB; the rest of the memory "
        "reserved for KV Cache is 1.57GiB."
    )
    got = parse_log(line)
    assert (got["weights_gib"], got["non_torch_gib"], got["activation_peak_gib"]) == (
        21.21, 0.20, 0.37,
    )  # fmt: skip
    # the load's 4-decimal line wins where both are quoted (it comes first in a log)
    both = "Loading model weights took 14.9888 GB\n" + line.replace("21.21", "14.99")
    assert parse_log(both)["weights_gib"] == 14.9888


def test_sglang_0513_pool_lines_parse():
    # the line's words from 0.5.13 (mem_cache/memory_pool.py _finalize_allocation_log, wheel)
    text = (
        "[2026-05-01 10:00:00 TP0] KV Cache is allocated. dtype: torch.bfloat16, #tokens: "
        "163840, K size: 10.00 GB, V size: 10.00 GB\n"
    )
    got = parse_log(text)
    assert (got["engine"], got["max_total_num_tokens"], got["k_size_gib"]) == (
        "sglang",
        163840,
        10.0,
    )


def test_sglang_sliding_window_pool_lines_parse():
    # 0.5.17+: the configurator's line, the full layers' pool first, then SWAKVPool's own
    # (pool_configurator.py, swa_memory_pool.py in the 0.5.23 wheel)
    text = "\n".join(
        [
            "Use sliding window memory pool. full_layer_tokens=1028015, swa_layer_tokens=822412",
            "Full KV Cache is allocated. dtype: torch.bfloat16, #tokens: 1028015, K size: 2.94 GB, "
            "V size: 2.94 GB",
            "SWA KV Cache is allocated. dtype: torch.bfloat16, #tokens: 822412, K size: 7.06 GB, "
            "V size: 7.06 GB",
            "SWAKVPool mem usage: 20.00 GB, swa size: 822412, full size: 1028015",
        ]
    )
    got = parse_log(text)
    assert got["engine"] == "sglang"
    assert (got["max_total_num_tokens"], got["swa_layer_tokens"]) == (1028015, 822412)
    assert got["swa_kv_pool_gib"] == 20.0
    # 0.5.8 - 0.5.16 print the sliding layers' pool first, unlabelled: the count stays the full
    old = text.replace("Full KV", "KV").replace("SWA KV", "KV").splitlines()
    got = parse_log("\n".join([old[0], old[2], old[1], old[3]]))
    assert got["max_total_num_tokens"] == 1028015


def test_vllm_fp8_cache_line_names_the_dtype():
    # config/cache.py's INFO line (0.20.0+ names the dtype; before, "fp8")
    line = (
        "INFO 07-06 22:50:30 [cache.py:280] Using fp8_e4m3 data type to store kv cache. It "
        "reduces the GPU memory footprint and boosts the performance. Meanwhile, it may cause "
        "accuracy drop without a proper scaling factor\n"
        "INFO 07-06 22:52:09 [kv_cache_utils.py:2146] GPU KV cache size: 567,978 tokens\n"
    )
    got = parse_log(line)
    assert (got["kv_cache_dtype"], got["gpu_kv_cache_tokens"]) == ("fp8_e4m3", 567978)


def test_sglang_fp8_pool_dtype_parses_as_its_choice():
    # model_runner.py's line (0.5.3 - 0.5.12) and the 0.5.13+ pool line, ROCm's fnuz included
    for text, kv in (
        ("[TP0] Using KV cache dtype: torch.float8_e4m3fnuz", "fp8_e4m3"),
        ("[TP0] KV Cache is allocated. dtype: torch.float8_e5m2, #tokens: 10, K size: 1.00 GB, "
         "V size: 1.00 GB", "fp8_e5m2"),
    ):  # fmt: skip
        assert parse_log(text)["kv_cache_dtype"] == kv
    assert "kv_cache_dtype" not in parse_log("[TP0] Using KV cache dtype: torch.bfloat16")
