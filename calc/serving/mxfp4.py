"""vLLM's MXFP4 MoE experts (gpt-oss) as loaded: the backend vLLM picks for the GPU and release,
and the expert tensors that backend leaves allocated on each rank.

vLLM's Mxfp4MoEMethod.create_weights (vllm/model_executor/layers/quantization/mxfp4.py, e.g.
vllm-project/vllm@007d50058a06dec0f82472d63c819244d460c40d) allocates, per local expert,
  w13_weight [2 Ip, Hp / 2] uint8, w13_weight_scale [2 Ip, Hp / 32] uint8, w13_bias [2 Ip] bf16,
  w2_weight [Hp, Ip / 2] uint8,    w2_weight_scale [Hp, Ip / 32] uint8,    w2_bias [Hp] bf16,
where Ip is the rank's intermediate width (FusedMoE: I / tp, or I with expert parallelism) and
Hp the hidden size, both rounded up as the backend needs.
Tensor parallelism: gpt_oss.py _load_weights_mxfp4 (0.10.1 - 0.33.0 sdists) gives rank r the
whole 32-value blocks [r w, min((r + 1) w, I)), w = cdiv(I / 32, tp) x 32, and FusedMoE.
weight_loader's mxfp4 branch copies that shard into `param.data[:, :dim1, :dim2]` (0.14.1
fused_moe/layer.py line 1159; 0.33.0 routed_experts.py): the rank allocates create_weights'
tensors whatever it loads. gpt-oss (I = 2880): I / tp = 720 at TP 4 and 360 at TP 8, rounded to
Ip = 768 and 384 by both Marlin (128) and Triton (64), which hold the loaded 736 / 384; the
checkpoint shard kvcalc subtracts is rank 0's (calc.quant.sharding). vLLM's own refusal is
FusedMoE's `assert intermediate_size % self.tp_size == 0` (0.14.1 layer.py line 532).

Marlin (the moe marlin kernel requires n % 256 == 0 and k % 128 == 0) rounds Ip up to 128 and Hp
up to 256; prepare_moe_fp4_layer_for_marlin (utils/marlin_utils_fp4.py, vllm-project/vllm@
00d52e93333741b205e70acb9217a2849f173696) repacks each tensor into one of the same byte count
(4-bit values, e8m0 scales, bf16 biases) and drops the original. gpt-oss-120b (H = I = 2880):
Hp = 3072, Ip = 2944, 6.6 % more expert bytes than the checkpoint stores.

Triton (triton_kernels' matmul_ogs; read in the PyPI sdists 0.12.0 - 0.19.0 and, for the
vendored triton_kernels, the 0.14.1 and 0.19.0 wheels' vllm/third_party/triton_kernels):
create_weights rounds Ip up to 64 and leaves Hp = H (the `else` branch; 0.19.0 moved it to
fused_moe/oracle/mxfp4.py mxfp4_round_up_hidden_size_and_intermediate_size). After loading,
process_weights_after_loading (0.19.0: convert_to_mxfp4_moe_kernel_format):
- the biases become float32 copies (`w13_bias.to(torch.float32)`), the bf16 ones dropped;
- _swizzle_mxfp4 (utils/mxfp4_utils.py) transposes each weight and scale and runs
  triton_kernels.tensor.convert_layout with HopperMXValueLayout(mx_axis=1) and
  HopperMXScaleLayout(mx_axis=1, num_warps=8) (tensor_details/layout.py
  make_default_matmul_mxfp4_w_layout / _w_scale_layout, capability 9);
- `del layer.w13_weight` / `w2_weight`: the swizzled values replace the originals, but the
  swizzled scales only go into a PrecisionConfig: layer.w13_weight_scale / w2_weight_scale
  stay registered, so the scales are held twice.
HopperMXValueLayout.swizzle_data on a (*, M, K) uint8 matrix (M = the output rows, K = packed
input bytes) pads M to a multiple of 16 and K to 32 (its mma tile: k_tile x warp_tile x threads x
scott_trick x contig = 1x2x4x2x1 and 4x2x4x1x1); triton_kernels v3.6.0 first pads both to 64
("Pre-pad both matrix dims to multiples of 64"). HopperMXScaleLayout.swizzle_data pads M to
2 x num_warps x 2 x 8 = 256 and K to 2. Bytes are kept (_pack_bits: 4 bytes to one int32, viewed
back as bytes). The vendored tag is cmake/external_projects/triton_kernels.cmake's
DEFAULT_TRITON_KERNELS_TAG: v3.5.0 in 0.12.0, 0.13.0, 0.14.1, 0.16.0; v3.6.0 in 0.17.0, 0.18.0,
0.19.0 (PyPI has no 0.15). The batched all2all formats (DeepEP low-latency, pplx) swizzle with 4
warps; kvcalc has no such setting, so they are not modelled.

Which backend (vLLM on CUDA, default environment):
- compute capability 8.x (Ampere, Ada): Marlin, every release with gpt-oss (0.10.1 on).
- 9.0 (Hopper): Marlin unless the `triton_kernels` package is installed (get_mxfp4_backend);
  vLLM bundles it from 0.12.0 on (copied to vllm/third_party/triton_kernels, which
  import_utils.has_triton_kernels accepts), read in the PyPI sdists: 0.11.0, 0.11.1 and 0.11.2
  neither bundle it nor require it. vllm#23278 (0.10.1, H100) logs Marlin's "does not have
  native support for FP4" warning and "Model loading took 65.9651 GiB"; vllm#26582 reports
  0.11.0 from pip without triton_kernels. From 0.12.0 Hopper gets Triton (vllm#33155, 0.14.1:
  "[mxfp4.py:165] Using Triton backend"); FlashInfer's SM90 path needs
  VLLM_USE_FLASHINFER_MOE_MXFP4_BF16=1 (0.19.0: the oracle's priority list puts TRITON before
  FLASHINFER_CUTLASS_MXFP4_BF16), and VLLM_MXFP4_USE_MARLIN=1 forces Marlin: neither is modelled.
- 10.x (Blackwell): FlashInfer when installed (round both up to 256), else Triton with
  Blackwell layouts: not modelled, refused.
Below 8.0 vLLM refuses the checkpoint (VllmConfig's quantization check, vllm/config/vllm.py in
0.33.0: "Minimum capability: 80"). Compute capabilities are the hardware presets'
(calc.serving.hardware.cuda_capability; developer.nvidia.com/cuda-gpus).
But: SGLang's own MXFP4 path is not modelled here: SGLang plans keep the checkpoint's bytes, at
TP > 1 rank 0's whole-block shard (its gpt_oss.py _load_mxfp4_experts_weights splits as vLLM's,
0.5.7 and 0.5.23 wheels). What SGLang allocates depends on its MoE runner, which its server
args pick from the install: on Hopper "triton_kernel" only where the `triton_kernels` package
is importable (0.5.23 does not require it) and ep_size is 1; Mxfp4MoEMethod.create_weights
then rounds I / tp up to 32 (0.5.7) or 64 (0.5.23), keeps hidden, swizzles as vLLM's Triton
path; other runners repack (Marlin: 128 / 256), or upcast the experts to bf16 (0.5.7's fallback,
upcast_from_mxfp). Which one a deployment ran is not in its flags, so it is not modelled.
"""

