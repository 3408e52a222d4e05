"""`kvcalc plan`, `fit`, `hardware`: units in both readings, --json equal to the API, errors one line."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from calc import cli
from calc.fit import fit_table
from calc.plan import plan

ROOT = Path(__file__).resolve().parents[1]


def run(capsys, *argv):
    rc = cli.main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_plan_table_states_gb_and_gib(capsys):
    rc, out, err = run(
        capsys, "plan", "llama-3-70b", "--gpu", "h100-sxm", "--gpus", "2", "--seq", "8192"
    )
    assert (rc, err) == (0, "")
    assert "GB = 10^9 B, GiB = 2^30 B" in out
    # weights per GPU: 2 x 35,277,512,704 parameters (see test_capacity)
    assert "70,555,025,408 B = 70.56 GB = 65.71 GiB" in out
    assert "957 (15,312 tokens)" in out  # KV blocks of 16 tokens (see test_capacity)
    assert "TTFT" in out and "TPOT" in out and out.rstrip().splitlines()[-1].startswith("fits:")


def test_plan_json_equals_the_api(capsys):
    rc, out, _ = run(
        capsys,
        "plan",
        "mixtral-8x7b",
        "--gpu",
        "rtx-4090",
        "--seq",
        "4096",
        "--weights",
        "int4",
        "--kv",
        "fp8",
        "--json",
    )
    assert rc == 0
    data = json.loads(out)
    api = plan("mixtral-8x7b", "rtx-4090", seq_len=4096, weight_dtype="int4", kv_dtype="fp8")
    assert data == api.model_dump(mode="json")
    assert data["fits"] is False and "does not fit: needs" in data["memory"]["message"]


def test_plan_shows_kv_replication(capsys):
    rc, out, _ = run(
        capsys, "plan", "falcon-40b", "--gpu", "a100-80gb", "--gpus", "16", "--seq", "2048"
    )
    assert rc == 0 and "1 of 8, each replicated x2 (tp > KV heads)" in out


def test_fit_every_preset(capsys):
    rc, out, _ = run(capsys, "fit", "llama-3-70b", "--seq", "8192", "--batch", "16")
    assert rc == 0
    assert "h100-sxm" in out and "mi300x" in out and "GB / GiB" in out
    rc, out, _ = run(
        capsys,
        "fit",
        "llama-3-70b",
        "--seq",
        "8192",
        "--batch",
        "16",
        "--gpu",
        "h100-sxm",
        "--json",
    )
    data = json.loads(out)
    assert data == fit_table("llama-3-70b", seq_len=8192, batch=16, gpus=["h100-sxm"]).model_dump(
        mode="json"
    )
    assert (data["rows"][0]["gpus"], data["rows"][0]["tp"]) == (4, 4)


def test_hardware_list(capsys):
    rc, out, _ = run(capsys, "hardware")
    assert rc == 0 and "h100-sxm" in out and "80GB HBM3" in out and "990" in out
    rc, out, _ = run(capsys, "hardware", "--json")
    assert any(h["name"] == "mi300x" and h["source"] for h in json.loads(out))


@pytest.mark.parametrize(
    "argv, message",
    [
        (["plan", "llama-3-70b", "--gpu", "h100"], "unknown GPU 'h100'; closest:"),
        (  # a --tp that cannot work says which would
            ["plan", "llama-3-70b", "--gpu", "h100-sxm", "--gpus", "6", "--tp", "6"],
            "'tp' must divide num_attention_heads=64: got 6 (tp values that work for Llama 3 70B "
            "on 6 GPUs: 1, 2)",  # 64 % 6 != 0; 64 and 8 KV heads split 1 or 2 ways
        ),
        (
            ["plan", "llama-3-70b", "--gpu", "h100-sxm", "--gpus", "5000"],
            "argument --gpus: must be <= 4,096: got 5,000",
        ),
        (
            ["plan", "llama-3-70b", "--gpu", "h100-sxm", "--util", "1.5"],
            "'gpu_memory_utilization' must be in (0, 1]: got 1.5",
        ),
        (
            ["plan", "llama-3-70b", "--gpu", "h100-sxm", "--util", "0"],
            "'gpu_memory_utilization' must be in (0, 1]: got 0.0",
        ),
        (
            ["plan", "llama-3-70b", "--gpu", "h100-sxm", "--gpus", "0"],
            "argument --gpus: must be an integer from 1 to 4,096: got '0'",
        ),
        (
            ["plan", "llama-3-70b", "--gpu", "h100-sxm", "--gpus", "-2"],
            "argument --gpus: must be an integer from 1 to 4,096: got '-2'",
        ),
        (
            ["plan", "llama-3-70b", "--gpu", "h100-sxm", "--reserve-gib", "-1"],
            "'--reserve-gib' must be from 0 to 1,048,576: got -1.0",
        ),
        (["plan", "llama-3-70b"], "the following arguments are required: --gpu"),
        (["fit", "llama-3-70b"], "the following arguments are required: --seq"),
        (["plan", "no-such-model", "--gpu", "h100-sxm"], "unknown preset 'no-such-model'"),
    ],
)
def test_errors_are_one_line_exit_2(capsys, argv, message):
    rc, out, err = run(capsys, *argv)
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("kvcalc: error:")
    assert message in err


def test_shell_sees_exit_2_and_no_traceback():
    p = subprocess.run(
        [sys.executable, "-m", "calc", "plan", "llama-3-70b", "--gpu", "h100-sxm", "--tp", "3"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert p.stderr.strip() == (
        "kvcalc: error: 'tp' must divide gpus=1 (pp = gpus / tp): got 3 "
        "(tp values that work for Llama 3 70B on 1 GPUs: 1)"
    )


def test_gpus_3_without_tp_plans_the_split_that_works_and_says_why(capsys):
    # Llama 3 70B: 64 query heads, 8 KV heads. tp=3 divides neither, so the 3 GPUs become
    # 3 pipeline stages of tp=1 (80 layers: 27, 27, 26), not an error about a tp nobody set.
    rc, out, err = run(capsys, "plan", "llama-3-70b", "--gpu", "h100-sxm", "--gpus", "3", "--json")
    assert rc == 0
    data = json.loads(out)
    assert (data["memory"]["tp"], data["memory"]["pp"]) == (1, 3)
    assert err.strip() == (
        "kvcalc: note: --tp not given; tp=3 (all GPUs) does not work: 'tp' must divide "
        "num_attention_heads=64: got 3; using tp=1, pp=3 (tp values that work on 3 GPUs: 1)"
    )
    rc, out, err = run(capsys, "plan", "llama-3-70b", "--gpu", "h100-sxm", "--gpus", "8")
    assert rc == 0 and err == "" and "(tp=8, pp=1)" in out  # 8 divides 64 and 8: no note


def test_latency_of_a_plan_that_does_not_fit_is_not_shown_as_a_result(capsys):
    rc, out, _ = run(capsys, "plan", "llama-2-70b", "--gpu", "h100-sxm", "--seq", "4096")
    assert rc == 0  # 138 GB of bf16 weights on one 80 GB GPU
    assert "latency: not estimated, the target does not fit" in out
    assert "TTFT" not in out and "tokens/s" not in out
    assert out.rstrip().splitlines()[-1].startswith("does not fit: needs")


def test_latencies_read_in_seconds_when_long(capsys):
    # 32 x 32,768-token prompts of Llama 3.1 8B on 8 GPUs: >= 32 x 32,512 x 2 x 8e9 FLOPs
    # / (8 x 989.5e12 x 0.5) = 4.2 s of prefill, so TTFT reads in s, not thousands of ms
    argv = ["plan", "llama-3.1-8b", "--gpu", "h100-sxm", "--gpus", "8", "--seq", "32768"]
    rc, out, _ = run(capsys, *argv, "--batch", "32")
    assert rc == 0
    ttft = next(line for line in out.splitlines() if "TTFT" in line)
    assert re.search(r"  \d+\.\d\d s, compute-bound", ttft), ttft


def test_hardware_names_ignore_case(capsys):
    rc, out, _ = run(capsys, "plan", "llama-2-7b", "--gpu", "H100-SXM", "--json")
    assert rc == 0 and json.loads(out)["memory"]["gpu"] == "h100-sxm"


def test_custom_gpu_from_toml(capsys, tmp_path):
    path = tmp_path / "my-gpu.toml"
    path.write_text(
        'name = "my-gpu"\nmemory_size = 96\nmemory_unit = "GiB"\n'
        "hbm_bandwidth_gb_per_s = 4000\npeak_tflops = { bf16 = 1000 }\n"
        "interconnect_gb_per_s = 900\n"
    )
    rc, out, _ = run(capsys, "plan", "llama-2-7b", "--gpu", str(path), "--seq", "4096", "--json")
    assert rc == 0
    data = json.loads(out)
    assert data["memory"]["gpu"] == "my-gpu"
    assert data["memory"]["total_memory_bytes"] == 96 * 2**30
    assert data["roofline"]["peak_flops_per_s"] == 1000e12


def test_a_directory_for_gpu_is_called_a_directory(capsys, tmp_path):
    rc, out, err = run(capsys, "plan", "llama-2-7b", "--gpu", str(tmp_path))
    assert rc == 2 and out == ""
    assert (
        err
        == f"kvcalc: error: '--gpu' {str(tmp_path)!r} is a directory: pass a hardware preset or a .toml file\n"
    )


def test_engine_plan_takes_the_releases_own_utilization_unless_util_is_given(capsys):
    """vLLM 0.20.0 defaults gpu_memory_utilization to 0.92 (its PyPI sdist's vllm/config/cache.py):
    without --util the CLI plans with that, as the API does; --util 0.9 is then a change."""
    from calc.serving.plan import engine_plan

    base = ["plan", "llama-3.1-8b", "--gpu", "h100-sxm", "--engine", "vllm"]
    rc, out, _ = run(capsys, *base, "--engine-version", "0.20.0", "--json")
    default = json.loads(out)["available_kv_cache_bytes"]
    api = engine_plan("llama-3.1-8b", "h100-sxm", version="0.20.0")
    assert rc == 0 and default == api.available_kv_cache_bytes
    rc, out, _ = run(capsys, *base, "--engine-version", "0.20.0", "--util", "0.9", "--json")
    lower = json.loads(out)["available_kv_cache_bytes"]
    assert default - lower == pytest.approx(0.02 * api.total_memory_bytes, abs=1)


def test_a_model_the_generic_planner_refuses_says_why_and_where_to_go(capsys):
    # gpt-oss has attention sinks (config.json: no field; transformers' GptOssAttention.sinks):
    # with or without --tp the one-line error names that, not the GPU split, and points to the
    # engine plans that model it
    for extra in ([], ["--tp", "1"]):
        rc, out, err = run(capsys, "plan", "gpt-oss-120b", "--gpu", "h100-sxm", *extra)
        assert rc == 2 and out == "" and err.count("\n") == 1
        assert "has attention sinks or gates" in err and "--engine vllm" in err
        assert "cannot be split" not in err
