"""Block-FP8 MoE experts under tensor parallelism: what the engines refuse at load time.

A checkpoint with quant_method "fp8" and weight_block_size [n, k] (DeepSeek-V3, MiniMax-M2,
Kimi K2) splits each expert's intermediate width I over the GPUs that share the expert (the
MoE TP size: vLLM's tp_size without expert parallelism, 1 with it; SGLang's
moe_tp_size = tp_size / ep_size). Each GPU's width I / tp must hold whole scale blocks:

- vLLM Fp8MoEMethod.create_weights (quantization/fp8.py, the 0.7.2 - 0.28.0 sdists; from
  0.30.0 fp8_utils.validate_fp8_block_shape_moe): "The output_size of gate's and up's weight =
  {I / tp} is not divisible by weight quantization block_n = {n}." when (I / tp) % n, and "The
  input_size of down's weight = ..." when tp > 1 and (I / tp) % k.
- vLLM 0.29.0 on (fused_moe/oracle/fp8.py refine_fp8_moe_block_shape): instead of refusing it
  refines the scales to blocks of r = gcd(n, k, I / tp, hidden) at load time when r >= 32
  (the Triton MoE kernels take the block shape at run time), and refuses only when r < 32.
  MiniMax-M2 (I = 1,536, hidden 3,072) at TP 8: I / tp = 192, so vLLM <= 0.28 refuses (the
  recipe's "TP8 is not supported", vllm-project/recipes#96) and 0.29 loads it with 64 x 64
  blocks (the weights kvcalc counts keep the checkpoint's 128 x 128 scales: 4x fewer scales
  than vLLM allocates then, ~0.1 % of the experts' bytes).
- SGLang Fp8MoEMethod.create_weights (srt/layers/quantization/fp8.py): the same two errors
  with the width split by moe_tp_size, in every wheel read (0.5.7 - 0.5.9, 0.5.16 -
  0.5.23: no refinement; the ROCm aiter exception of the later ones is not modelled).

Other quantization methods (compressed-tensors' block FP8 included) are not checked here.
"""

from __future__ import annotations

from math import gcd

from calc.spec import ModelSpec

REFINE_FROM = (0, 29, 0)  # vLLM: refine_fp8_moe_block_shape
REFINE_MIN = 32  # the smallest refined block vLLM accepts


def check_fp8_moe_blocks(
    spec: ModelSpec, engine: str, version: tuple[int, ...], moe_tp: int
) -> None:
    """Raise the engine's ValueError when `spec`'s block-FP8 experts cannot be split over
    `moe_tp` GPUs (see the module docstring); return quietly otherwise."""
    q = spec.quantization
    if q is None or q.method != "fp8" or not spec.is_moe or moe_tp <= 1:
        return
    s = q.scheme
    if s.strategy != "block" or s.block_size is None:
        return
    n, k = s.block_size
    width = spec.expert_intermediate_size // moe_tp
    if width % n == 0 and width % k == 0:
        return
    if engine == "vllm" and tuple(version[:3]) >= REFINE_FROM:
        if gcd(n, k, width, spec.hidden_size) >= REFINE_MIN:
            return
    if width % n:
        raise ValueError(
            f"The output_size of gate's and up's weight = {width} is not divisible by weight "
            f"quantization block_n = {n}. ('tensor_parallel_size' {moe_tp} splits the experts' "
            f"intermediate_size {spec.expert_intermediate_size}; expert parallelism keeps them "
            "whole)"
        )
    raise ValueError(
        f"The input_size of down's weight = {width} is not divisible by weight quantization "
        f"block_k = {k}. ('tensor_parallel_size' {moe_tp} splits the experts' intermediate_size "
        f"{spec.expert_intermediate_size}; expert parallelism keeps them whole)"
    )