from __future__ import annotations

from calc.quant.sharding import MXFP4_BLOCK, stored_bytes_per_gpu
from calc.serving.hardware import cuda_capability
from calc.spec import ModelSpec

BIAS_BYTES = 2  # w13_bias / w2_bias: torch.bfloat16 in create_weights
GPT_OSS_FROM = (0, 10, 1)  # models/gpt_oss.py: in the 0.10.1 sdist, not in 0.10.0
TRITON_KERNELS_FROM = (0, 12, 0)  # triton_kernels bundled with vLLM (see above)
TRITON_V36_FROM = (0, 17, 0)  # the bundled triton_kernels is v3.6.0 (pads values to 64)
MARLIN_ALIGN = (256, 128)  # (hidden, intermediate) round-up of the Marlin backend
TRITON_ALIGN_I = 64  # create_weights' intermediate round-up for Triton on CUDA
HOPPER_SCALE_ALIGN_M = 2 * 8 * 2 * 8  # HopperMXScaleLayout, num_warps = 8
MIN_CAPABILITY = (8, 0)  # Mxfp4Config.get_min_capability: 80 (0.10.1 - 0.33.0)


def round_up(n: int, k: int) -> int:
    return -(-n // k) * k


def mxfp4_backend(version: tuple[int, int, int], gpu: str) -> str:
    """vLLM's MXFP4 MoE backend for this release on this GPU ("marlin" or "triton"), or a
    ValueError naming what kvcalc does not model."""
    v = ".".join(map(str, version[:3]))
    if version < GPT_OSS_FROM:
        raise ValueError(f"'version' must be at least 0.10.1 for vLLM's mxfp4 MoE: got {v}")
    cc = cuda_capability(gpu)
    if cc is None:
        raise ValueError(
            f"'gpu' {gpu!r} states no CUDA compute_capability, so vLLM's mxfp4 MoE backend (and "
            "its padding) is unknown: use an NVIDIA GPU preset"
        )
    if cc < MIN_CAPABILITY:
        raise ValueError(
            "The quantization method mxfp4 is not supported for the current GPU. Minimum "
            f"capability: 80. Current capability: {cc[0]}{cc[1]}. ({gpu})"
        )
    if cc < (9, 0) or (cc == (9, 0) and version < TRITON_KERNELS_FROM):
        return "marlin"
    if cc == (9, 0):
        return "triton"
    raise ValueError(
        f"vLLM {v} on {gpu} (sm{cc[0]}{cc[1]}) runs mxfp4 experts on its FlashInfer / Triton "
        "Blackwell backend, whose weight layout kvcalc does not model: use a Hopper GPU "
        "(Triton from 0.12.0, Marlin before) or an Ampere / Ada GPU (Marlin)"
    )


def _experts(h: int, i: int, local: int) -> int:
    """Bytes of `local` experts as create_weights allocates them: hidden h, intermediate i."""
    w13 = 2 * i * h // 2 + 2 * i * h // MXFP4_BLOCK + 2 * i * BIAS_BYTES
    w2 = h * i // 2 + h * i // MXFP4_BLOCK + h * BIAS_BYTES
    return local * (w13 + w2)


def triton_expert_tensors(h: int, i: int, local: int, version) -> dict[str, tuple[int, ...]]:
    """The uint8 / float32 tensors `local` experts hold on a Hopper rank after vLLM's Triton
    process_weights_after_loading, by name: shape (bytes = product, float32 biases x 4).
    h: hidden size; i: the rank's intermediate width before create_weights' round-up."""
    ip = round_up(i, TRITON_ALIGN_I)
    val = (64, 64) if tuple(version) >= TRITON_V36_FROM else (16, 32)

    def value(m: int, k: int) -> tuple[int, int, int]:  # HopperMXValueLayout: (M, K bytes)
        return (local, round_up(m, val[0]), round_up(k, val[1]))

    def scale(m: int, k: int) -> tuple[int, int, int]:  # HopperMXScaleLayout, 8 warps
        return (local, round_up(m, HOPPER_SCALE_ALIGN_M), round_up(k, 2))

    return {
        "w13_weight (swizzled)": value(2 * ip, h // 2),
        "w2_weight (swizzled)": value(h, ip // 2),
        "w13_weight_scale": (local, 2 * ip, h // MXFP4_BLOCK),
        "w2_weight_scale": (local, h, ip // MXFP4_BLOCK),
        "w13 scale (swizzled)": scale(2 * ip, h // MXFP4_BLOCK),
        "w2 scale (swizzled)": scale(h, ip // MXFP4_BLOCK),
        "w13_bias (float32)": (local, 2 * ip, 4),
        "w2_bias (float32)": (local, h, 4),
    }


def _triton_experts(h: int, i: int, local: int, version) -> int:
    total = 0
    for shape in triton_expert_tensors(h, i, local, version).values():
        n = 1
        for d in shape:
            n *= d
        total += n
    return total


def vllm_mxfp4_layer_extra(spec: ModelSpec, tp: int, ep: int, version, gpu: str) -> int:
    """Bytes one MoE layer's experts take on one rank in vLLM beyond the checkpoint's stored
    shard (calc.quant.sharding): the backend's padding and copies, and biases vLLM allocates
    always."""
    per = stored_bytes_per_gpu(spec, tp, ep)
    others = [k for k, v in per.items() if v and ":" in k and not k.startswith("mlp:")]
    dense = spec.n_moe_layers < spec.num_hidden_layers or spec.shared_expert_intermediate_size
    if others or dense:
        raise ValueError(
            "an mxfp4 checkpoint that quantizes more than the routed experts of every layer "
            f"is not modelled for vLLM (quantized: {', '.join(others) or 'dense MLPs'})"
        )
    backend = mxfp4_backend(version, gpu)
    E = spec.num_local_experts
    local = E // ep if ep > 1 else E
    inter = spec.moe_intermediate_size or spec.intermediate_size
    i = inter if ep > 1 else inter // tp  # FusedMoE intermediate_size_per_partition
    h = spec.hidden_size
    if backend == "triton" and h % (2 * MXFP4_BLOCK):
        raise ValueError(
            f"vLLM's Triton mxfp4 layout is modelled for a 'hidden_size' that is a multiple of "
            f"64: got {h}"
        )
    stored = sum(v for k, v in per.items() if k.startswith("mlp:")) // spec.n_moe_layers
    if backend == "marlin":
        loaded = _experts(round_up(h, MARLIN_ALIGN[0]), round_up(i, MARLIN_ALIGN[1]), local)
    else:
        loaded = _triton_experts(h, i, local, version)
    return loaded - stored
