"""vLLM's MXFP4 MoE experts (gpt-oss) as loaded: the backend vLLM picks for the GPU and release,
and the padded expert tensors that backend allocates on each rank.

vLLM's Mxfp4MoEMethod.create_weights (vllm/model_executor/layers/quantization/mxfp4.py, e.g.
vllm-project/vllm@007d50058a06dec0f82472d63c819244d460c40d) allocates, per local expert,
  w13_weight [2 Ip, Hp / 2] uint8, w13_weight_scale [2 Ip, Hp / 32] uint8, w13_bias [2 Ip] bf16,
  w2_weight [Hp, Ip / 2] uint8,    w2_weight_scale [Hp, Ip / 32] uint8,    w2_bias [Hp] bf16,
where Ip is the rank's intermediate width (FusedMoE: I / tp, or I with expert parallelism) and
Hp the hidden size, both rounded up as the backend needs. The Marlin backend (the moe marlin
kernel requires n % 256 == 0 and k % 128 == 0) rounds Ip up to 128 and Hp up to 256;
prepare_moe_fp4_layer_for_marlin (utils/marlin_utils_fp4.py, vllm-project/vllm@
00d52e93333741b205e70acb9217a2849f173696) repacks each tensor into one of the same byte count
(4-bit values, e8m0 scales, bf16 biases) and drops the original. gpt-oss-120b (H = I = 2880):
Hp = 3072, Ip = 2944, 6.6 % more expert bytes than the checkpoint stores.

Which backend (vLLM on CUDA):
- compute capability 8.x (Ampere, Ada): Marlin, every release with gpt-oss (0.10.1 on).
- 9.0 (Hopper): Marlin unless the `triton_kernels` package is installed (get_mxfp4_backend);
  vLLM bundles it from 0.12.0 on (cmake/external_projects/triton_kernels.cmake, copied to
  vllm/third_party/triton_kernels, which import_utils.has_triton_kernels accepts), read in the
  PyPI sdists: 0.11.0, 0.11.1 and 0.11.2 neither bundle it nor require it. (vllm PR #27370 "Add
  triton_kernels dependency", merged 2025-10-22, is the likely change; its release was inferred
  as 0.11.1 from the date before, which the 0.11.1 sdist contradicts.) vllm#23278 (0.10.1,
  H100) logs Marlin's "does not have native support for FP4" warning and "Model loading took
  65.9651 GiB"; vllm#26582 reports 0.11.0 from pip without triton_kernels. From 0.12.0 Hopper
  gets the Triton backend (swizzled weights, scales kept twice): not modelled, refused.
- 10.x (Blackwell): FlashInfer when installed (round both up to 256), else Triton / Marlin by
  release: not modelled, refused.
Compute capabilities: https://developer.nvidia.com/cuda-gpus.
But: SGLang's own MXFP4 path is not modelled here (SGLang plans keep the checkpoint's bytes).
"""

from __future__ import annotations

from calc.quant.sharding import stored_bytes_per_gpu
from calc.spec import ModelSpec

MXFP4_BLOCK = 32  # values per e8m0 scale
BIAS_BYTES = 2  # w13_bias / w2_bias: torch.bfloat16 in create_weights
GPT_OSS_FROM = (0, 10, 1)  # models/gpt_oss.py: in the 0.10.1 sdist, not in 0.10.0
TRITON_KERNELS_FROM = (0, 12, 0)  # triton_kernels bundled with vLLM (see above)
MARLIN_ALIGN = (256, 128)  # (hidden, intermediate) round-up of the Marlin backend
CUDA_CAPABILITY = {  # hardware preset -> compute capability (developer.nvidia.com/cuda-gpus)
    "a100-40gb": (8, 0),
    "a100-80gb": (8, 0),
    "rtx-3090": (8, 6),
    "rtx-4090": (8, 9),
    "l4": (8, 9),
    "l40s": (8, 9),
    "h100-sxm": (9, 0),
    "h100-pcie": (9, 0),
    "h200": (9, 0),
    "b200": (10, 0),
}


def round_up(n: int, k: int) -> int:
    return -(-n // k) * k


def mxfp4_backend(version: tuple[int, int, int], gpu: str) -> str:
    """vLLM's MXFP4 MoE backend for this release on this GPU ("marlin"), or a ValueError
    naming what kvcalc does not model."""
    v = ".".join(map(str, version))
    if version < GPT_OSS_FROM:
        raise ValueError(f"'version' must be at least 0.10.1 for vLLM's mxfp4 MoE: got {v}")
    cc = CUDA_CAPABILITY.get(gpu)
    if cc is None:
        raise ValueError(
            f"'gpu' {gpu!r} has no CUDA compute capability kvcalc knows, so vLLM's mxfp4 MoE "
            f"backend (and its padding) is unknown: use one of {', '.join(CUDA_CAPABILITY)}"
        )
    if cc < (9, 0) or (cc == (9, 0) and version < TRITON_KERNELS_FROM):
        return "marlin"
    which = "Triton (triton_kernels)" if cc == (9, 0) else "FlashInfer / Triton"
    raise ValueError(
        f"vLLM {v} on {gpu} (sm{cc[0]}{cc[1]}) runs mxfp4 experts on its {which} backend, "
        "whose weight layout kvcalc does not model: use a vLLM release before 0.12.0 on "
        "Hopper, or an Ampere / Ada GPU (Marlin)"
    )


def _experts(h: int, i: int, local: int) -> int:
    """Bytes of `local` experts as create_weights allocates them: hidden h, intermediate i."""
    w13 = 2 * i * h // 2 + 2 * i * h // MXFP4_BLOCK + 2 * i * BIAS_BYTES
    w2 = h * i // 2 + h * i // MXFP4_BLOCK + h * BIAS_BYTES
    return local * (w13 + w2)


def vllm_mxfp4_layer_extra(spec: ModelSpec, tp: int, ep: int, version, gpu: str) -> int:
    """Bytes one MoE layer's experts take on one rank in vLLM beyond the checkpoint's stored
    shard (calc.quant.sharding): the backend's padding, and biases vLLM allocates always."""
    per = stored_bytes_per_gpu(spec, tp, ep)
    others = [k for k, v in per.items() if v and ":" in k and not k.startswith("mlp:")]
    dense = spec.n_moe_layers < spec.num_hidden_layers or spec.shared_expert_intermediate_size
    if others or dense:
        raise ValueError(
            "an mxfp4 checkpoint that quantizes more than the routed experts of every layer "
            f"is not modelled for vLLM (quantized: {', '.join(others) or 'dense MLPs'})"
        )
    align_h, align_i = MARLIN_ALIGN if mxfp4_backend(version, gpu) == "marlin" else (1, 1)
    E = spec.num_local_experts
    local = E // ep if ep > 1 else E
    inter = spec.moe_intermediate_size or spec.intermediate_size
    i = inter if ep > 1 else inter // tp  # FusedMoE intermediate_size_per_partition
    h = spec.hidden_size
    stored = sum(v for k, v in per.items() if k.startswith("mlp:")) // spec.n_moe_layers
    loaded = _experts(round_up(h, align_h), round_up(i, align_i), local)
    return loaded - stored
