"""DeepSeek-V4's weights per GPU in vLLM 0.20.0 - 0.23.x: what "Model loading took" counts.

Read in the PyPI sdists (0.20.0 - 0.21.0: vllm/model_executor/models/deepseek_v4.py; 0.22.0 -
0.23.0: vllm/models/deepseek_v4/nvidia/model.py, attention.py, compressor.py). Each tensor is
the checkpoint's (calc/quant/weights_v4.py: shapes and dtypes), placed as vLLM builds it; the
main model skips mtp.* (DeepseekV4ForCausalLM.load_weights: AutoWeightsLoader skip_substrs).
- Split over tensor parallelism (tp): wq_b and wo_a (ColumnParallelLinear, output rows), wo_b
  (RowParallelLinear, input columns), the shared expert's gate_up_proj / down_proj, the
  embedding and head (VocabParallelEmbedding / ParallelLMHead: the vocabulary padded to 64,
  then split). fp8 block scales follow their matrix's shard.
- Routed experts (FusedMoE): E / ep whole experts with expert parallelism (ep = tp x dp), else
  every expert with moe_intermediate_size / tp. Mxfp4MoEMethod.create_weights: w13 / w2 uint8
  (2 fp4 a byte), one uint8 e8m0 scale per 32 inputs, no bias; the sizes rounded up for the
  backend (mxfp4_round_up_hidden_size_and_intermediate_size; Marlin: hidden to 256,
  intermediate to 128). Marlin (prepare_moe_mxfp4_layer_for_marlin) repacks the values and
  permutes the scales into tensors of the same bytes (e8m0 again) and replaces the originals.
  select_deepseek_v4_mxfp4_moe_backend: FLASHINFER_TRTLLM_MXFP4_MXFP8 and DEEPGEMM_MXFP4 only
  on the SM100 family (DeepGEMM turns the scales into fp32), then MARLIN from SM75: kvcalc
  models Marlin (SM75 - SM90, SM120) and refuses SM100 GPUs.
- Replicated: fused_wqa_wkv (wq_a + wkv, disable_tp), the compressors' fused_wkv_wgate and the
  indexer's weights_proj (bf16, quant_config=None), the indexer's wq_b (ReplicatedLinear, fp8),
  ape (fp32), every norm (model dtype), the router (GateLinear, model dtype), its fp32
  e_score_correction_bias, hc_* (fp32).
- Resized: attn_sink, fp32, padded to max(local heads, 64) (FlashMLA; 0.23.0: 64 or 128);
  tid2eid int32 (int64 only with the MegaMoE backend, not modelled).
- Allocated beside the weights while the model is built: topk_indices_buffer (int32,
  max_num_batched_tokens x index_topk), _mtp_hidden_buffer (model dtype, max_num_batched_tokens
  x hc_mult x hidden_size, on the last pipeline rank, whether or not MTP runs) and one fp32
  cos/sin table (DeepseekV4ScalingRotaryEmbedding: original_max_position_embeddings x factor
  rows of qk_rope_head_dim) per rope base: rope_theta for the window-only layers,
  compress_rope_theta for the compressed ones (get_rope caches one per key).
"Model loading took" is torch's allocated memory after the load less before (current, not
peak: DeviceMemoryProfiler, platforms/cuda.py get_current_memory_usage), summed here without
the caching allocator's rounding (at most a few hundred KiB for V4's ~1,100 tensors a rank).
But: fp8 linear scales are counted as the checkpoint's 1-byte e8m0 (a kernel that converts them
to fp32 adds under 1 MiB a rank); pipeline parallelism and speculative decoding (the MTP
drafter's own weights) are refused.
"""

from __future__ import annotations

from calc.linears import Linear
from calc.quant.config import dtype_bytes
from calc.quant.layout import linear_bytes
from calc.quant.weights_v4 import FP32, _scheme, _tensors, check_v4_quantization
from calc.serving.hardware import cuda_capability
from calc.serving.mxfp4 import MARLIN_ALIGN, MXFP4_BLOCK, round_up
from calc.serving.sharding import padded_vocab
from calc.spec import ModelSpec

MODELLED = ((0, 20, 0), (0, 24, 0))  # vLLM releases read for this layout (the second excluded)
FLASHMLA_MIN_HEADS = 64  # attn_sink padding: max(n_local_heads, 64)
TID2EID_BYTES = 4  # torch.int32 unless the MegaMoE backend
MARLIN_FROM = (7, 5)  # MarlinExperts._supports_current_device: has_device_capability((7, 5))
COLUMN = ("self_attn.q_b_proj", "self_attn.o_a_proj", "mlp.shared_experts.gate_proj",
          "mlp.shared_experts.up_proj")  # fmt: skip  # output rows split over tp
ROW = ("self_attn.o_b_proj", "mlp.shared_experts.down_proj")  # input columns split over tp


