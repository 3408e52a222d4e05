"""DeepSeek-V4's weights per GPU in vLLM (calc/serving/v4_weights.py) against a public start-up
log (benchmarks/engine_logs/vllm-40821-deepseek-v4-flash-pro6000-tp2.toml: "Model loading took
74.85 GiB",
vLLM 0.22.1, TP 2 + EP on 2x RTX PRO 6000), and the buffers vLLM's model code allocates beside
the weights, written out here from the 0.22.1 sdist (vllm/models/deepseek_v4/nvidia/model.py)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from calc.presets import load_preset
from calc.serving.figures import GIB
from calc.serving.v4_weights import vllm_v4_weight_bytes

LOGS = Path(__file__).parent.parent / "benchmarks" / "engine_logs"
CASE = tomllib.loads((LOGS / "vllm-40821-deepseek-v4-flash-pro6000-tp2.toml").read_text())
V = (0, 22, 1)


@pytest.fixture(scope="module")
def flash():
    return load_preset("deepseek-v4-flash")


def test_model_loading_took_matches_the_log(flash):
    s = CASE["settings"]
    tp = s["tensor_parallel_size"]
    ep = tp if s["enable_expert_parallel"] else 1
    got = vllm_v4_weight_bytes(flash, tp, ep, s["max_num_batched_tokens"], V, CASE["gpu"]) / GIB
    want = CASE["logged"]["weights_gib"]  # printed to 2 decimals
    assert abs(got - want) <= 0.005 * want + 0.005


def test_the_buffers_grow_with_max_num_batched_tokens(flash):
    # DeepseekV4Model.__init__: topk_indices_buffer = torch.empty(max_num_batched_tokens,
    # index_topk, dtype=torch.int32); _mtp_hidden_buffer = torch.empty(max_num_batched_tokens,
    # hc_mult * hidden_size, dtype=model dtype (bf16))
    a = vllm_v4_weight_bytes(flash, 2, 2, 8192, V, "h200")
    b = vllm_v4_weight_bytes(flash, 2, 2, 16384, V, "h200")
    assert b - a == 8192 * (512 * 4 + 4 * 4096 * 2)


def test_expert_parallel_or_not_the_expert_bytes_agree(flash):
    # EP: 256 / 2 whole experts; TP: 256 experts of 2048 / 2 columns. Marlin's round-ups
    # (hidden to 256, intermediate to 128) leave V4's sizes alone, so both hold half the bytes
    assert vllm_v4_weight_bytes(flash, 2, 2, 8192, V, "h200") == vllm_v4_weight_bytes(
        flash, 2, 1, 8192, V, "h200"
    )


def test_tensor_parallel_splits_what_vllm_splits(flash):
    # from TP 4 to TP 8: the split tensors halve; the replicated ones stay. Split, per rank
    # at TP 4 (bytes): embed + head (129280 / 4 x 4096 x 2 each), per layer wq_b (32768 / 4 x
    # 1024 fp8 + its 128 x 128 e8m0 scales), wo_a (8192 / 4 x 4096), wo_b (4096 x 8192 / 4),
    # the shared expert (3 x 2048 / 4 x 4096) with their scales, and the routed experts
    # (256 / 4 of 3 x (2048 x 4096 / 2 + 2048 x 4096 / 32)). attn_sink stays 64 fp32 a layer
    # (max(64 / tp, 64)).
    def fp8(o, i):
        return o * i + -(-o // 128) * -(-i // 128)

    L, tp = 43, 4
    layer = (fp8(32768 // tp, 1024) + fp8(8192 // tp, 4096) + fp8(4096, 8192 // tp)
             + 2 * fp8(2048 // tp, 4096) + fp8(4096, 2048 // tp))  # fmt: skip
    experts = 256 // tp * 3 * (2048 * 4096 // 2 + 2048 * 4096 // 32)
    split = 2 * 129280 // tp * 4096 * 2 + L * (layer + experts)
    a = vllm_v4_weight_bytes(flash, 4, 4, 8192, V, "h200")
    b = vllm_v4_weight_bytes(flash, 8, 8, 8192, V, "h200")
    assert a - b == split // 2


def test_refusals_name_what_is_not_modelled(flash):
    with pytest.raises(ValueError, match="'version' must be at least 0.20.0 and below 0.24.0"):
        vllm_v4_weight_bytes(flash, 2, 2, 8192, (0, 24, 0), "h200")
    with pytest.raises(ValueError, match="'gpu' 'b200'.*SM100"):
        vllm_v4_weight_bytes(flash, 2, 2, 8192, V, "b200")
    fp8 = flash.quantization.model_copy(update={"expert_dtype": "fp8"})
    with pytest.raises(ValueError, match="'expert_dtype' must be fp4"):
        vllm_v4_weight_bytes(flash.replace(quantization=fp8), 2, 2, 8192, V, "h200")
    with pytest.raises(ValueError, match="'tensor_parallel_size' 3 must divide"):
        vllm_v4_weight_bytes(flash, 3, 1, 8192, V, "h200")
