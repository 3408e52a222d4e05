"""The non-KV terms of vLLM's available-memory sum, per GPU: the profile run's activation peak,
the non-torch memory and (from 0.20.0) the CUDA-graph estimate; SGLang's start-up reserve.

Formulas live in calc.serving.profile_terms (vLLM V0's eager profile peak; V1's dummy sampler, read
in the 0.8.0-0.19.x sdists), calc.serving.vllm_v2 (Model Runner V2, 0.22.0 on: which models run
it, its dummy sampler, the CUDA-graph estimate it does not make before 0.29.0) and calc.capacity
(the generic estimate every other case uses); this module picks which applies to a config.
"""

from __future__ import annotations

from calc.activation import (
    SAMPLER_BYTES_PER_LOGIT,
    activation_bytes_per_gpu,
    activation_dtype,
    forward_activation_bytes,
)
from calc.dtypes import dtype_bits
from calc.serving import profile_terms as m
from calc.serving.mm_profile import mm_profile_held_bytes
from calc.serving.non_torch import vllm_non_torch_bytes
from calc.serving.vllm_v2 import (
    TOTAL_CONSUMED_FROM,
    v2_cudagraph_estimate_made,
    vllm_uses_v2_runner,
    vllm_v2_activation_bytes,
)
from calc.sharding import kv_heads_per_gpu

GIB = 2**30
# Worker.determine_available_memory subtracts the CUDA-graph estimate when
# VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS is set: the variable is absent in 0.17.0, "0" (opt-in,
# vllm PR #30515) in 0.18.0 and 0.19.0, "1" from 0.20.0 (vllm PR #38284), read in the PyPI sdists
# of each (vllm/envs.py, vllm/v1/worker/gpu_worker.py). vLLM's own log line says "default since
# v0.21.0", but the 0.20.0 release already ships the "1" default (and gpu_memory_utilization 0.92).
CUDAGRAPH_SUBTRACTED_FROM = (0, 20, 0)
# What is subtracted is measured, not computed (0.20.0 sdist, GPUModelRunner.
# profile_cudagraph_memory): for each CUDA-graph mode (FULL, PIECEWISE) it captures the two
# largest batch sizes into a temporary pool and reads the drop in cudaMemGetInfo's free memory
# for each, then takes max over modes of the first capture + sum over modes of
# (graphs in the mode - 1) x max(the second capture, 1 MiB). Both samples are the CUDA driver's
# and the graph pool's allocations on that GPU, which vLLM's source does not fix: kvcalc keeps
# the user-given EngineConfig.cudagraph_memory_gib (vLLM logs "Estimated CUDA graph memory: X GiB
# total", or the "Graph capturing finished ... took X GiB" of an earlier start). Unset, kvcalc
# takes CUDAGRAPH_ESTIMATE_GIB: a calibration, not first principles — the median of the estimates
# vLLM 0.19.0 logged in llm-d-planner's 43 H100 runs (tests/fixtures/engine_runs/llmd-planner.json,
# 0.49 - 1.69 GiB; TP 1 - 4, dense, MoE, MLA, quantized, multimodal), each the same measurement
# 0.20 subtracts.
CUDAGRAPH_ESTIMATE_GIB = 0.84
# vLLM V1's profile run ends with a dummy sampler step whose native top-k/top-p path sorts the
# whole vocabulary (profile_terms.vllm_v1_sort_sampler_peak_bytes) in 0.8.0-0.16.x. From 0.17.0
# apply_top_k_top_p runs a Triton kernel for >= 8 rows (apply_top_k_top_p_triton, 0.17.0 sdist,
# vllm/v1/sample/ops/topk_topp_sampler.py), see V1_SAMPLER_DERIVED_UNTIL. Up to 0.11.0 FlashInfer's
# sampler replaces the sort when the flashinfer package is importable (not a pip dependency
# before 0.11.1; vLLM's Docker image has it): kvcalc takes the pip install, as the logs show.
V1_SORT_SAMPLER_UNTIL = (0, 17, 0)
# 0.17.0-0.19.x: the Triton kernel (profile_terms.vllm_v1_triton_sampler_peak_bytes). 0.20.0 makes
# VLLM_USE_FLASHINFER_SAMPLER tri-state (unset: None) and 0.21.0 defaults it to on (vllm/envs.py
# of each sdist): not derived, calc.capacity's estimate stays.
V1_SAMPLER_DERIVED_UNTIL = (0, 20, 0)
# torch's cuBLAS workspace is in the profile's peak in the llm-d-planner runs of 0.15.0-0.19.0
# (tests/test_serving_overheads.py); older torch builds for CUDA >= 12.2 did not allocate it
# through the caching allocator (CublasHandlePool.cpp's `CUDA_VERSION < 12200` guard), and which
# vLLM release first ships a torch that does is not checked, so it is counted from 0.15.0.
CUBLAS_WORKSPACE_COUNTED_FROM = (0, 15, 0)
V1_SAMPLER_RANDOM_COPY_FROM = (0, 9, 0)  # _dummy_sampler_run's torch.rand_like (0.9.0 sdist)
V1_HOLDS_FORWARD_OUTPUT_FROM = (0, 9, 2)  # _dummy_run returns hidden_states too (0.9.2 sdist)
# The fused-MoE workspace manager without chunking (profile_terms.vllm_triton_moe_workspace_bytes):
# 0.18.0 and 0.19.0 sdists; 0.13.0-0.17.0 chunk by VLLM_FUSED_MOE_CHUNK_SIZE and size the
# profile's buffers differently (not derived: the generic estimate stays there).
V1_MOE_WORKSPACE_FROM = (0, 18, 0)
# MLA's profile-run stand-in for the prefill context up-projection (profile_terms.
# vllm_mla_profile_prefill_bytes): present in the 0.11.0-0.19.0 sdists.
V1_MLA_PROFILE_TENSOR_FROM = (0, 11, 0)
# A multimodal model's profile run keeps its dummy images and their encoder outputs while the text
# forward and the dummy sampler run (mm_profile.py): the hold is in every V1 sdist from 0.8.0, the
# item count derived from the 0.16.0-0.19.0 sdists (vllm/multimodal/encoder_budget.py); earlier
# releases count items another way (vllm/v1/worker/utils.py), not derived, so 0 there.
MM_PROFILE_HELD_FROM = (0, 16, 0)
VOCAB_PADDING = (
    64  # DEFAULT_VOCAB_PADDING_SIZE, vllm/model_executor/layers/vocab_parallel_embedding.py
)