def check_v4_vllm(spec: ModelSpec, version, gpu: str, pp: int = 1) -> None:
    """What the V4 weights need of the run; anything else refused by name."""
    v = ".".join(map(str, version[:3]))
    if not MODELLED[0] <= tuple(version) < MODELLED[1]:
        raise ValueError(
            f"'version' must be at least 0.20.0 and below 0.24.0 for DeepSeek-V4's weights per "
            f"GPU (the deepseek_v4 model code read for them): got {v}"
        )
    if pp != 1:
        raise ValueError(
            f"'pipeline_parallel_size' must be 1 for DeepSeek-V4's weights per GPU: got {pp}"
        )
    cc = cuda_capability(gpu)
    if cc is None or cc < MARLIN_FROM or cc[0] == 10:
        raise ValueError(
            f"'gpu' {gpu!r}: vLLM {v} runs DeepSeek-V4's fp4 experts on Marlin from SM75 but on "
            "TRT-LLM / DeepGEMM (fp32 scales) on SM100 GPUs, which kvcalc does not model: use "
            "an NVIDIA GPU of compute capability 7.5 - 9.x or 12.x"
        )
    check_v4_quantization(spec.quantization)
    if spec.quantization is None or spec.quantization.expert_dtype != "fp4":
        raise ValueError(
            "'expert_dtype' must be fp4 for DeepSeek-V4's weights per GPU (vLLM's MXFP4 "
            "experts; the fp8-expert checkpoints' path is not modelled)"
        )
    if spec.num_hash_layers is None:
        raise ValueError("'num_hash_layers' must be set for DeepSeek-V4's weights per GPU")


def _matrix(spec: ModelSpec, x: Linear, tp: int, ep: int) -> int:
    """One matrix's bytes on a rank, as vLLM splits and stores it."""
    q = spec.quantization
    out, inp = x.out_features, x.in_features
    if x.routed:  # one expert's matrix: the intermediate width over tp without ep
        h, i = spec.hidden_size, spec.moe_intermediate_size // (1 if ep > 1 else tp)
        hp, ip = round_up(h, MARLIN_ALIGN[0]), round_up(i, MARLIN_ALIGN[1])
        out, inp = (ip, hp) if not x.module.endswith("down_proj") else (hp, ip)
        return out * inp // 2 + out * inp // MXFP4_BLOCK
    if x.module in COLUMN:
        out //= tp
    elif x.module in ROW:
        inp //= tp
    s = _scheme(q, x)
    if s is None:
        return out * inp * dtype_bytes(q.dtype)
    return linear_bytes(s, out, inp, dtype=q.dtype, module=x.module).total


def vllm_v4_weight_bytes(
    spec: ModelSpec, tp: int, ep: int, max_num_batched_tokens: int, version, gpu: str
) -> int:
    """Bytes "Model loading took" on each GPU (module docstring); ep: the expert-parallel size
    (tp x dp with --enable-expert-parallel, else 1)."""
    check_v4_vllm(spec, version, gpu)
    H, V, h = spec.num_attention_heads, spec.vocab_size, spec.hidden_size
    if H % tp or spec.num_local_experts % max(ep, 1):
        raise ValueError(
            f"'tensor_parallel_size' {tp} must divide num_attention_heads={H} (and the expert-"
            f"parallel size {ep} num_local_experts={spec.num_local_experts})"
        )
    base = dtype_bytes(spec.quantization.dtype)
    total = 0
    for component, what, x, n in _tensors(spec):
        if component == "mtp":
            continue  # mtp.* is skipped by the main model
        if what == "matrix" and x.routed:  # FusedMoE: E / ep whole experts, else all E
            E = spec.num_local_experts
            total += n * x.count // E * (E // ep) * _matrix(spec, x, tp, ep)
        elif what == "matrix":
            total += n * x.count * _matrix(spec, x, tp, ep)
        elif component in ("embed", "lm_head"):
            total += padded_vocab(V) // tp * h * base
        elif what == "tid2eid":
            total += n * x * TID2EID_BYTES
        elif component == "attn/sinks":
            total += n * max(H // tp, FLASHMLA_MIN_HEADS) * FP32
        else:
            total += n * x * (FP32 if what == "fp32" else base)
    return total + vllm_v4_load_buffers(spec, max_num_batched_tokens, base)


def vllm_v4_load_buffers(spec: ModelSpec, max_num_batched_tokens: int, base: int) -> int:
    """topk_indices_buffer, _mtp_hidden_buffer and the fp32 cos/sin tables (module docstring)."""
    topk = max_num_batched_tokens * spec.index_topk * 4 if spec.index_topk else 0
    mtp = max_num_batched_tokens * spec.hc_mult * spec.hidden_size * base
    if spec.rope_scaling is None or spec.rope_scaling.rope_type != "yarn":
        raise ValueError(
            "'rope_scaling' must be yarn for DeepSeek-V4's weights per GPU (vLLM's "
            "DeepseekV4ScalingRotaryEmbedding table): got "
            f"{spec.rope_scaling.rope_type if spec.rope_scaling else None}"
        )
    rows = spec.rope_scaling.table_rows(spec.max_position_embeddings)
    kinds = spec.attention_counts
    bases = ("sliding_attention" in kinds) + (len(kinds) > ("sliding_attention" in kinds))
    return topk + mtp + bases * rows * spec.qk_rope_head_dim * FP32
