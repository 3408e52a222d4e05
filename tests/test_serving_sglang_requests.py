"""SGLang's max_running_requests (calc.serving.sglang_requests), the expected values written out
from SGLang's source in the PyPI wheels, release by release, and from published scheduler lines.

With T the finalized max_total_num_tokens, T' the count profile_max_num_token returned (before
the page rounding and the sliding-window split), L the context length, G the given
--max-running-requests, dp the DP-attention width:
- 0.4.x - 0.5.9 (ModelRunner.init_memory_pool, TpModelWorker / ModelRunner): pool P = G or
  E = clamp(int(T' / L x 512), 2048, 4096), + 1 slot before 0.4.7 (ReqToTokenPool(size=
  max_num_reqs + 1) in the 0.4.6.post5 wheel); N = min(T // 2 (G // dp when given), P);
- 0.5.10 - 0.5.13 (_resolve_max_num_reqs, E from the finalized T): N = min(G // dp, E) when
  given, else min(E, T // 2);
- 0.5.14 on: N = min(G // dp, T // 2) when given (max(1, G // dp) from 0.5.23), else
  min(E, T // 2);
- linear-attention models: N (P before 0.5.10) <= max_mamba_cache_size // r, r the states a
  running request may hold: 1 with the radix cache off, 3 (no_buffer), 5 (0.5.7's
  unconditional overlap slots; extra_buffer + the overlap scheduler from 0.5.14).
"""

from __future__ import annotations

import json

import pytest
from gdn_small import SMALL

from calc.presets import load_preset
from calc.serving.evidence import evaluate, load_cases
from calc.serving.grid import engine_plan_grid
from calc.serving.logs import parse_log
from calc.serving.plan import engine_plan

GIB = 2**30
CELL = 8 * 128 * 32 * 2 * 2  # Llama-3.1-8B, tp 1: 8 KV heads x 128 x 32 layers x K, V x bf16
CASES = {c["id"]: c for c in load_cases("benchmarks/engine_logs")}


def sg(model, version, avail_gib, **kw):
    return engine_plan(
        model, "h100-sxm", "sglang", version=version, available_kv_gib=avail_gib, **kw
    )


def clamp(x):
    return max(min(x, 4096), 2048)


# --- published scheduler lines ------------------------------------------------------------


