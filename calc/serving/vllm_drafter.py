"""The weights of vLLM's MTP drafter, which its "Model loading took" line counts.

GPUModelRunner.load_model loads the drafter (`self.drafter.load_model(self.model)`) inside the
same DeviceMemoryProfiler block as the target. The figure is torch.cuda.max_memory_allocated
after reset_peak_memory_stats, i.e. the tensors still allocated once both are built. Read in
the sdists 0.11.0 - 0.33.0: vllm/v1/worker/gpu_model_runner.py, vllm/utils/mem_utils.py,
vllm/platforms/cuda.py get_current_memory_usage, vllm/v1/spec_decode/eagle.py (0.20.0 on:
llm_base_proposer.py) load_model, model_executor/models/deepseek_mtp.py, glm4_moe_mtp.py,
glm4_moe_lite_mtp.py, qwen3_next_mtp.py, qwen3_5_mtp.py.

Each MTP layer is built under the target's quant_config:
- one decoder block like the target's last attention layer (DeepSeek / GLM: DeepseekV2 /
  Glm4Moe decoder layer `mtp_block` at index L, an MoE layer; Qwen3-Next / 3.5: a decoder layer
  with layer_type="full_attention"), its Attention scalars included;
- DeepSeek / GLM: `eh_proj`, a plain torch nn.Linear(2h, h) (replicated on every rank, in the
  model dtype: no quant_config); `enorm`, `hnorm` and SharedHead.norm;
- Qwen3-Next / 3.5: `fc`, a ColumnParallelLinear(2h, h) (its output rows split over TP);
  `pre_fc_norm_hidden`, `pre_fc_norm_embedding`, `norm`.

What the proposer's load_model frees again, so it is not counted:
- the drafter's own VocabParallelEmbedding: MTP models share the target's (0.11.0: when the
  shapes match, always for an MTP drafter; 0.12.0 on: "Detected MTP model. Sharing target model
  embedding weights with the draft model.");
- Qwen's model-level ParallelLMHead, replaced by the target's lm_head;
- DeepSeek / GLM's per-layer SharedHead.head only from 0.16.0 ("Shared target model lm_head
  with MTP shared_head.head", vllm PR #34385, merged 2026-02). Up to 0.15.1 it stays: one padded
  vocabulary / TP x h table in the model dtype per MTP layer (0.15.x published no sdist: read
  in the 0.15.0 and 0.15.1 manylinux wheels, v1/spec_decode/eagle.py, which never names it).

A quantized DeepSeek / GLM checkpoint's MTP layer counts its stored bytes (calc.quant.sharding,
the spec with include_mtp: eh_proj unquantized, as DeepSeek-V3's F8_E4M3 count shows) and, for
MLA, the dequantized kv_b_proj copy every MLA layer keeps (calc.serving.sharding). Runtime
--quantization fp8 counts calc.serving.quant_weights' online fp8 layer.
Not modelled (None): kvcalc's whole-model int8 / int4 / fp8 weight_dtype, and a quantized
Qwen3-Next / 3.5 checkpoint (whether its config quantizes mtp.fc is not read).

0.34.0 drops V1's proposer: Model Runner V2's speculators load the drafter, still inside the
target's DeviceMemoryProfiler block (vllm/v1/worker/gpu/model_runner.py load_model:
`self.speculator.load_model(self.model)`). Read in the 0.34.0 sdist (spec_decode/mtp/
speculator.py, multi_module_mtp/speculator.py, speculator.py, target_dependent_ar/
speculator.py, eagle/utils.py load_eagle_model); the five MTP modules are as in 0.33.0:
- the same sharing: maybe_share_target_embed and share_target_lm_head share unless the drafter
  declares has_own_embed_tokens / has_own_lm_head (no MTP model above does), and every layer's
  shared_head.head becomes the target's head;
- new: the drafter's inputs_embeds buffer, torch.zeros(max_num_batched_tokens, h) in the model
  dtype, is allocated in load_model (V1 made it in the proposer's __init__, before the
  profiler), and only when both the target takes multimodal inputs and the drafter merges
  multimodal embeddings: Qwen3_5MTP (SupportsMultiModal) under a Qwen3.5 checkpoint with its
  vision tower. The multi-module speculator (more than one MTP module and k > 1,
  SpeculativeConfig.use_multi_module_mtp) adds cached_draft_input_embeds, (max_num_seqs, k - 1,
  h). Each is served from the freed tables' blocks (split: its bytes rounded to 512);
- the draft logits cache only with draft_sample_method "probabilistic" (kvcalc plans the
  default "greedy"); --draft-lm-head-quantization's quantized head copy is not taken.
"""

from __future__ import annotations

import functools
from math import ceil

from calc.params import norm_params
from calc.sharding import QUANTIZED_DTYPES

SHARED_HEAD_FROM = (0, 16, 0)
# families whose MTP layer is DeepSeek's (eh_proj, enorm / hnorm, SharedHead); the others
# (Qwen3-Next, Qwen3.5) build fc and the pre-fc norms
SHARED_HEAD_FAMILIES = frozenset({"deepseek", "deepseek_v3", "glm", "glm4_moe", "glm4_moe_lite"})


def block_layer(spec) -> int:
    """The target layer whose tensors an MTP block repeats: the last attention layer (not a
    linear-attention or Mamba layer)."""
    kinds = spec.layer_kinds
    return max(i for i, (a, _) in enumerate(kinds) if a not in ("linear_attention", "mamba"))


def own_heads(spec, version: tuple[int, ...]) -> int:
    """SharedHead.head tables each MTP layer keeps (module docstring): 1 or 0."""
    return int(spec.family in SHARED_HEAD_FAMILIES and version < SHARED_HEAD_FROM)