def _v0_dense(spec, config) -> bool:
    """vLLM V0 (eager) on a dense gated-MLP model without MLA: profile_terms.vllm_v0_profile_peak_bytes
    applies; other models keep calc.capacity's estimate."""
    return (
        config.engine == "vllm"
        and not config.is_v1
        and not spec.is_moe
        and not spec.is_mla
        and spec.mlp_kind == "gated"
    )


def cublas_workspace_bytes(hw) -> int:
    """PyTorch's cuBLAS workspace, allocated through the caching allocator at the first matmul
    (the profile run's, so it is part of torch's peak): 4096 KiB x 8 on compute capability 9.0,
    else 4096 KiB x 2 + 16 KiB x 8 (pytorch aten/src/ATen/cuda/CublasHandlePool.cpp,
    parseChosenWorkspaceSize / getNewWorkspace; cuBLASLt shares it)."""
    if hw.compute_capability == "9.0":
        return 4096 * 1024 * 8
    return 4096 * 1024 * 2 + 16 * 1024 * 8


def vllm_v1_activation_bytes(spec, config, act_dtype: str, hw=None) -> int | None:
    """V1's torch peak increase over the profile run, 0.8.0-0.19.x: the larger of the dummy
    forward at max_num_batched_tokens (calc.activation.forward_activation_bytes, the generic
    estimate: the eager / torch.compile'd forward of each architecture is not derived) and the
    dummy sampler with what the forward left alive (profile_terms.vllm_v1_sampler_live_bytes): the
    full-vocabulary sort (profile_terms.vllm_v1_sort_sampler_peak_bytes) before 0.17.0, the Triton
    top-k/top-p kernel (profile_terms.vllm_v1_triton_sampler_peak_bytes) in 0.17.0-0.19.x on a GPU
    whose SM count is known; from 0.15.0 plus torch's cuBLAS workspace (cublas_workspace_bytes).
    With pipeline parallelism the last rank samples while it also holds the intermediate
    tensors it received (hidden states and residual, T x h each: make_empty_intermediate_tensors
    in _dummy_run, 0.9.2-0.19.0 sdists); kvcalc charges every rank that rank's peak. From 0.18.0
    an unquantized MoE's fused-MoE workspace (_v1_moe_workspace_bytes) stays allocated under
    both, and the forward leaves the routed experts out; an MLA layer's profile stand-in for the
    context up-projection (_v1_mla_profile_forward_bytes) may set the forward. Not derived: the
    compiled forward's own buffers (the generic estimate stands). From 0.16.0 a multimodal
    model's dummy images and their encoder outputs (mm_profile.mm_profile_held_bytes) sit under
    both, as the profile run keeps them to the end; the vision encoder's own forward, which runs
    and frees before the text forward, is not written out. None outside these releases."""
    v = config.version_tuple
    if not config.is_v1 or v >= V1_SAMPLER_DERIVED_UNTIL:
        return None
    triton = v >= V1_SORT_SAMPLER_UNTIL
    if triton and (hw is None or hw.multiprocessors is None):
        return None
    a = dtype_bits(act_dtype) // 8
    T, tp = config.max_num_batched_tokens, config.tensor_parallel_size
    rows = min(T, config.max_num_seqs)
    V, h = spec.vocab_size, spec.hidden_size
    Vp = -(-V // VOCAB_PADDING) * VOCAB_PADDING
    if triton:
        sampler = m.vllm_v1_triton_sampler_peak_bytes(rows, V, Vp, a, hw.multiprocessors)
    else:
        sampler = m.vllm_v1_sort_sampler_peak_bytes(rows, V, Vp, a)
    held = T if v >= V1_HOLDS_FORWARD_OUTPUT_FROM else 0
    live = m.vllm_v1_sampler_live_bytes(held, rows, h, a, v >= V1_SAMPLER_RANDOM_COPY_FROM)
    if config.pipeline_parallel_size > 1 and v >= V1_HOLDS_FORWARD_OUTPUT_FROM:
        live += 2 * T * h * a
    workspace = _v1_moe_workspace_bytes(spec, config, act_dtype, a)
    forward = forward_activation_bytes(spec, tp, T, act_dtype, routed_experts=not workspace)
    if spec.is_mla and v >= V1_MLA_PROFILE_TENSOR_FROM:
        forward = max(forward, _v1_mla_profile_forward_bytes(spec, config, a))
    held = mm_profile_held_bytes(spec, config, a) if v >= MM_PROFILE_HELD_FROM else 0
    peak = workspace + held + max(forward, sampler + live)
    if v >= CUBLAS_WORKSPACE_COUNTED_FROM and hw is not None:
        peak += cublas_workspace_bytes(hw)
    return peak


def _v1_moe_workspace_bytes(spec, config, act_dtype: str, a: int) -> int:
    """The Triton fused-MoE workspace (profile_terms.vllm_triton_moe_workspace_bytes) where vLLM picks
    the Triton experts: an unquantized 16-bit MoE checkpoint, no expert / data parallelism,
    0.18.0-0.19.x; else 0 (the generic estimate's routed-expert term stands)."""
    if (
        not spec.is_moe
        or config.version_tuple < V1_MOE_WORKSPACE_FROM
        or act_dtype == "fp32"
        or spec.quantization is not None
        or config.quantization is not None
        or config.enable_expert_parallel
        or config.data_parallel_size > 1
    ):
        return 0
    tp = config.tensor_parallel_size
    n = 2 * -(-spec.expert_intermediate_size // tp)
    T = config.max_num_batched_tokens
    return m.vllm_triton_moe_workspace_bytes(T, n, spec.hidden_size, spec.num_experts_per_tok, a)


def _v1_mla_profile_forward_bytes(spec, config, a: int) -> int:
    """The forward's peak at an MLA layer in the V1 profile run: the model loop's hidden states
    and residual, the layer's normed input, q, the latent and rope key, the attention output
    (T rows each) and the stand-in for the context up-projection (profile_terms.
    vllm_mla_profile_prefill_bytes), freed as the layer returns. Not checked against a log where
    it sets the peak (the llm-d DeepSeek-V2-Lite run peaks at the sampler)."""
    T, tp = config.max_num_batched_tokens, config.tensor_parallel_size
    heads = -(-spec.num_attention_heads // tp)
    nope, rope, vd = spec.qk_nope_head_dim, spec.qk_rope_head_dim, spec.v_head_dim
    max_len = config.max_model_len or spec.max_position_embeddings
    w = m.vllm_mla_chunked_prefill_workspace_tokens(max_len, config.max_num_seqs, config.block_size)
    rows = 3 * spec.hidden_size + heads * (nope + rope + vd) + spec.kv_lora_rank + rope
    return T * a * rows + m.vllm_mla_profile_prefill_bytes(w, heads, nope + vd, a)


def overheads(spec, config, wd, calibration, hw=None):
    """(activation, non-torch, CUDA graphs) per GPU: calibrated, or estimated."""
    cal = calibration or {}
    tp = config.tensor_parallel_size
    if "non_kv_overhead_bytes" in cal:
        return int(cal["non_kv_overhead_bytes"]), 0, 0
    if "activation_bytes_per_batched_token" in cal:
        act = int(cal["activation_bytes_per_batched_token"] * config.max_num_batched_tokens)
        return act, int(cal["non_torch_bytes"]), 0
    ad, act = activation_dtype(wd), None  # kvcalc's generic peak only where no vLLM one is
    v0_dense = _v0_dense(spec, config)
    if v0_dense:  # the eager V0 profile run, written out from vLLM's forward
        a = dtype_bits(activation_dtype(wd)) // 8
        d = spec.head_dim
        forward = m.vllm_v0_profile_peak_bytes(
            config.max_num_batched_tokens,
            spec.hidden_size,
            spec.num_attention_heads // tp * d,
            kv_heads_per_gpu(spec, tp) * d,
            -(-spec.intermediate_size // tp),
            a,
        )
        sampler = min(config.max_num_batched_tokens, config.max_num_seqs) * spec.vocab_size
        act = max(forward, sampler * SAMPLER_BYTES_PER_LOGIT)
    nt = vllm_non_torch_bytes(config, hw)
    if config.engine == "vllm" and vllm_uses_v2_runner(spec, config):
        act = vllm_v2_activation_bytes(spec, config, ad)
        if hw is not None:  # cuBLAS's workspace: in the peak, from 0.27.0 in the consumed memory
            consumed = config.version_tuple >= TOTAL_CONSUMED_FROM
            act += 0 if consumed else cublas_workspace_bytes(hw)
            nt += cublas_workspace_bytes(hw) if consumed else 0
    elif config.engine == "vllm" and not v0_dense:
        act = vllm_v1_activation_bytes(spec, config, ad, hw) or None  # none: the generic
    if act is None:
        act = activation_bytes_per_gpu(
            spec, tp, config.max_num_batched_tokens, config.max_num_seqs, ad
        )
    return act, nt, cudagraph_bytes(spec, config)


def cudagraph_bytes(spec, config) -> int:
    """The CUDA-graph estimate determine_available_memory subtracts (CUDAGRAPH_SUBTRACTED_FROM):
    the given EngineConfig.cudagraph_memory_gib, else CUDAGRAPH_ESTIMATE_GIB; none with
    enforce_eager, and none where Model Runner V2 runs in 0.22.0 - 0.28.x (its
    profile_cudagraph_memory returns 0: vllm_v2.V2_CUDAGRAPH_ESTIMATE_FROM), where a given
    non-zero estimate is refused: vLLM would not subtract it."""
    if config.version_tuple < CUDAGRAPH_SUBTRACTED_FROM or config.enforce_eager:
        return 0
    given = config.cudagraph_memory_gib
    if not v2_cudagraph_estimate_made(spec, config):
        if given:
            raise ValueError(
                f"cudagraph_memory_gib must be 0 or unset for vLLM {config.version} on Model "
                "Runner V2, whose profile_cudagraph_memory returns 0 before 0.29.0 (no "
                f"estimate is subtracted): got {given}"
            )
        return 0
    return int((CUDAGRAPH_ESTIMATE_GIB if given is None else given) * GIB)


def captured_cudagraph_bytes(config) -> int:
    """The graphs' pool after capture (vLLM's "CUDAGraph memory" of its suggestion line,
    calc.serving.vllm_suggestion): kvcalc's one estimate, whether or not the release subtracts it
    beforehand; none with enforce_eager."""
    if config.enforce_eager:
        return 0
    given = config.cudagraph_memory_gib
    return int((CUDAGRAPH_ESTIMATE_GIB if not given else given) * GIB)
