"""--num-gpu-blocks-override (CacheConfig.num_gpu_blocks_override): vLLM allocates that many
blocks whatever the memory. vllm/v1/core/kv_cache_utils.py: up to 0.20.x may_override_num_blocks
replaces the count after the one-request check, which still sees the profiled memory; from
0.21.0 get_kv_cache_configs first sets each worker's memory to override x bytes per block
("Reflect that in `available_memory` here", 0.21.0 - 0.34.0 sdists). Arithmetic written out for
llama-3.1-8b: a 16-token block of all 32 layers is 16 x 32 x 2 x 8 x 128 x 2 B = 2 MiB."""

import pytest

from calc.serving.plan import engine_plan

GIB, MIB = 2**30, 2**20
KW = dict(available_kv_gib=10, max_model_len=16384, block_size=16, num_gpu_blocks_override=1000)


def plan(version, **kw):
    return engine_plan("llama-3.1-8b", "h100-sxm", "vllm", version=version, **{**KW, **kw})


def test_the_blocks_are_the_override():
    for v in ("0.11.0", "0.20.0", "0.21.0", "0.33.0", "0.34.0"):
        p = plan(v)
        assert p.num_gpu_blocks == 1000, v
        assert p.max_concurrency == 1000 / (16384 // 16)
        # "Overriding num_gpu_blocks=N ...": N of the profiled memory, 10 GiB // 2 MiB
        assert "Overriding num_gpu_blocks=5120 with num_gpu_blocks_override=1000" in p.log_lines
        assert p.available_kv_cache_gib == 10.0  # the worker's line: the profiled memory


def test_the_check_plans_against_the_override_from_0_21():
    # 16384 tokens need 1024 blocks (2 GiB); 1000 blocks are 1000 x 2 MiB = 1.95 GiB
    assert plan("0.20.0").fits  # the check saw 10 GiB
    r = plan("0.21.0").refusal
    assert "(2.00 GiB KV cache is needed" in r and "memory (1.95 GiB)" in r
    assert "the estimated maximum model length is 16000." in r  # 1000 x 16
    # 0.29.0 on: less the null block, 999 x 16
    assert "the estimated maximum model length is 15984." in plan("0.33.0").refusal
    assert plan("0.33.0", max_model_len=15984).fits


def test_the_override_turns_the_extensible_cache_off():
    p = engine_plan(
        "llama-3.1-8b", "h100-sxm", "vllm", version="0.34.0", num_gpu_blocks_override=500
    )
    assert not p.extensible_kv_cache and p.num_gpu_blocks == 500
    with pytest.raises(ValueError, match="which num_gpu_blocks_override overrides"):
        plan("0.34.0", enable_extensible_kv_cache=True)


def test_cli_flag(capsys):
    import json

    from calc.cli import main

    argv = ["plan", "llama-3.1-8b", "--gpu", "h100-sxm", "--engine", "vllm", "--json"]
    assert main([*argv, "--num-gpu-blocks-override", "300", "--seq", "8192"]) == 0
    assert json.loads(capsys.readouterr().out)["num_gpu_blocks"] == 300
    argv[5] = "sglang"
    assert main([*argv, "--num-gpu-blocks-override", "300"]) == 2
    assert "'--num-gpu-blocks-override' is a vLLM setting" in capsys.readouterr().err


def test_grid_plans_the_override_as_the_single_plan():
    import numpy as np

    from calc.serving.grid import engine_plan_grid

    lens = np.array([8192, 16384])
    kw = dict(version="0.33.0", num_gpu_blocks_override=1000)
    df = engine_plan_grid("llama-3.1-8b", "h100-sxm", "vllm", max_model_len=lens, **kw)
    for L, row in zip(lens, df.itertuples(), strict=True):
        p = engine_plan("llama-3.1-8b", "h100-sxm", "vllm", max_model_len=int(L), **kw)
        assert (row.num_gpu_blocks, row.max_concurrency) == (p.num_gpu_blocks, p.max_concurrency)
        assert row.available_kv_cache_gib == p.available_kv_cache_bytes / GIB
