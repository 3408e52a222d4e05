"""vLLM's Model Runner V2 (vllm/v1/worker/gpu/), 0.22.0 on: which releases run it for a model,
what its profile run holds at its peak, and where its memory accounting differs from V1's.
calc.serving.overheads puts these beside the V1 rules.

Read in the PyPI sdists 0.20.0 - 0.34.0 (vllm/envs.py, vllm/config/vllm.py,
vllm/v1/worker/gpu_worker.py, vllm/v1/worker/gpu/model_runner.py, vllm/v1/worker/gpu/sample/,
vllm/utils/mem_utils.py).
"""

from __future__ import annotations

from calc.activation import forward_activation_bytes
from calc.dtypes import dtype_bits
from calc.serving.vllm_compiled import compiled_forward_applies, compiled_forward_bytes
from calc.serving.vllm_mamba import vllm_state_pages

# VLLM_USE_V2_MODEL_RUNNER is a bool defaulting to False in 0.20.0 and 0.21.0 (envs.py): V1 runs.
# From 0.22.0 it is tri-state (None: VllmConfig.use_v2_model_runner decides):
# - 0.22.x: V2 for a generate model whose architecture is Qwen3ForCausalLM, not MoE, not
#   quantized (DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES, _is_default_v2_model_runner_model);
# - 0.23.0: LlamaForCausalLM and MistralForCausalLM join (same MoE / quantization conditions);
# - 0.24.0: the list alone decides (Qwen3 / Llama / Mistral / DeepseekV2 / Qwen2Moe /
#   GraniteMoe; no MoE or quantization condition);
# - 0.25.0 - 0.28.x: every non-MoE model, and MoE models of the list (DeepseekV2ForCausalLM,
#   Qwen2MoeForCausalLM, GraniteMoe, Inkling, LongcatFlashNgram; 0.27.0 adds KimiK3, 0.28.0
#   DeepseekV4), except hybrid (mamba / linear-attention) and attention-free models (0.27.0:
#   a listed hybrid architecture runs V2);
# - 0.29.0 on: every model on CUDA (the architecture test is gone).
# Features V2 does not support fall back to V1 (_get_v2_model_runner_unsupported_features):
# speculative methods, sequence / prefill-context parallelism, ... — none of which an
# EngineConfig expresses, except hybrid models in 0.22.x ("hybrid/mamba models").
V2_DEFAULT_FROM = (0, 22, 0)
V2_LLAMA_FROM = (0, 23, 0)
V2_LIST_ONLY_FROM = (0, 24, 0)
V2_NON_MOE_FROM = (0, 25, 0)
V2_EVERY_MODEL_FROM = (0, 29, 0)
# kvcalc's model families whose architecture is in those lists (presets/models/*.toml): a dense
# qwen3 preset is Qwen3ForCausalLM (the MoE ones Qwen3MoeForCausalLM, not listed); llama-1 to
# llama-3.2 LlamaForCausalLM; mistral MistralForCausalLM (a vision preset, Mistral 3.1, is
# Mistral3ForConditionalGeneration). The DeepSeek presets are V3 / R1 / Kimi
# (DeepseekV3ForCausalLM), not V2, so none is listed; a spec of another family runs V1 there.
V2_ARCH_FAMILIES_022 = ("qwen3",)
V2_ARCH_FAMILIES_023 = V2_ARCH_FAMILIES_022 + (
    "llama-1",
    "llama-2",
    "llama-3",
    "llama-3.1",
    "llama-3.2",
    "mistral",
)
# V2's GPUModelRunner.profile_cudagraph_memory is `# NOTE(woosuk): It is TBD whether we keep this
# API or not. return 0` in 0.22.0 - 0.28.0 (model_runner.py; 0.27.1: lines 749-751), so
# determine_available_memory subtracts no CUDA-graph estimate; 0.29.0 measures captures into a
# throwaway pool (vllm/v1/worker/gpu/cudagraph_utils.py profile_cudagraph_memory, lines 718-800
# of the 0.29.0 sdist: a minimal KV cache, then capture_model() with every PIECEWISE graph
# measured in full and only the largest FULL graphs sampled and extrapolated). The result is the
# CUDA driver's and the graph pool's allocations, not fixed by vLLM's source: kvcalc keeps the
# V1 0.19 calibration (overheads.CUDAGRAPH_ESTIMATE_GIB) there, unchecked against a V2 >= 0.29
# log (the one public 0.29.0 start-up found, aivrar/vllm-windows-build issue 17, is a hybrid
# multimodal model with an MTP drafter on Windows: not added).
V2_CUDAGRAPH_ESTIMATE_FROM = (0, 29, 0)
# "mamba cache mode 'all'" joins V2's unsupported features in 0.30.0 (absent in 0.29.0) and the
# mode leaves vLLM in 0.32.0: a NemotronH / Granite model given --mamba-cache-mode all runs V1.
V2_ALL_MODE_FALLBACK = ((0, 30, 0), (0, 32, 0))
# memory_profiling (vllm/utils/mem_utils.py) from 0.27.0: non_kv_cache_memory = total_consumed
# (the drop in free memory from the worker's init snapshot to after the profile run) +
# transient_peak_headroom (torch's peak over the profile run - what torch still holds after it);
# 0.20.0 - 0.26.0: weights_memory + torch peak increase + non-torch increase. Tensors the profile
# run allocates and keeps (cuBLAS's workspace) move from the peak to the consumed memory.
TOTAL_CONSUMED_FROM = (0, 27, 0)
VOCAB_PADDING = 64  # DEFAULT_VOCAB_PADDING_SIZE, vocab_parallel_embedding.py