# Model Runner V2's speculators allocate the drafter's input buffers inside the load (docstring)
V2_LOAD_BUFFERS_FROM = (0, 34, 0)


def drafter_modelled(spec, weight_dtype: str) -> bool:
    """Whether vllm_mtp_drafter_bytes gives a figure for this model and dtype (every release
    from vllm_spec.MTP_FROM on is read)."""
    if weight_dtype in QUANTIZED_DTYPES:
        return False
    return spec.quantization is None or spec.family in SHARED_HEAD_FAMILIES


@functools.lru_cache(maxsize=1024)
def vllm_mtp_drafter_bytes(
    spec, version: tuple[int, ...], weight_dtype: str, tp: int, ep: int, layers: int, runtime=None
) -> int | None:
    """Bytes `layers` MTP layers add to one rank's "Model loading took" (module docstring);
    `weight_dtype` the model dtype, `runtime` vLLM's --quantization."""
    from calc.dtypes import dtype_bits
    from calc.serving.sharding import mla_kv_b_copy_bytes, padded_vocab

    if not drafter_modelled(spec, weight_dtype):
        return None
    wb = dtype_bits(weight_dtype) // 8
    head = own_heads(spec, version) * ceil(padded_vocab(spec.vocab_size) / tp) * spec.hidden_size
    head *= wb
    if spec.quantization is not None:
        from calc.serving.quant_weights import _kv_b_quantized

        kv_b = mla_kv_b_copy_bytes(spec, tp, wb) if _kv_b_quantized(spec) else 0
        return layers * (_stored_layer(spec, tp, ep, layers, weight_dtype) + kv_b + head)
    j = block_layer(spec)
    if runtime is not None:  # online fp8: the block as quant_weights prices it
        from calc.serving.quant_weights import FP8_SCALE_BYTES, _fp8_layer_bytes

        block = _fp8_layer_bytes(spec, j, tp, ep, wb) + 3 * norm_params(spec) * wb + head
        block += mla_kv_b_copy_bytes(spec, tp, wb)  # online fp8 quantizes every kv_b_proj
        return layers * (block + _projection(spec, tp, wb, fp8_scale=FP8_SCALE_BYTES))
    block = _allocated_block(spec, j, tp, ep, wb, version)
    return layers * (block + _rounded_extras(spec, tp, wb, head))


def v2_load_buffers(
    spec,
    version: tuple[int, ...],
    weight_dtype: str,
    layers: int,
    k: int,
    tokens: int,
    seqs: int,
    images: bool = True,
) -> int:
    """Bytes Model Runner V2's MTP speculator allocates in the load besides the drafter's
    weights (module docstring): its inputs_embeds, max_num_batched_tokens `tokens` x h, and
    with more than one module and k > 1 cached_draft_input_embeds, `seqs` x (k - 1) x h, in the
    model dtype; 0 before 0.34.0, for a drafter that takes no multimodal embeddings and for a
    target that takes no images (`images` False: --language-model-only, calc.serving.
    vllm_towers)."""
    from calc.dtypes import dtype_bits

    multimodal = images and spec.vision is not None and spec.family not in SHARED_HEAD_FAMILIES
    if tuple(version[:3]) < V2_LOAD_BUFFERS_FROM or not multimodal:
        return 0
    row = spec.hidden_size * dtype_bits(weight_dtype) // 8
    sizes = [tokens * row]
    if min(layers, k) > 1:  # SpeculativeConfig.use_multi_module_mtp
        sizes.append(seqs * (k - 1) * row)
    return sum(-(-n // 512) * 512 for n in sizes)  # torch's 512 B blocks


def _projection(spec, tp: int, wb: int, fp8_scale: int = 0) -> int:
    """eh_proj (replicated nn.Linear, model dtype) or fc (ColumnParallelLinear, h / tp rows;
    with `fp8_scale`, online fp8 quantizes it, a LinearBase: 1 byte a value and one scale)."""
    h = spec.hidden_size
    if spec.family in SHARED_HEAD_FAMILIES:
        return 2 * h * h * wb
    values = h // tp * 2 * h
    return values + fp8_scale if fp8_scale else values * wb


def _rounded_extras(spec, tp: int, wb: int, head: int) -> int:
    """The projection, the three norms and a kept head, each its own tensor as torch's caching
    allocator rounds it."""
    from calc.serving.allocator import caching_allocator

    sizes = [_projection(spec, tp, wb), *(norm_params(spec) * wb,) * 3, head]
    return caching_allocator([n for n in sizes if n])[0]


def _allocated_block(spec, j: int, tp: int, ep: int, wb: int, version) -> int:
    """The MTP block's tensors on one rank as vLLM allocates the target's layer j (the rotary
    table is get_rope's cached one: not allocated again)."""
    from calc.serving.allocator import caching_allocator
    from calc.serving.load_events import attention_scalars, vllm_load_events

    events = vllm_load_events(spec, tp, ep, [j], wb, scalars=attention_scalars(version))
    return caching_allocator(events)[0]


def _stored_layer(spec, tp: int, ep: int, layers: int, dtype: str) -> int:
    """One MTP layer of a quantized checkpoint on one rank: its stored bytes (the spec with
    `layers` MTP layers counted, less the spec without them, per layer)."""
    from calc.quant.sharding import stored_bytes_per_gpu

    with_mtp = spec.replace(num_nextn_predict_layers=layers, include_mtp=True)
    a = sum(stored_bytes_per_gpu(with_mtp, tp, ep, dtype).values())
    b = sum(stored_bytes_per_gpu(spec.replace(include_mtp=False), tp, ep, dtype).values())
    return (a - b) // layers
