"""DeepSeek-V4's engine plan (calc.serving.plan_v4): the preset's config sizes vLLM's caches as
the config.json does, and the plan from vllm#44376's logged memory prints its refusal."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from calc.presets import load_preset
from calc.serving.figures import GIB
from calc.serving.plan import engine_plan
from calc.serving.plan_v4 import v4_attention
from calc.serving.v4_weights import vllm_v4_weight_bytes

ROOT = Path(__file__).parents[1]
LOG = ROOT / "benchmarks" / "engine_logs" / "vllm-44376-deepseek-v4-flash-refused.toml"
CONFIG = ROOT / "tests" / "fixtures" / "hf" / "modern" / "deepseek-v4-flash.json"
RUN = dict(
    version="0.22.0", tensor_parallel_size=2, enable_expert_parallel=True, kv_cache_dtype="fp8",
    max_model_len=30000, max_num_batched_tokens=16384,
)  # fmt: skip


def test_the_preset_gives_vllm_the_config_json_compress_ratios():
    # config.json's compress_ratios: one per decoder layer, then the MTP layer's (dropped)
    cfg = json.loads(CONFIG.read_text())
    m = v4_attention(load_preset("deepseek-v4-flash"))
    assert m.compress_ratios == tuple(cfg["compress_ratios"][: cfg["num_hidden_layers"]])
    assert (m.head_dim, m.qk_rope_head_dim, m.index_head_dim, m.sliding_window) == (
        cfg["head_dim"], cfg["qk_rope_head_dim"], cfg["index_head_dim"], cfg["sliding_window"],
    )  # fmt: skip


def test_plan_from_the_logged_memory_prints_the_logs_refusal():
    log = tomllib.loads(LOG.read_text())["logged"]
    p_spec = load_preset("deepseek-v4-flash")
    x = log["available_kv_cache_gib"]  # 5.44, printed to 2 decimals
    lo = engine_plan("deepseek-v4-flash", "gh200", available_kv_gib=x - 0.005, **RUN)
    hi = engine_plan("deepseek-v4-flash", "gh200", available_kv_gib=x + 0.005 - 1e-9, **RUN)
    for p in (lo, hi):
        assert not p.fits
        assert f"({log['needed_kv_cache_gib']:.2f} GiB KV cache is needed" in p.refusal
        assert p.source == "given"  # the weights: calc.serving.v4_weights for this run
        assert p.weights_bytes == vllm_v4_weight_bytes(p_spec, 2, 2, 16384, (0, 22, 0), "gh200")
        # 0.22.0's V1 gpu_model_runner.py: "Model loading took %s GiB memory and %.6f seconds"
        # with format_gib, f"{round(b / GiB_bytes, 2)}"
        assert p.log_lines[1] == f"Model loading took {round(p.weights_bytes / GIB, 2)} GiB memory"
        assert p.log_lines[-1] == f"ValueError: {p.refusal}"
    est = [int(p.refusal.split("maximum model length is ")[1].split(".")[0]) for p in (lo, hi)]
    assert est[0] <= log["estimated_max_model_len"] <= est[1]


def test_what_the_v4_plan_cannot_know_is_refused_by_name():
    with pytest.raises(
        ValueError,
        match=r"'available_kv_gib' \(or 'kv_cache_memory_bytes'\) must be given for DeepSeek-V4.*"
        r"weights per GPU are modelled \(\d+\.\d\d GiB a GPU\) but not its profile",
    ):
        engine_plan("deepseek-v4-flash", "gh200", **RUN)
    p = engine_plan("deepseek-v4-flash", "b200", available_kv_gib=5.0, **RUN)
    assert p.weights_bytes is None  # SM100: vLLM's TRT-LLM / DeepGEMM fp4 experts
    with pytest.raises(ValueError, match="modelled for vLLM only"):
        engine_plan("deepseek-v4-flash", "gh200", "sglang", available_kv_gib=5.0)
    with pytest.raises(ValueError, match="'weight_dtype' is not modelled for DeepSeek-V4"):
        engine_plan("deepseek-v4-flash", "gh200", available_kv_gib=5, weight_dtype="bf16", **RUN)
    auto = {**RUN, "kv_cache_dtype": "auto"}  # vLLM asserts an fp8 cache for V4
    with pytest.raises(ValueError, match="'kv_cache_dtype' must be one of"):
        engine_plan("deepseek-v4-flash", "gh200", available_kv_gib=5.0, **auto)
    # the default release (0.34.0) is not read for V4's caches: refused by name; 0.33.0's
    # block is the full-MLA group's pages, 37440 x 21 + 8640 x 21 + 1728 x 20
    # (tests/test_serving_v4_cache_releases.py)
    with pytest.raises(
        ValueError, match=r"'version' must be below 0\.34\.0 for vLLM's DeepSeek-V4"
    ):
        engine_plan("deepseek-v4-flash", "gh200", available_kv_gib=5.0, **{**RUN, "version": None})
    p = engine_plan(
        "deepseek-v4-flash", "gh200", available_kv_gib=5.0, **{**RUN, "version": "0.33.0"}
    )
    assert p.num_gpu_blocks == 5 * 2**30 // (37440 * 21 + 8640 * 21 + 1728 * 20)


def test_cli_plans_v4_from_a_logged_memory_with_the_backends_block_size():
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-m", "calc", "plan", "deepseek-v4-flash", "--gpu", "gh200",
         "--gpus", "2", "--tp", "2", "--engine", "vllm", "--engine-version", "0.22.0",
         "--available-kv-gib", "5.44", "--kv", "fp8", "--seq", "30000",
         "--max-num-batched-tokens", "16384", "--enable-expert-parallel"],
        capture_output=True, text=True, cwd=ROOT, check=False,
    )  # fmt: skip
    # --block-size not given: vLLM takes the backend's preferred size, V4's FlashMLA kernel
    # block (platforms/interface.py update_block_size_for_backend; flashmla.py: [256])
    assert "Setting kv cache block size to 256 for V4_FLASHMLA_SPARSE backend." in out.stdout
    assert "(6.66 GiB KV cache is needed" in out.stdout, out.stdout + out.stderr
    assert out.returncode == 2  # the engine refuses to start
