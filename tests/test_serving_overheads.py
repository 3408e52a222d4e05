"""vLLM V1's profile-run activation peak (calc.serving.overheads.vllm_v1_activation_bytes),
checked against numbers written out from vLLM's released source and a published DEBUG line.

Source read (PyPI sdists): vllm/v1/worker/gpu_model_runner.py (profile_run, _dummy_run,
_dummy_sampler_run), vllm/v1/sample/sampler.py (Sampler.forward), vllm/v1/sample/ops/
topk_topp_sampler.py (forward_native, apply_top_k_top_p), and torch's CUDA sort
(aten/src/ATen/native/cuda/SortStable.cu, segmented_sort_pairs: an int64 reverse-index buffer
plus cub DeviceSegmentedRadixSort's temporary storage, which holds alternate key and value
buffers because the input may not be overwritten).
"""

from __future__ import annotations

import pytest

from calc.capacity import activation_bytes_per_gpu, forward_activation_bytes
from calc.presets import load_preset
from calc.serving.hardware import load_hardware
from calc.serving.plan import GIB, engine_plan

# A vLLM 0.11.0 start-up (gpu_worker.py:297/298, kv_cache_utils.py:864 are 0.11.0's lines),
# `vllm serve Qwen3-8B-FP8 --dtype float16 --tensor-parallel-size 1 --max-model-len 1024
# --gpu_memory_utilization 0.8`, VLLM_LOGGING_LEVEL=DEBUG, on a 23.53 GiB GPU (so vLLM's
# batch defaults for GPUs under 70 GiB: 2048 batched tokens, 256 sequences), quoted in a
# public notes file on GitHub (look-up corpus file id 34681159919; its repository was not
# resolved by the look-up tools):
#   DEBUG [v1/worker/gpu_worker.py:297] Memory profiling takes 14.40 seconds. Total non KV cache
#   memory: 10.22GiB; torch peak memory increase: 1.40GiB; non-torch forward increase memory:
#   0.02GiB; weights memory: 8.80GiB.
QWEN3_8B_LOGGED_PEAK_GIB = 1.40


def _peak(preset, version, tokens, seqs, **kw):
    hw = load_hardware("h100-sxm")
    p = engine_plan(
        load_preset(preset),
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


def test_qwen3_8b_0110_debug_line():
    """Qwen3-8B (vocab 151,936, hidden 4,096): 256 rows sort the vocabulary while the forward's
    2,048 x 4,096 output, its 256-row gather and the rand_like copy are alive."""
    expected = _sort_sampler(256, 151936) + (2048 + 256 + 256) * 4096 * 2
    got = _peak("qwen3-8b", "0.11.0", 2048, 256, weight_dtype="fp8")
    assert got == expected
    assert round(got / GIB, 2) == QWEN3_8B_LOGGED_PEAK_GIB


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
    profile_run keeps the forward's full output too (vllm sdists of each release)."""
    expected = _sort_sampler(256, 151936) + (held_tokens + copies * 256) * 4096 * 2
    assert _peak("qwen3-8b", version, 2048, 256) == expected


def test_from_0170_the_generic_estimate_stays():
    """0.17.0's apply_top_k_top_p runs a Triton kernel for >= 8 rows: not derived, so kvcalc
    keeps calc.capacity's estimate."""
    spec = load_preset("qwen3-8b")
    assert _peak("qwen3-8b", "0.17.0", 2048, 256) == activation_bytes_per_gpu(spec, 1, 2048, 256)


def test_padded_vocabulary_only_in_the_model_dtype_logits():
    """compute_logits slices the padded LM-head output ([..., :vocab], a view), so only the
    model-dtype logits carry the padding to a multiple of 64; Llama-3.1-8B's 128,256 is one."""
    from calc.serving.memory import vllm_v1_sort_sampler_peak_bytes

    assert vllm_v1_sort_sampler_peak_bytes(4, 100, 128, 2) == 4 * (128 * 2 + 100 * 36)
