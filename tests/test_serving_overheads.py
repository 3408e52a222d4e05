"""vLLM V1's profile-run activation peak (calc.serving.overheads.vllm_v1_activation_bytes),
checked against numbers written out from vLLM's released source and real start-ups
(llm-d-planner's runs, tests/fixtures/engine_runs/llmd-planner.json).

Source read (PyPI sdists): vllm/v1/worker/gpu_model_runner.py (profile_run, _dummy_run,
_dummy_sampler_run), vllm/v1/sample/sampler.py (Sampler.forward), vllm/v1/sample/ops/
topk_topp_sampler.py (forward_native, apply_top_k_top_p), and torch's CUDA sort
(aten/src/ATen/native/cuda/SortStable.cu, segmented_sort_pairs: an int64 reverse-index buffer
plus cub DeviceSegmentedRadixSort's temporary storage, which holds alternate key and value
buffers because the input may not be overwritten).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from calc.capacity import activation_bytes_per_gpu, forward_activation_bytes
from calc.presets import load_preset
from calc.serving.hardware import load_hardware
from calc.serving.plan import GIB, engine_plan
from calc.spec import ModelSpec

# Real vLLM start-ups on an H100 80GB (llm-d-planner's accuracy study,
# https://github.com/llm-d-incubation/llm-d-planner @ d3121e059da8, accuracy/results/
# version-sweep/runs/*.json), excerpted in tests/fixtures/engine_runs/llmd-planner.json.
RUNS = json.loads((Path(__file__).parent / "fixtures/engine_runs/llmd-planner.json").read_text())
# Qwen/Qwen3-14B's config.json, as committed in benchmarks/engine_logs/vllm-lmcache1739-qwen3-14b.toml
QWEN3_14B = ModelSpec(
    name="qwen3-14b",
    num_hidden_layers=40,
    hidden_size=5120,
    num_attention_heads=40,
    num_key_value_heads=8,
    head_dim=128,
    intermediate_size=17408,
    vocab_size=151936,
    max_position_embeddings=40960,
)
H100_CUBLAS_WORKSPACE = 4096 * 1024 * 8  # torch CublasHandlePool.cpp: 4096 KiB x 8 on sm90


def _peak(preset, version, tokens, seqs, **kw):
    hw = load_hardware("h100-sxm")
    p = engine_plan(
        preset if isinstance(preset, ModelSpec) else load_preset(preset),
        hw,
        version=version,
        max_num_batched_tokens=tokens,
        max_num_seqs=seqs,
        max_model_len=kw.pop("max_model_len", 1024),
        **kw,
    )
    return p.activation_bytes


def _sort_sampler(rows, vocab, logits_bytes=2):
    # bytes a logit while logits.sort(dim=-1) runs (vocab a multiple of 64: no padding):
    held = logits_bytes  # the LM head's logits, model dtype, kept by _dummy_sampler_run
    held += 4  # Sampler.forward: logits.to(torch.float32)
    held += 4 + 8  # sort outputs: values fp32, indices int64
    held += 8  # SortStable.cu segmented_sort_pairs: int64 reverse indices
    held += 4 + 8  # cub temporary storage: alternate keys (fp32) and values (int64)
    return rows * vocab * held


@pytest.mark.parametrize("version", ["0.15.0", "0.16.0"])
def test_qwen3_14b_sweep_sort_sampler(version):
    """Qwen3-14B (vocab 151,936, a multiple of 64; hidden 5,120) on vLLM 0.15.0 / 0.16.0 with the
    H100 defaults (8,192 batched tokens, 1,024 sequences): 1,024 rows sort the vocabulary while
    the forward's 8,192 x 5,120 output, its gather and the rand_like copy are alive, plus torch's
    cuBLAS workspace. Logged: "torch peak memory increase: 5.64GiB" in both."""
    run = next(r for r in RUNS["qwen3_14b_version_sweep"] if r["version"] == version)
    expected = _sort_sampler(1024, 151936) + (8192 + 1024 + 1024) * 5120 * 2
    expected += H100_CUBLAS_WORKSPACE
    got = _peak(QWEN3_14B, version, 8192, 1024)
    assert got == expected
    assert round(got / GIB, 2) == run["activation_gib"] == 5.64


def test_gpt_oss_120b_sampler_dominates():
    """gpt-oss-120b (vocab 201,088, hidden 2,880), vLLM 0.10.1 defaults on an H100: 1,024 rows,
    8,192 batched tokens; the sampler's 7.29 GiB is far above the forward estimate."""
    spec = load_preset("gpt-oss-120b")
    expected = _sort_sampler(1024, 201088) + (8192 + 1024 + 1024) * 2880 * 2
    got = _peak("gpt-oss-120b", "0.10.1", 8192, 1024)
    assert got == expected
    assert forward_activation_bytes(spec, 1, 8192) < expected


