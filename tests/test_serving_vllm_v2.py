"""vLLM's Model Runner V2 (calc.serving.vllm_v2): which releases run it for a model, the
CUDA-graph estimate it does not make in 0.22.0 - 0.28.x, and its dummy sampler's peak.

Expected values are read from vLLM's PyPI sdists (cited per test) or from a committed start-up
log's own figures (benchmarks/engine_logs/), with the arithmetic written out.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from calc.presets import load_preset
from calc.serving.engine import engine_config
from calc.serving.hardware import load_hardware
from calc.serving.overheads import CUDAGRAPH_ESTIMATE_GIB, cudagraph_bytes
from calc.serving.plan import GIB, engine_plan
from calc.serving.vllm_v2 import v2_dummy_sampler_peak_bytes, vllm_uses_v2_runner

LOGS = Path(__file__).parent.parent / "benchmarks" / "engine_logs"


def _v2(preset: str, version: str, **settings) -> bool:
    return vllm_uses_v2_runner(
        load_preset(preset), engine_config("vllm", version=version, **settings)
    )


# (preset, release, V2?): vllm/envs.py VLLM_USE_V2_MODEL_RUNNER (a bool defaulting to False in
# 0.20.0 / 0.21.0, None from 0.22.0) and vllm/config/vllm.py use_v2_model_runner /
# DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES / _is_default_v2_model_runner_model of each sdist.
RUNNER_TABLE = [
    ("qwen3-32b", "0.21.0", False),  # env default False: V1 whatever the model
    ("qwen3-32b", "0.22.0", True),  # 0.22.0 list: {"Qwen3ForCausalLM"}, dense, unquantized
    ("llama-3.1-8b", "0.22.0", False),  # LlamaForCausalLM not in 0.22.0's list
    ("llama-3.1-8b", "0.23.0", True),  # 0.23.0 list adds LlamaForCausalLM, MistralForCausalLM
    ("qwen3-30b-a3b", "0.23.0", False),  # `return not model_config.is_moe and ...`
    ("qwen2-0.5b", "0.24.0", False),  # Qwen2ForCausalLM in no list up to 0.24.0
    ("qwen2-0.5b", "0.25.0", True),  # 0.25.0: `any(arch in LIST) or not model_config.is_moe`
    ("qwen2-0.5b", "0.27.1", True),  # the enginrect logs: model_runner.py:329 (V2's file)
    ("qwen3-30b-a3b", "0.28.0", False),  # Qwen3MoeForCausalLM: MoE, not in the list
    ("qwen3-next-80b-a3b", "0.26.0", False),  # MoE (not listed) and is_hybrid: both V1
    ("qwen3-30b-a3b", "0.29.0", True),  # 0.29.0: no architecture test left
    ("qwen3-next-80b-a3b", "0.33.0", True),
]


@pytest.mark.parametrize(("preset", "version", "v2"), RUNNER_TABLE)
def test_model_runner_by_release(preset, version, v2):
    assert _v2(preset, version) is v2


def test_quantization_keeps_v1_until_024():
    # 0.22.0 / 0.23.0: `return not model_config.is_moe and not model_config.is_quantized`;
    # 0.24.0's _is_default_v2_model_runner_model returns `any(arch in LIST ...)` alone
    assert _v2("llama-3.1-8b", "0.23.0", quantization="fp8") is False
    assert _v2("llama-3.1-8b", "0.24.0", quantization="fp8") is True


def _cg(preset, version, **kw):
    return cudagraph_bytes(load_preset(preset), engine_config("vllm", version=version, **kw))


def test_no_cudagraph_estimate_on_v2_before_029():
    # V2's profile_cudagraph_memory: "# NOTE(woosuk): It is TBD whether we keep this API or
    # not. / return 0" (0.22.0 - 0.28.0 sdists, vllm/v1/worker/gpu/model_runner.py; 0.27.1:
    # lines 749-751); 0.29.0 returns cudagraph_utils.profile_cudagraph_memory(self), a
    # measurement, so kvcalc's calibration applies again
    assert _cg("qwen3-32b", "0.27.1") == 0
    assert _cg("qwen3-32b", "0.28.0") == 0
    assert _cg("qwen3-32b", "0.29.0") == int(CUDAGRAPH_ESTIMATE_GIB * GIB)
    assert _cg("qwen3-30b-a3b", "0.27.1") == int(CUDAGRAPH_ESTIMATE_GIB * GIB)  # V1 runs
    assert _cg("qwen3-32b", "0.21.0") == int(CUDAGRAPH_ESTIMATE_GIB * GIB)  # V1 runs
    assert _cg("qwen3-32b", "0.27.1", cudagraph_memory_gib=0) == 0


def test_given_cudagraph_estimate_refused_where_v2_makes_none():
    with pytest.raises(ValueError, match=r"cudagraph_memory_gib.*0\.27\.1.*got 0\.5"):
        _cg("qwen3-32b", "0.27.1", cudagraph_memory_gib=0.5)


def test_enginrect_serve_log_subtracts_no_cudagraph_estimate():
    # The 0.27.1 worker's own summary (gpu_worker.py:789), vllm-enginrect-qwen25-05b-4090-serve:
    # requested 20.39 GiB - 1.49 consumed - 0.25 peak activation = 18.65 = the logged available
    # memory, so the estimate subtracted is 0.00 GiB
    case = tomllib.loads((LOGS / "vllm-enginrect-qwen25-05b-4090-serve.toml").read_text())
    assert case["version"] == "0.27.1"
    assert round(20.39 - 1.49 - 0.25 - case["logged"]["available_kv_cache_gib"], 2) == 0.0
    spec = load_preset("qwen2-0.5b").model_copy(update={"max_position_embeddings": 32768})
    hw = load_hardware("rtx-4090")
    p = engine_plan(spec, hw, version="0.27.1", **case["settings"])
    assert p.cudagraph_bytes == 0


def test_v2_dummy_sampler_peak_qwen3_32b_tp2():
    # Qwen3-32B (vocab 151,936 = 64 x 2,374: no padding), TP 2, 1,024 rows (min(8192, 1024)),
    # bf16: local logits shard 1024 x 75,968 x 2 B, all-gather output 1024 x 151,936 x 2 B and
    # the movedim + reshape copy 1024 x 151,936 x 2 B alive together (cuda_communicator.py
    # all_gather, 0.27.1 sdist); the greedy gumbel_sample's buffers come after the gather's
    # tensors are freed (1024 x ceil(151936 / 1024) x (8 + 4) B = 1024 x 149 x 12)
    full = 1024 * 151936 * 2
    expected = full + max(1024 * 75968 * 2 + full, 1024 * 149 * 12)
    assert expected == 777_912_320
    assert v2_dummy_sampler_peak_bytes(1024, 151936, 151936, 2, 2) == expected
    # one GPU: the logits and gumbel_sample's argmax / max buffers
    assert v2_dummy_sampler_peak_bytes(256, 151936, 151936, 2, 1) == 256 * 151936 * 2 + (
        256 * 149 * 12
    )
