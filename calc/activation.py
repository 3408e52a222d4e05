"""Per-GPU activation peak, runtime reserve and KV bytes of the generic (engine-free) memory plan,
with the defaults they assume, each with its reason. calc.capacity.memory_plan and the engine
plans (calc.serving.overheads) use them; calc.capacity re-exports every name here."""

from __future__ import annotations

from math import ceil

from calc.dtypes import canonical_dtype, dtype_bits
from calc.errors import check_count
from calc.sharding import kv_heads_per_gpu
from calc.spec import ModelSpec

GIB = 2**30

# --- defaults, each with its reason -----------------------------------------------------------
DEFAULT_GPU_MEMORY_UTILIZATION = 0.9  # vLLM's default (EngineArgs.gpu_memory_utilization)
# CUDA context, cuBLAS workspaces and allocator slack that PyTorch does not see: vLLM's profiler
# has logged 0.2-1.8 GiB of "non_torch_memory" on one GPU (vllm#14447: 0.20 GiB on a 24 GB card;
# vllm#10511: 1.79 GiB on an 80 GB H100), so 1 GiB for one GPU ...
DEFAULT_RUNTIME_RESERVE_BYTES = 1 * GIB
# ... and 2 GiB with tensor/pipeline parallelism, for NCCL and custom all-reduce buffers
# (vllm#10511: 3.58 GiB at TP=2 on H100). CUDA-graph pools (0.5-2.5 GiB, vllm#7553) are
# captured after the KV cache is sized in vLLM <= 0.10, so they are outside this budget.
DEFAULT_RUNTIME_RESERVE_MULTI_GPU_BYTES = 2 * GIB
DEFAULT_BLOCK_SIZE = 16  # vLLM's default KV block (page) size, tokens
# Prefill chunk: vLLM's API-server default on GPUs of >= 70 GiB other than the A100 (2048 on
# the rest; vllm/engine/arg_utils.py, EngineArgs.get_batch_defaults). The larger chunk is the
# conservative choice; pass max_num_batched_tokens to match a deployment.
DEFAULT_MAX_NUM_BATCHED_TOKENS = 8192
# Rows sampled at once: vLLM's max_num_seqs default below 70 GiB, and the value behind the
# sampler calibration below (H100-class GPUs default to 1024 in vLLM V1).
DEFAULT_MAX_NUM_SEQS = 256
# The sampler's peak: fp32 logits, probabilities, log-probs, and the sorted values with int64
# indices that top-p / top-k need, for every sampled row. Calibrated on one published profile:
# vLLM logged a 1.26 GiB activation peak for Llama-3-8B (V = 128256, 256 rows) at TP=1 *and*
# TP=2 (vllm#10511), so the sampler, not the layers, set it: 1.26 GiB / (256 x 128256) = 41 B.
SAMPLER_BYTES_PER_LOGIT = 40


# --- activations and KV cache per GPU ---------------------------------------------------------


def reserve_bytes_per_gpu(gpus: int, reserve_bytes: int | None = None) -> int:
    """The reserve per GPU: `reserve_bytes` (checked) if given, else the default for one GPU or
    for several."""
    if reserve_bytes is not None:
        return check_count("runtime_reserve_bytes", reserve_bytes, allow_zero=True)
    return DEFAULT_RUNTIME_RESERVE_BYTES if gpus == 1 else DEFAULT_RUNTIME_RESERVE_MULTI_GPU_BYTES


def activation_dtype(weight_dtype: str) -> str:
    """Activations run at 16 bits except for an fp32 model."""
    return "fp32" if canonical_dtype(weight_dtype) == "fp32" else "bf16"


def forward_activation_bytes(
    spec: ModelSpec,
    tp: int = 1,
    max_num_batched_tokens: int = DEFAULT_MAX_NUM_BATCHED_TOKENS,
    act_dtype: str = "bf16",
    routed_experts: bool = True,
) -> int:
    """Peak transient memory of the forward over one prefill chunk of T = max_num_batched_tokens
    tokens: T x bytes x (2h (hidden states + residual) + the widest per-GPU intermediate: fused
    QKV output + attention output, or the MLP's gate/up output plus its activation (x top-k for
    MoE, plus the combined expert outputs)); FlashAttention-style kernels keep no T x T scores.
    routed_experts=False leaves the routed experts out (an engine whose fused-MoE workspace is
    counted on its own, calc.serving.profile_terms.vllm_triton_moe_workspace_bytes): the MLP term is
    then the dense layers' MLP or the shared experts', whichever is wider."""
    T = check_count("max_num_batched_tokens", max_num_batched_tokens)
    a = dtype_bits(act_dtype) // 8
    h, d = spec.hidden_size, spec.head_dim
    q = spec.num_attention_heads // tp * d
    attn = q + 2 * kv_heads_per_gpu(spec, tp) * d + q  # qkv projection output + attention output
    f = ceil(spec.intermediate_size / tp)
    mlp = (3 if spec.mlp_kind == "gated" else 2) * f  # gate/up output + activation output
    if spec.is_moe and routed_experts:
        mlp = spec.num_experts_per_tok * (mlp + h)  # every token visits k experts
    elif spec.is_moe:
        dense = f if "dense" in spec.mlp_types else 0
        shared = ceil((spec.shared_expert_intermediate_size or 0) / tp)
        mlp = (3 if spec.mlp_kind == "gated" else 2) * max(dense, shared)
    return T * a * (2 * h + max(attn, mlp))


def activation_bytes_per_gpu(
    spec: ModelSpec,
    tp: int = 1,
    max_num_batched_tokens: int = DEFAULT_MAX_NUM_BATCHED_TOKENS,
    max_num_seqs: int = DEFAULT_MAX_NUM_SEQS,
    act_dtype: str = "bf16",
) -> int:
    """Peak transient memory of one prefill chunk of T = max_num_batched_tokens tokens: the
    larger of the forward (forward_activation_bytes) and the sampler, min(T, max_num_seqs) rows
    x V x SAMPLER_BYTES_PER_LOGIT (full vocabulary: the LM head's shards are gathered before
    sampling)."""
    T = check_count("max_num_batched_tokens", max_num_batched_tokens)
    S = check_count("max_num_seqs", max_num_seqs)
    forward = forward_activation_bytes(spec, tp, T, act_dtype)
    sampler = min(T, S) * spec.vocab_size * SAMPLER_BYTES_PER_LOGIT
    return max(forward, sampler)


def kv_layers_per_gpu(spec: ModelSpec, pp: int = 1) -> tuple[int, int]:
    """(full-attention layers, sliding layers) on the heaviest pipeline stage."""
    return ceil(spec.n_full_layers / pp), ceil(spec.n_sliding_layers / pp)


def kv_bytes_per_token_layer_gpu(spec: ModelSpec, tp: int, kv_dtype: str) -> int:
    """K and V of one token in one layer, for the KV heads one GPU holds."""
    return -(-2 * kv_heads_per_gpu(spec, tp) * spec.head_dim * dtype_bits(kv_dtype) // 8)
