"""vLLM's --max-model-len -1 (calc.serving.vllm_autofit), written out from the 0.14.0 - 0.34.0
sdists (v1/core/kv_cache_utils.py / kv_cache_planning.py _auto_fit_max_model_len and
_estimate_max_model_len_from_groups): the largest length whose blocks fit in the worker's memory
(from 0.29.0 less the null block), at most the model's, found before the KV-cache size lines.

Llama-3.1-8B: a 16-token block of its 32 layers x 8 KV heads x 128 x 2 (K, V) x 2 B is 2 MiB.
"""

from __future__ import annotations

import pytest

from calc.serving.plan import engine_plan

BLOCK = 16 * 32 * 8 * 128 * 2 * 2
GIB = 2**30


def _plans(version, gpu="rtx-4090", **kw):
    own = engine_plan("llama-3.1-8b", gpu, "vllm", version=version, **kw)  # 131,072 tokens
    auto = engine_plan("llama-3.1-8b", gpu, "vllm", version=version, max_model_len=-1, **kw)
    return own, auto


@pytest.mark.parametrize(("version", "null"), [("0.19.0", 0), ("0.29.0", 1)])
def test_the_longest_whole_blocks_that_fit(version, null):
    own, auto = _plans(version)
    assert not own.fits  # the model's 131,072 tokens do not fit on a 24 GB card
    check = own.available_kv_cache_bytes - null * BLOCK
    fitted = check // BLOCK * 16
    assert auto.fits and auto.max_model_len == fitted
    assert auto.available_kv_cache_bytes == own.available_kv_cache_bytes
    line = (
        f"Auto-fit max_model_len: reduced from 131072 to {fitted} to fit in available GPU memory "
        f"({round(check / GIB, 2)} GiB available for KV cache)"
    )
    i = auto.log_lines.index(line)
    assert auto.log_lines[i + 1].startswith("GPU KV cache size")
    concurrency = f"Maximum concurrency for {fitted:,} tokens per request: 1.00x"
    assert concurrency in " ".join(auto.log_lines[i + 1 : i + 3])  # two lines before 0.28


def test_the_wording_by_release_and_a_full_fit():
    _, auto = _plans("0.32.0")
    mem = round((auto.available_kv_cache_bytes - BLOCK) / GIB, 2)  # less the null block
    tail = f"to fit in available KV cache memory ({mem} GiB GPU)"
    assert any(
        x.startswith("Auto-fit max_model_len: reduced from 131072 to ") and x.endswith(tail)
        for x in auto.log_lines
    )
    _, auto = _plans("0.34.0", enable_extensible_kv_cache=False)
    assert any(x.startswith("--max-model-len auto reduced max_model_len from 131072 to ")
               for x in auto.log_lines)  # fmt: skip
    _, h100 = _plans("0.25.0", gpu="h100-sxm")
    assert h100.max_model_len == 131072
    assert (
        "Auto-fit max_model_len: full model context length 131072 fits in available GPU memory"
        in (h100.log_lines)
    )


def test_what_is_refused():
    with pytest.raises(ValueError, match="a vLLM option from 0.14.0"):
        _plans("0.13.0")
    with pytest.raises(ValueError, match="more than full-attention layers"):
        engine_plan("gemma-3-4b", "h100-sxm", "vllm", version="0.25.0", max_model_len=-1)
    tight = engine_plan("llama-3.1-8b", "rtx-4090", "vllm", version="0.19.0", max_model_len=-1,
                        gpu_memory_utilization=0.62)  # fmt: skip
    assert tight.refusal.startswith("Cannot auto-fit max_model_len: not enough GPU memory")


def test_the_cli(capsys):
    from calc.cli import main

    argv = ["plan", "llama-3.1-8b", "--gpu", "rtx-4090", "--engine", "vllm", "--engine-version"]
    assert main([*argv, "0.19.0", "--auto-max-model-len"]) == 0
    assert "Auto-fit max_model_len: reduced from 131072" in capsys.readouterr().out


def test_a_grid_refuses_it():
    from calc.serving.grid import engine_plan_grid

    with pytest.raises(ValueError, match="planned one at a time"):
        engine_plan_grid("llama-3.1-8b", "h100-sxm", "vllm", version="0.19.0", max_model_len=-1,
                         gpu_memory_utilization=[0.8, 0.9])  # fmt: skip


def test_0_34_fits_again_after_warmup():
    """0.34.0's extensible KV cache: the first fit on the profiled memory (less the null block)
    is tentative; after warmup the length is fitted again within it to the measured blocks less
    one (kv_cache_planning.py: (num_blocks - 1) x the block), and the KV cache keeps the measured
    blocks. 64-token blocks (0.34.0's default): 8 MiB each for Llama-3.1-8B."""
    own, auto = _plans("0.34.0")
    block = 4 * BLOCK
    first = (own.available_kv_cache_bytes - block) // block * 64
    final = (auto.num_gpu_blocks - 1) * 64
    assert auto.fits and auto.max_model_len == final < first
    lines = auto.log_lines
    tentative = (
        f"Auto-fit max_model_len: reduced from 131072 to {first} to fit in available KV cache "
        f"memory ({round((own.available_kv_cache_bytes - block) / GIB, 2)} GiB GPU); the final "
        "length is set after CUDA graph capture and warmup"
    )
    refit = (
        f"--max-model-len auto reduced max_model_len from {first} to {final} "
        f"({round(final // 64 * block / GIB, 2)} GiB GPU left for the KV cache after CUDA graph "
        "capture and warmup)."
    )
    warm = next(i for i, x in enumerate(lines) if x.startswith("Memory after warmup"))
    assert lines.index(tentative) < warm < lines.index(refit)
    assert lines[lines.index(refit) + 1].startswith(
        f"GPU KV cache size: {auto.num_gpu_blocks * 64:,} tokens"
    )