@pytest.mark.parametrize(
    ("version", "held_tokens", "copies"),
    [("0.8.5", 0, 1), ("0.9.1", 0, 2), ("0.9.2", 2048, 2), ("0.16.0", 2048, 2)],
)
def test_what_the_forward_leaves_alive_by_release(version, held_tokens, copies):
    """0.8.x returns only the gather (no rand_like copy); 0.9.0 adds torch.rand_like; 0.9.2's
    profile_run keeps the forward's full output too (vllm sdists of each release); from 0.15.0
    torch's cuBLAS workspace is counted (the llm-d-planner runs)."""
    expected = _sort_sampler(256, 151936) + (held_tokens + copies * 256) * 4096 * 2
    if tuple(map(int, version.split("."))) >= (0, 15, 0):
        expected += H100_CUBLAS_WORKSPACE
    assert _peak("qwen3-8b", version, 2048, 256) == expected


def test_from_0200_the_generic_estimate_stays():
    """0.20.0 makes VLLM_USE_FLASHINFER_SAMPLER tri-state and 0.21.0 turns it on: not derived, so
    kvcalc keeps calc.capacity's estimate."""
    spec = load_preset("qwen3-8b")
    assert _peak("qwen3-8b", "0.20.0", 2048, 256) == activation_bytes_per_gpu(spec, 1, 2048, 256)


def test_padded_vocabulary_only_in_the_model_dtype_logits():
    """compute_logits slices the padded LM-head output ([..., :vocab], a view), so only the
    model-dtype logits carry the padding to a multiple of 64; Llama-3.1-8B's 128,256 is one."""
    from calc.serving.profile_terms import vllm_v1_sort_sampler_peak_bytes

    assert vllm_v1_sort_sampler_peak_bytes(4, 100, 128, 2) == 4 * (128 * 2 + 100 * 36)


@pytest.mark.parametrize("version", ["0.17.0", "0.18.0"])
def test_qwen3_14b_sweep_triton_sampler(version):
    """0.17.0 / 0.18.0: the Triton top-k/top-p path (tests/test_serving_llmd_runs.py has the
    term by term account): 1,024 rows x (2 + 12 B) a logit, the kernel's 132-row fp32 buffer,
    the forward's output, gather and copy, the cuBLAS workspace. Logged: 2.23 GiB in both; the
    non-torch increase 0.13 GiB (0.17.0) and 0.25 GiB (0.18.0, which profiles CUDA graphs inside
    the window), the calibrated table's values."""
    run = next(r for r in RUNS["qwen3_14b_version_sweep"] if r["version"] == version)
    V = 151936
    expected = 1024 * V * (2 + 12) + 132 * V * 4 + (8192 + 2 * 1024) * 5120 * 2
    expected += H100_CUBLAS_WORKSPACE
    p = engine_plan(
        QWEN3_14B,
        load_hardware("h100-sxm"),
        version=version,
        max_num_batched_tokens=8192,
        max_num_seqs=1024,
        max_model_len=8192,
        gpu_memory_utilization=0.95,
    )
    assert p.activation_bytes == expected
    assert round(expected / GIB, 2) == run["activation_gib"] == 2.23
    assert round(p.non_torch_bytes / GIB, 2) == run["non_torch_gib"]
