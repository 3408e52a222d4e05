"""Grids equal single plans row by row; the CLI prints the engine's lines and refuses bad input."""

import json

import numpy as np
import pytest

from calc.cli import main
from calc.serving.grid import engine_plan_grid
from calc.serving.plan import engine_plan


@pytest.mark.parametrize(
    "engine, axis", [("vllm", "gpu_memory_utilization"), ("sglang", "mem_fraction_static")]
)
def test_grid_rows_equal_single_plans(engine, axis):
    fracs, lens = [0.7, 0.85, 0.9], [4096, 10000, 32768]
    df = engine_plan_grid("llama-3.1-8b", "h100-sxm", engine, **{axis: fracs}, max_model_len=lens)
    assert len(df) == 9
    for row in df.itertuples():
        p = engine_plan(
            "llama-3.1-8b",
            "h100-sxm",
            engine,
            **{axis: getattr(row, axis)},
            max_model_len=int(row.max_model_len),
        )
        assert (row.num_gpu_blocks, row.gpu_kv_cache_tokens) == (
            p.num_gpu_blocks,
            p.gpu_kv_cache_tokens,
        )
        assert row.max_concurrency == pytest.approx(p.max_concurrency, rel=1e-12)


def test_grid_from_given_available_memory():
    df = engine_plan_grid(  # 0.33.0's 16-token block
        "llama-3.1-8b", "h100-sxm", available_kv_gib=np.array([6.51]), version="0.33.0"
    )
    assert int(df.gpu_kv_cache_tokens[0]) == int(6.51 * 2**30) // (2 * 16 * 8 * 128 * 2) // 32 * 16


def test_cli_engine_plan_json(capsys):
    rc = main(
        [
            "plan",
            "llama-3.1-8b",
            "--gpu",
            "h100-sxm",
            "--engine",
            "vllm",
            "--seq",
            "32768",
            "--available-kv-gib",
            "6.51",
            "--engine-version",
            "0.33.0",
            "--json",
        ]
    )
    data = json.loads(capsys.readouterr().out)
    assert rc == 0
    for key in (
        "weights_gib",
        "available_kv_cache_gib",
        "num_gpu_blocks",
        "gpu_kv_cache_tokens",
        "max_concurrency",
    ):
        assert key in data
    assert data["num_gpu_blocks"] == int(6.51 * 2**30) // (2 * 16 * 8 * 128 * 2 * 32)


def test_cli_prints_the_engine_lines(capsys):
    rc = main(["plan", "llama-3.1-8b", "--gpu", "h100-sxm", "--engine", "vllm", "--seq", "8192"])
    out = capsys.readouterr().out
    assert rc == 0
    assert "Available KV cache memory:" in out and "GPU KV cache size:" in out
    assert "Maximum concurrency for 8,192 tokens per request:" in out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--util", "1.5"], "'gpu_memory_utilization' must be in (0, 1]"),
        (["--tp", "3", "--gpus", "3"], "'tp' must divide num_attention_heads=32"),
        (["--max-batched-tokens", "4096"], "'--max-batched-tokens' is not an engine setting"),
        (["--mem-fraction-static", "0.8"], "'--mem-fraction-static' is an SGLang setting"),
        (["--seq", "200000"], "User-specified max_model_len (200000) is greater"),
        (["--gpu-memory-gib", "80"], "'--gpu-memory-gib' must be in (0, 79.65]"),
    ],
)
def test_cli_bad_settings_exit_2_with_one_line(capsys, argv, message):
    rc = main(["plan", "llama-3.1-8b", "--gpu", "h100-sxm", "--engine", "vllm", *argv])
    err = capsys.readouterr().err
    assert rc == 2
    assert message in err and err.count("\n") == 1


def _available(capsys, *extra) -> float:
    argv = ["plan", "llama-3.1-8b", "--gpu", "h100-sxm", "--engine", "vllm", "--json"]
    rc = main([*argv, "--engine-version", "0.19.0", "--seq", "8192", "--util", "0.95", *extra])
    assert rc == 0
    return json.loads(capsys.readouterr().out)["available_kv_cache_gib"]


def test_cli_gpu_memory_is_cudas_total_and_can_be_given(capsys):
    # llm-d-planner's vLLM 0.19.0 run of Llama-3.1-8B on one H100 (benchmarks/engine_logs/
    # llmd-019-llama31-8b-tp1-8192.toml; CUDA's total there is 79.19 GiB, the preset's):
    # "Available KV cache memory: 58.11 GiB"
    assert _available(capsys) == 58.11
    assert _available(capsys, "--gpu-memory-gib", "79.19") == 58.11
    # vLLM: available = total x gpu_memory_utilization - non-KV memory, so 1 GiB less in total is
    # 0.95 GiB less available: 58.11 - 0.95 = 57.16
    assert _available(capsys, "--gpu-memory-gib", "78.19") == 57.16


def test_cli_refused_deployment_exits_2_with_the_engine_error(capsys):
    rc = main(
        ["plan", "llama-3.1-8b", "--gpu", "h100-sxm", "--engine", "vllm", "--available-kv-gib", "1"]
    )
    out = capsys.readouterr().out
    assert rc == 2
    # vLLM 0.34.0's wording (vllm/v1/core/kv_cache_planning.py _check_enough_kv_cache_memory)
    assert "To serve at least one request with the model's max seq len (131072)" in out
    assert "Decreasing `max_model_len` also reduces what is needed." in out


def test_cli_calibrate_writes_a_file_plan_reads(tmp_path, capsys):
    log = tmp_path / "run.log"
    log.write_text(
        "Loading model weights took 14.9888 GB\n"
        "Memory profiling results: total_gpu_memory=23.58GiB initial_memory_usage=15.34GiB "
        "peak_torch_memory=17.06GiB memory_usage_post_profile=15.35GiB non_torch_memory=0.35GiB "
        "kv_cache_size=3.81GiB gpu_memory_utilization=0.90\n"
        "# GPU blocks: 1952, # CPU blocks: 2048\n"
        "Maximum concurrency for 20000 tokens per request: 1.56x\n"
    )
    out_file = tmp_path / "cal.json"
    rc = main(
        [
            "calibrate",
            str(log),
            "llama-3.1-8b",
            "--gpu",
            "rtx-3090",
            "--engine-version",
            "0.6.4",
            "--out",
            str(out_file),
        ]
    )
    assert rc == 0 and out_file.exists()
    assert "GPU blocks" in capsys.readouterr().out
    rc = main(
        [
            "plan",
            "llama-3.1-8b",
            "--gpu",
            "rtx-3090",
            "--engine",
            "vllm",
            "--engine-version",
            "0.6.4",
            "--seq",
            "20000",
            "--calibration",
            str(out_file),
            "--json",
        ]
    )
    data = json.loads(capsys.readouterr().out)
    # the calibrated run reproduces its own log: 3.81 GiB, 1952 blocks (within one block)
    assert data["available_kv_cache_gib"] == 3.81
    assert abs(data["num_gpu_blocks"] - 1952) <= 1