@pytest.mark.parametrize(
    "cid, tokens, context, want",
    [
        # 0.4.1 / 0.4.2 / 0.4.3: int(T / 131072 x 512) < 2048, so the clamp's 2048 + 1 slot
        ("sglang-docs-llama31-8b-h100-tp1", 444500, 131072, 2048 + 1),
        ("sglang-jerryzsj-r1-distill-qwen7b-3090-tp1", 105531, 131072, 2048 + 1),
        ("sglang-llmsinclouds-qwq32b-l4-tp4", 46611, 131072, 2048 + 1),
        # 0.4.2 on 8 x MI300X (xinyuwei-david/david-share): inside the clamp, + 1 slot
        ("sglang-davidshare-deepseek-r1-mi300x-tp8", 1061980, 163840, 1061980 * 512 // 163840 + 1),
    ],
)
def test_scheduler_lines_of_published_logs(cid, tokens, context, want):
    case = CASES[cid]
    got = parse_log(case["logged"]["excerpt"])
    assert (got["max_total_num_tokens"], got["context_len"]) == (tokens, context)
    assert got["max_running_requests"] == want
    (check,) = [c for c in evaluate(case) if c.figure.startswith("max_running_requests")]
    assert (check.logged, check.kvcalc, check.verdict) == (want, want, "exact")


def test_server_args_line_is_not_the_scheduler_line():
    # server_args prints the flag (None or the given value); only the scheduler line counts
    text = "server_args=ServerArgs(mem_fraction_static=0.88, max_running_requests=None, x=1)"
    assert "max_running_requests" not in parse_log(text)
    text += (
        "\nmax_total_num_tokens=9, max_prefill_tokens=16384, max_running_requests=4, context_len=8"
    )
    assert parse_log(text)["max_running_requests"] == 4


# --- dense models, release by release ------------------------------------------------------


def test_estimate_inside_the_clamp_and_the_plus_one():
    T, L = 3 * GIB // CELL, 4096  # 24,576 tokens
    E = T * 512 // L
    assert (T, E) == (24576, 3072) and E == clamp(E)
    for version, want in [("0.4.6", E + 1), ("0.4.6.post5", E + 1), ("0.4.7", E), ("0.5.23", E)]:
        p = sg("llama-3.1-8b", version, 3.0, max_model_len=L)
        assert p.gpu_kv_cache_tokens == T
        assert p.max_running_requests == min(T // 2, want), version
        assert p.log_lines[-1].endswith(f"max_running_requests={want}, context_len={L}")


def test_half_the_tokens_caps_the_default():
    # 1,024 tokens: E = 2048 (clamped), T // 2 = 512 wins
    T = GIB // 8 // CELL
    assert T == 1024
    for version in ("0.4.2", "0.5.9", "0.5.10", "0.5.23"):
        p = sg("llama-3.1-8b", version, 1 / 8, max_model_len=4096)
        assert p.max_running_requests == T // 2, version
        assert p.max_concurrency == pytest.approx(T / 4096)


@pytest.mark.parametrize(
    "version, given, want",
    [
        # 0.4.x - 0.5.9: the pool holds G (+ 1 before 0.4.7); T // 2 does not apply to a given G
        ("0.4.6", 10000, 10000),
        ("0.5.9", 10000, 10000),
        # 0.5.10 - 0.5.13: a given G is capped by E (3,072), not by T // 2
        ("0.5.10", 10000, 3072),
        ("0.5.13", 10000, 3072),
        # 0.5.14 on: by T // 2 (12,288), not by E
        ("0.5.14", 10000, 10000),
        ("0.5.14", 20000, 12288),
        ("0.5.23", 20000, 12288),
        ("0.5.23", 64, 64),
    ],
)
def test_given_max_running_requests_by_release(version, given, want):
    p = sg("llama-3.1-8b", version, 3.0, max_model_len=4096, max_running_requests=given)
    assert p.max_running_requests == want
    assert p.max_concurrency == pytest.approx(min(24576 / 4096, want))


def test_short_requests_are_capped_by_the_scheduler():
    # max_model_len 16: the pool holds 24,576 / 16 = 1,536 requests of it, the scheduler runs
    # E = clamp(int(24,576 / 16 x 512)) = 4,096 by default, 100 when told so
    p = sg("llama-3.1-8b", "0.5.23", 3.0, max_model_len=16)
    assert (p.max_running_requests, p.max_concurrency) == (4096, 1536)
    p = sg("llama-3.1-8b", "0.5.23", 3.0, max_model_len=16, max_running_requests=100)
    assert (p.max_running_requests, p.max_concurrency) == (100, 100)


def test_estimate_reads_the_count_before_the_page_rounding_until_0_5_10():
    # 24,600 tokens of budget, page 64: T = 24,576, T' = 24,600; E = 3,075 from T' before
    # 0.5.10 (init_memory_pool: profile, estimate, then align), 3,072 from T from 0.5.10
    avail = 24600 * CELL / GIB
    kw = dict(max_model_len=4096, page_size=64)
    assert sg("llama-3.1-8b", "0.5.9", avail, **kw).max_running_requests == 24600 * 512 // 4096
    assert sg("llama-3.1-8b", "0.5.10", avail, **kw).max_running_requests == 24576 * 512 // 4096


def test_estimate_reads_the_one_pool_count_of_sliding_window_models_until_0_5_10():
    # Llama 4 Scout, tp 1 (SGLang's sliding-window pool from 0.5.8): 48 layers of 8 KV heads x
    # 128, so the one-pool cell is 196,608 B; 12 GiB -> T' = 65,536; the split
    # (swa_full_tokens_ratio 0.8, 12 full + 36 chunked layers) gives the full layers
    # int(65,536 x 48 / (0.8 x 36 + 12)) = 77,101 = T
    cell = 8 * 128 * 48 * 2 * 2
    T1 = 12 * GIB // cell
    T = int(T1 * 48 / (0.8 * 36 + 12))
    assert (T1, T) == (65536, 77101)
    L = 12288
    p = sg("llama-4-scout", "0.5.9", 12.0, max_model_len=L)
    assert p.gpu_kv_cache_tokens == T
    assert p.max_running_requests == clamp(int(T1 / L * 512)) == 2730
    p = sg("llama-4-scout", "0.5.10", 12.0, max_model_len=L)
    assert p.max_running_requests == clamp(int(T / L * 512)) == 3212


def test_dp_attention_divides_a_given_count():
    # DeepSeek-V3 at tp 8 with DP attention over 4: a given G is per DP worker G // 4
    kw = dict(tensor_parallel_size=8, data_parallel_size=4, enable_dp_attention=True)
    kw |= dict(max_model_len=4096, max_running_requests=64)
    assert sg("deepseek-v3", "0.5.23", 40.0, **kw).max_running_requests == 64 // 4
    assert sg("deepseek-v3", "0.4.9", 40.0, **kw).max_running_requests == 64 // 4


def test_zero_requests_refused_as_the_release_does():
    # G = 3 over dp 4: 3 // 4 = 0 requests a worker; 0.5.23 takes at least 1
    kw = dict(tensor_parallel_size=8, data_parallel_size=4, enable_dp_attention=True)
    kw |= dict(max_model_len=4096, max_running_requests=3)
    p = sg("deepseek-v3", "0.5.22", 40.0, **kw)
    assert p.max_running_requests == 0 and p.refusal == "max_running_request is zero"
    assert p.log_lines[-1] == "RuntimeError: max_running_request is zero"
    p = sg("deepseek-v3", "0.5.23", 40.0, **kw)
    assert p.max_running_requests == 1 and p.refusal is None


# --- linear-attention models: the mamba pool's cap ------------------------------------------

# SMALL: the small Gated DeltaNet model of tests/gdn_small.py


@pytest.mark.parametrize(
    "version, radix_off, ratio",
    [
        ("0.5.7", False, 5),  # 3 + MAMBA_CACHE_V2_ADDITIONAL_RATIO_OVERLAP without spec decoding
        ("0.5.8", False, 3),  # the 2 only with the extra buffer; auto -> no_buffer
        ("0.5.13", False, 3),
        ("0.5.14", False, 5),  # auto -> extra_buffer (Qwen3NextForCausalLM), overlap on: + 2
        ("0.5.23", False, 5),
        ("0.5.7", True, 1),  # --disable-radix-cache
        ("0.5.23", True, 1),
    ],
)
def test_mamba_states_per_running_request(version, radix_off, ratio):
    p = sg(SMALL, version, 1.0, max_model_len=4096, max_mamba_cache_size=100,
           disable_radix_cache=radix_off)  # fmt: skip
    assert p.max_mamba_cache_size == 100
    assert p.max_running_requests == 100 // ratio
    assert p.max_concurrency == 100 // ratio


def test_text_only_qwen35_gets_the_extra_buffer_from_0_5_19():
    # Qwen3_5ForCausalLM joins _MAMBA_EXTRA_BUFFER_ARCHS in the 0.5.19 wheel (overrides.py);
    # the VL architectures are in it from 0.5.14
    text = load_preset("qwen3.5-27b").replace(vision=None)
    kw = dict(max_model_len=4096, max_mamba_cache_size=100)
    assert sg(text, "0.5.18", 20.0, **kw).max_running_requests == 100 // 3
    assert sg(text, "0.5.19", 20.0, **kw).max_running_requests == 100 // 5
    assert sg("qwen3.5-27b", "0.5.18", 20.0, **kw).max_running_requests == 100 // 5


def test_sglang_38846_cap_of_a_qwen35_27b_fine_tune():
    # sgl-project/sglang#38846 (v0.5.19, a Qwen3.5-27B fine-tune, --max-running-requests 32):
    # "max_running_requests is capped to 9 by the mamba state cache (max_mamba_cache_size=47,
    # 5 state slots per request)"
    kw = dict(max_model_len=4096, max_mamba_cache_size=47, max_running_requests=32)
    assert sg("qwen3.5-27b", "0.5.19", 20.0, **kw).max_running_requests == 9


def test_too_small_a_mamba_pool_is_refused():
    kw = dict(max_model_len=4096, max_mamba_cache_size=2)  # 2 // 3 = 0 (no_buffer)
    p = sg(SMALL, "0.5.13", 1.0, **kw)
    assert p.refusal == (
        "Hybrid (mamba/linear-attention) state cache is too small to serve any requests. "
        "max_mamba_cache_size=2, mamba_ratio=3, resulting max_num_reqs=0."
    )
    assert sg(SMALL, "0.5.12", 1.0, **kw).refusal == "max_running_request is zero"


# --- the other outputs ----------------------------------------------------------------------


def test_scheduler_line_by_release():
    p = sg("llama-3.1-8b", "0.4.1", 3.0, max_model_len=4096)  # chunked_prefill_size from 0.4.2
    assert p.log_lines[-1] == (
        "max_total_num_tokens=24576, max_prefill_tokens=16384, max_running_requests=3073, "
        "context_len=4096"
    )
    p = sg("llama-3.1-8b", "0.5.23", 3.0, max_model_len=4096, chunked_prefill_size=2048)
    assert p.log_lines[-1] == (
        "max_total_num_tokens=24576, chunked_prefill_size=2048, max_prefill_tokens=16384, "
        "max_running_requests=3072, context_len=4096"
    )


def test_grid_rows_carry_the_scheduler_cap():
    rows = engine_plan_grid(
        "llama-3.1-8b", "h100-sxm", "sglang", version="0.5.23",
        available_kv_gib=[1 / 8, 3.0], max_model_len=[16, 4096],
    )  # fmt: skip
    for row in rows.itertuples():
        avail, L = row.available_kv_cache_gib, row.max_model_len
        p = sg("llama-3.1-8b", "0.5.23", avail, max_model_len=L)
        assert row.max_running_requests == p.max_running_requests
        assert row.max_concurrency == pytest.approx(p.max_concurrency)


def test_cli_json_has_max_running_requests(capsys):
    from calc.cli import main

    args = ["plan", "llama-3.1-8b", "--gpu", "h100-sxm", "--engine", "sglang",
            "--engine-version", "0.5.23", "--available-kv-gib", "3", "--seq", "4096"]  # fmt: skip
    assert main([*args, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["max_running_requests"] == 3072
    assert main([*args, "--max-running-requests", "64", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["max_running_requests"] == 64
    assert main([*args, "--max-running-requests", "64"]) == 0
    assert "max_running_requests=64, context_len=4096" in capsys.readouterr().out
    assert main([*args, "--max-num-seqs", "64"]) == 2  # vLLM's name, refused in one line
    assert "SGLang takes --max-running-requests" in capsys.readouterr().err
    vllm = ["plan", "llama-3.1-8b", "--gpu", "h100-sxm", "--engine", "vllm"]
    assert main([*vllm, "--max-running-requests", "64"]) == 2
    assert "vLLM takes --max-num-seqs" in capsys.readouterr().err