def _hybrid(spec) -> bool:
    """A model vLLM marks is_hybrid: Gated DeltaNet or Mamba-2 layers."""
    counts = spec.attention_counts
    return "linear_attention" in counts or "mamba" in counts


def _all_mode(spec, config) -> bool:
    if not _hybrid(spec):
        return False
    pc, mode = config.enable_prefix_caching, config.mamba_cache_mode
    return vllm_state_pages(spec, config.version_tuple, "", pc, mode).mode == "all"


def _quantized(spec, config) -> bool:
    return spec.quantization is not None or config.quantization is not None


def vllm_uses_v2_runner(spec, config) -> bool:
    """Whether vLLM's default picks Model Runner V2 for this model and release (see the table
    above); never before 0.22.0, never for vLLM V0 or SGLang."""
    v = config.version_tuple
    if config.engine != "vllm" or not config.is_v1 or v < V2_DEFAULT_FROM:
        return False
    if v >= V2_EVERY_MODEL_FROM:
        lo, hi = V2_ALL_MODE_FALLBACK
        return not (lo <= v < hi and _all_mode(spec, config))
    vision = spec.vision is not None  # a *ForConditionalGeneration architecture, not listed
    if v < V2_LIST_ONLY_FROM:
        families = V2_ARCH_FAMILIES_023 if v >= V2_LLAMA_FROM else V2_ARCH_FAMILIES_022
        listed = spec.family in families and not vision
        return listed and not spec.is_moe and not _quantized(spec, config) and not _hybrid(spec)
    if v < V2_NON_MOE_FROM:  # the list alone; its MoE architectures have no kvcalc preset
        return spec.family in V2_ARCH_FAMILIES_023 and not vision and not spec.is_moe
    return not spec.is_moe and not _hybrid(spec)


def v2_cudagraph_estimate_made(spec, config) -> bool:
    """False where V2 runs and its profile_cudagraph_memory returns 0 (0.22.0 - 0.28.x)."""
    return not (
        vllm_uses_v2_runner(spec, config) and config.version_tuple < V2_CUDAGRAPH_ESTIMATE_FROM
    )


def v2_dummy_sampler_peak_bytes(
    rows: int, vocab: int, vocab_padded: int, act_bytes: int, tp: int
) -> int:
    """V2's _dummy_sampler_run at its peak: `self.model.compute_logits(hidden_states)` gives
    rows x padded-vocabulary logits in the model dtype (LogitsProcessor, no fp32 copy). With
    TP the LM head's shard, rows x vocab_padded / tp, is all-gathered into a new
    (tp x rows, vocab_padded / tp) tensor and movedim + reshape copy it to (rows, vocab_padded)
    (CudaCommunicator.all_gather, cuda_communicator.py), all three alive at the copy. The
    sampler itself is greedy: the dummy requests' temperature is 0 (SamplingStates' buffers are
    torch.zeros, buffer_utils.UvaBackedTensor), top-k / top-p are unset, so apply_sampling_params
    returns the logits as they are and gumbel_sample, once the gather's tensors are freed,
    allocates rows x cdiv(vocab, 1024) x 12 B (int64 argmax + fp32 max: 0.27.1 sdist,
    sample/sampler.py, sample/gumbel.py)."""
    logits = rows * vocab_padded * act_bytes
    gather = 0 if tp == 1 else logits + logits // tp
    gumbel = rows * -(-vocab // 1024) * 12
    return logits + max(gather, gumbel)


def vllm_v2_activation_bytes(spec, config, act_dtype: str) -> int:
    """V2's profile-run peak on the last pipeline rank (kvcalc charges every rank that rank's
    peak): the larger of the dummy forward at max_num_batched_tokens (the compiled forward's
    live set, calc.serving.vllm_compiled, for a dense GQA model; calc.activation.
    forward_activation_bytes, the generic estimate, for others) and the dummy sampler
    (v2_dummy_sampler_peak_bytes) with what profile_run still holds then: `hidden_states,
    sample_hidden_states = self._dummy_run(...)`, T + rows rows of hidden (model_runner.py
    profile_run / _dummy_run, 0.22.0 - 0.33.0 sdists). min(T, max_num_seqs) rows: _dummy_run's
    num_reqs, one logit each."""
    a = dtype_bits(act_dtype) // 8
    T, tp = config.max_num_batched_tokens, config.tensor_parallel_size
    rows = min(T, config.max_num_seqs)
    vp = -(-spec.vocab_size // VOCAB_PADDING) * VOCAB_PADDING
    if compiled_forward_applies(spec):
        forward = compiled_forward_bytes(spec, tp, T, a)
    else:
        forward = forward_activation_bytes(spec, tp, T, act_dtype)
    sampler = (
        v2_dummy_sampler_peak_bytes(rows, spec.vocab_size, vp, a, tp)
        + (T + rows) * spec.hidden_size * a
    )
    return max(forward, sampler)
