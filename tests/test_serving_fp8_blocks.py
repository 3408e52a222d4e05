"""Block-FP8 MoE experts split over too many GPUs: the engines' load-time refusal
(calc/serving/fp8_blocks.py).

Independent evidence:
- vLLM's and SGLang's message, quoted from their logs: "The output_size of gate's and up's
  weight = 192 is not divisible by weight quantization block_n = 128" for MiniMax-M2.5 / M2.7
  at TP 8 (SGLang: github.com/kvcache-ai/ktransformers/issues/2036, --tensor-parallel-size 8
  --ep-size 1; vLLM: github.com/ROCm/ATOM/pull/1488 quoting vLLM's Fp8MoEMethod), and
  "TP8 is not supported. To run the model with >4 GPUs, please use DP+EP"
  (github.com/vllm-project/recipes/pull/96, MiniMax-M2, 2025-10-26).
- the widths from MiniMax-M2.5's config.json (tests/fixtures/hf/modern/minimax-m2.5.json):
  intermediate_size 1536, hidden_size 3072, weight_block_size [128, 128]: 1536 / 8 = 192,
  192 % 128 = 64; 1536 / 4 = 384 = 3 x 128.
- vLLM 0.29.0's refine_fp8_moe_block_shape (fused_moe/oracle/fp8.py), written out here:
  refine = gcd(block_n, block_k, I / tp, hidden) = gcd(128, 128, 192, 3072) = 64 >= 32, so
  0.29.0 loads TP 8 with 64 x 64 scale blocks instead of refusing.
"""

from math import gcd

import pytest

from calc.serving.plan import engine_plan

MSG = "The output_size of gate's and up's weight = 192 is not divisible by weight quantization"


def test_vllm_before_029_refuses_minimax_at_tp8():
    with pytest.raises(ValueError, match=MSG + r" block_n = 128\."):
        engine_plan("minimax-m2.5", "h100-sxm", tensor_parallel_size=8, version="0.28.0")
    with pytest.raises(ValueError, match="'tensor_parallel_size' 8"):
        engine_plan("minimax-m2.5", "h100-sxm", tensor_parallel_size=8, version="0.11.0")


def test_vllm_029_refines_the_blocks_and_loads():
    assert gcd(128, 128, 1536 // 8, 3072) == 64  # >= 32: vLLM refines instead of refusing
    p = engine_plan("minimax-m2.5", "h100-sxm", tensor_parallel_size=8, version="0.29.0")
    assert p.weights_bytes > 0


def test_tp4_and_expert_parallel_load():
    assert (1536 // 4) % 128 == 0
    engine_plan("minimax-m2.5", "h100-sxm", tensor_parallel_size=4, version="0.28.0")
    # DP + EP (the recipe's way past 4 GPUs): each GPU holds whole experts
    engine_plan(
        "minimax-m2.5",
        "h100-sxm",
        tensor_parallel_size=8,
        enable_expert_parallel=True,
        version="0.28.0",
    )


def test_sglang_refuses_minimax_at_tp8_unless_ep():
    with pytest.raises(ValueError, match=MSG):
        engine_plan("minimax-m2.5", "h100-sxm", "sglang", tensor_parallel_size=8)
    engine_plan("minimax-m2.5", "h100-sxm", "sglang", tensor_parallel_size=8, ep_size=8)


def test_unquantized_and_dense_checkpoints_are_not_checked():
    # glm-4.5's preset is bf16 (no quantization_config): I / tp = 1536 / 16 = 96 is no matter
    engine_plan("glm-4.5", "h200", tensor_parallel_size=16, version="0.28.0")
