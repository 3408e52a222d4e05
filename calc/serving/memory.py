"""The engines' KV-cache arithmetic, written out from their source, one formula per function.

Every function takes Python ints or numpy arrays (broadcast together), so one code path serves
a single plan and a grid of plans.

vLLM V1 (vllm/v1/kv_cache_interface.py, vllm/v1/core/kv_cache_utils.py):
- page: one block of one layer, `2 x block_size x kv_heads x head_size x dtype bytes`
  (AttentionSpec.page_size_bytes; MLA keeps one latent instead of K and V).
- layers are put in KV-cache groups of equal size; every group shares one block pool, so
  num_blocks = available // page // layers_per_group (get_num_blocks), the minimum over the
  pipeline ranks (get_kv_cache_configs).
- "GPU KV cache size: N tokens" = num_blocks // groups x block_size (_report_kv_cache_config);
  0.7.3 up to the grouped report printed num_blocks x block_size, the same for one group.
  From 0.21.0 it is int(max_concurrency x max_model_len) for every model ("Sourcing this from
  the concurrency calculation handles hybrid layouts correctly", _report_kv_cache_config in the
  0.21.0 sdist; get_kv_cache_capacity from 0.24.0): the same for one full-attention group when
  max_model_len is a multiple of the block, else the float product truncated.
- "Maximum concurrency for L tokens per request" = num_blocks / blocks one request of L tokens
  needs (get_max_concurrency_for_kv_cache_config; a full-attention layer needs
  ceil(L / block_size) blocks); before the grouped report it was tokens / L.
- a max_model_len whose blocks do not fit is refused (_check_enough_kv_cache_memory), naming
  the longest that fits (the largest L with blocks(L) x page x layers <= available).
vLLM V0 (vllm/worker/worker.py, vllm/engine/llm_engine.py): "# GPU blocks: N" with
  N = available // (block_size x bytes per token of every layer); concurrency N x block_size / L;
  a max_model_len over N x block_size is refused.
SGLang (python/sglang/srt/model_executor/model_runner.py, mem_cache/memory_pool.py):
- cell: one token of every layer, `kv_heads x head_dim x layers x 2 x dtype bytes`;
- max_total_num_tokens = int(rest x 2^30 // cell), rest = GiB free after loading the weights
  minus total x (1 - mem_fraction_static) (profile_max_num_token), then whole pages;
- the pool holds tokens + page_size rows (slot 0 is padding): "K size: X GB" is that many
  rows x kv_heads x head_dim x layers x dtype bytes / 2^30, i.e. GiB although it says GB.
"""

from __future__ import annotations

import numpy as np

GIB = 2**30


def cdiv(a, b):
    return -(-a // b)


def _minimum(a, b):
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.minimum(a, b)
    return min(a, b)


def _maximum(a, b):
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.maximum(a, b)
    return max(a, b)


# --- vLLM -------------------------------------------------------------------------------------


def vllm_page_bytes(block_size, kv_heads, head_size, kv_bytes, mla: bool = False):
    """One block of one layer. MLA caches one latent of `head_size` per token, no V."""
    return (1 if mla else 2) * block_size * kv_heads * head_size * kv_bytes


def vllm_num_blocks(available_bytes, page_bytes, layers_per_group):
    """Blocks in the shared pool of one rank; 0 when nothing is available."""
    return _maximum(available_bytes // page_bytes // layers_per_group, 0)


def vllm_gpu_kv_cache_tokens(num_blocks, block_size, groups=1):
    """The 'GPU KV cache size: N tokens' figure (V1)."""
    return num_blocks // groups * block_size


TOKENS_FROM_CONCURRENCY = (0, 21, 0)


def vllm_tokens_from_concurrency(max_concurrency, max_model_len):
    """The 'GPU KV cache size: N tokens' figure from 0.21.0: int(max_concurrency x L), the
    float product truncated as Python's int() does (numpy: astype, the same for >= 0)."""
    product = max_concurrency * max_model_len
    if isinstance(product, np.ndarray):
        return product.astype(np.int64)
    return int(product)


def vllm_blocks_per_request(max_model_len, block_size):
    """Blocks a full-attention group needs for one request of max_model_len tokens."""
    return cdiv(max_model_len, block_size)


def vllm_max_concurrency(num_blocks, blocks_per_request, tokens, max_model_len, grouped=True):
    """'Maximum concurrency for L tokens per request' (V1): blocks over blocks per request in
    the grouped report, tokens / L before it."""
    if grouped:
        return num_blocks / blocks_per_request
    return tokens / max_model_len


def vllm_longest_fitting_len(available_bytes, page_bytes, layers, block_size):
    """The largest max_model_len whose blocks fit (full attention: whole blocks)."""
    return _maximum(available_bytes // (page_bytes * layers), 0) * block_size


def vllm_v1_refusal(max_model_len, needed_bytes, available_bytes, longest):
    """vLLM V1's start-up error when one request of max_model_len does not fit, or None."""
    if available_bytes <= 0:
        return (
            "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` "
            "when initializing the engine."
        )
    if needed_bytes <= available_bytes:
        return None
    return (
        f"To serve at least one request with the models's max seq len ({max_model_len}), "
        f"({needed_bytes / GIB:.2f} GiB KV cache is needed, which is larger than the available "
        f"KV cache memory ({available_bytes / GIB:.2f} GiB). Based on the available memory, "
        f"the estimated maximum model length is {longest}. Try increasing "
        "`gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine."
    )


def vllm_v0_refusal(max_model_len, num_blocks, block_size):
    if num_blocks <= 0:
        return (
            "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` "
            "when initializing the engine."
        )
    if max_model_len <= num_blocks * block_size:
        return None
    return (
        f"The model's max seq len ({max_model_len}) is larger than the maximum number of tokens "
        f"that can be stored in KV cache ({num_blocks * block_size}). Try increasing "
        "`gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine."
    )


def vllm_available_bytes(
    total_bytes, utilization, weights_bytes, activation_bytes, non_torch_bytes, cudagraph_bytes
):
    """determine_available_memory: total x utilization (a float in vLLM) minus what the profile
    run saw, floored to whole bytes."""
    out = total_bytes * utilization - weights_bytes - activation_bytes - non_torch_bytes
    out = out - cudagraph_bytes
    if isinstance(out, np.ndarray):
        return np.floor(out).astype(np.int64)
    return int(out // 1)


def vllm_v0_profile_peak_bytes(tokens, hidden, q_width, kv_width, inter, act_bytes):
    """The V0 profile run's activation peak on one TP rank (torch's allocated peak minus the
    weights; the KV caches are empty tensors in the dummy run), for a dense decoder with a gated
    MLP run eagerly, `tokens` = max_num_batched_tokens (V0: max(max_model_len, 2048) without
    chunked prefill). Alive at once (vllm/model_executor/models/llama.py @ e06c9ba2a6ea,
    LlamaModel / LlamaDecoderLayer / LlamaMLP / LlamaAttention.forward, unchanged in structure
    since V0): the model loop's hidden_states and residual (2h), the layer's own hidden_states
    (h), and
    - in the MLP: gate_up_proj's output (2I) while SiluAndMul writes its output (I): 3I;
    - in attention: qkv (q + 2kv), the attention output (q) and o_proj's output (h is counted
      as the layer's hidden_states): 2q + 2kv.
    So T x a x (3h + max(3I, 2q + 2kv)). vllm#10517 (0.6.4, RTX 3090, Llama-3.1-8B) logged
    peak_torch 17.06 / 17.98 GiB over 14.9888 GiB of weights at T = 20000 / 29000."""
    return tokens * act_bytes * (3 * hidden + _maximum(3 * inter, 2 * q_width + 2 * kv_width))


def vllm_v1_sort_sampler_peak_bytes(rows, vocab, vocab_padded, logits_bytes):
    """The V1 profile run's dummy sampler at its peak, on the native top-k/top-p path (a full
    sort of the vocabulary), `rows` = min(max_num_batched_tokens, max_num_seqs) requests.
    _dummy_sampler_run asks for top_k = V - 1 and top_p = 0.9 with no penalties and no logprobs
    (vllm 0.8.0-0.16.x sdists, vllm/v1/worker/gpu_model_runner.py), so Sampler.forward
    (vllm/v1/sample/sampler.py) and TopKTopPSampler.forward_native -> apply_top_k_top_p
    (vllm/v1/sample/ops/topk_topp_sampler.py) hold, while `logits.sort(dim=-1)` runs:
    - the LM head's logits in the model dtype, rows x padded vocabulary (compute_logits slices
      [..., :vocab] as a view; the caller keeps the tensor): vocab_padded x logits_bytes;
    - Sampler.forward's `logits.to(torch.float32)`: 4 B a logit;
    - the sort's outputs, values (fp32) and indices (int64): 4 + 8 B;
    - inside torch's CUDA sort, for rows >= 128 segments (aten/src/ATen/native/cuda/
      SortStable.cu, segmented_sort_pairs): the int64 reverse-index input (8 B) and cub's
      DeviceSegmentedRadixSort temporary storage, which holds the alternate key and value
      buffers when the input may not be overwritten (4 + 8 B).
    The later steps (masks, softmax, scatter: 7 x 4 B a logit at most) stay below this.
    So rows x (vocab_padded x logits_bytes + 36 x vocab). A vLLM 0.11.0 DEBUG line of
    Qwen3-8B at 2048 batched tokens and 256 sequences ("torch peak memory increase: 1.40GiB")
    is this term plus vllm_v1_sampler_live_bytes (tests/test_serving_overheads.py)."""
    return rows * (vocab_padded * logits_bytes + 36 * vocab)


def vllm_v1_sampler_live_bytes(tokens_held, rows, hidden, act_bytes, random_copy=True):
    """What the V1 profile run still holds from its dummy forward while the sampler runs:
    from 0.9.2 profile_run keeps both `hidden_states, last_hidden_states = _dummy_run(...)`,
    the last layer's output (`tokens_held` = max_num_batched_tokens rows; 0.8.0-0.9.1 return
    only the gather, so pass 0); the gather at each request's last token, rows x hidden; and
    from 0.9.0 _dummy_sampler_run's `torch.rand_like` copy of it, rows x hidden (vllm 0.8.0 -
    0.10.0 sdists, vllm/v1/worker/gpu_model_runner.py, profile_run / _dummy_run /
    _dummy_sampler_run)."""
    return (tokens_held + rows * (2 if random_copy else 1)) * hidden * act_bytes


def vllm_v1_triton_sampler_peak_bytes(rows, vocab, vocab_padded, logits_bytes, num_sms):
    """The V1 profile run's dummy sampler at its peak when apply_top_k_top_p runs its Triton
    kernel (>= 8 rows; vllm 0.17.0-0.19.0 sdists, vllm/v1/sample/ops/topk_topp_sampler.py,
    topk_topp_triton.py, vllm/v1/sample/sampler.py; FlashInfer's sampler is opt-in there). While
    random_sample's `probs.div_(q).argmax` runs, these are alive:
    - the LM head's logits in the model dtype, rows x padded vocabulary (_dummy_sampler_run
      keeps them): vocab_padded x logits_bytes;
    - Sampler.forward's `logits.to(torch.float32)`: 4 B a logit, none for an fp32 model (.to
      returns the same tensor);
    - forward_native's `probs = logits.softmax(dim=-1, dtype=torch.float32)` and random_sample's
      `q = torch.empty_like(probs)`: 4 + 4 B (the top-k/top-p masking is in place);
    - apply_top_k_top_p_triton's per-program buffer, cached for the process
      (_TRITON_BUFFER_CACHE): min(next_power_of_2(programs), SMs) rows x vocab, fp32, with
      programs = min(SMs, rows)."""
    programs = min(num_sms, rows)
    buffer_rows = min(1 << (programs - 1).bit_length(), num_sms)
    copy = 0 if logits_bytes == 4 else 4
    return rows * (vocab_padded * logits_bytes + (copy + 8) * vocab) + buffer_rows * vocab * 4


def vllm_triton_moe_workspace_bytes(tokens, n, k, top_k, act_bytes):
    """The fused-MoE workspace of vLLM V1 0.18.0-0.19.x for the Triton experts (the unquantized
    backend on an H100: 'Using TRITON backend for Unquantized MoE'), one buffer per process that
    every MoE layer reuses and that stays allocated after the forward, so it sits under both the
    forward's and the sampler's peak. FusedMoEKernel._allocate_buffers (0.18.0 / 0.19.0 sdists,
    vllm/model_executor/layers/fused_moe/modular_kernel.py; no chunking in these releases, so
    M_chunk = M_full = tokens) asks WorkspaceManager.get_simultaneous (vllm/v1/worker/
    workspace.py: each part rounded up to 256 B, one uint8 tensor) for
    - workspace13, shared with the fused output: max(M x top_k x max(N / 2, K), M x K) elements;
    - workspace2: M x top_k x max(N, K) elements;
    in the activation dtype (workspace_dtype), with TritonExperts.workspace_shapes (fused_moe.py;
    a gated activation halves N) and moe_problem_size: N = w13's rows on this rank (gate + up,
    2 x moe_intermediate / TP), K = hidden size."""
    ws13 = _maximum(tokens * top_k * _maximum(n // 2, k), tokens * k) * act_bytes
    ws2 = tokens * top_k * _maximum(n, k) * act_bytes
    return cdiv(ws13, 256) * 256 + cdiv(ws2, 256) * 256


def vllm_mla_profile_prefill_bytes(workspace_tokens, heads, nope_plus_v, act_bytes):
    """The tensor vLLM V1's MLA layer allocates in the profile run (attn_metadata is None) to
    stand for kv_b_proj's up-projection of a chunked-prefill context: chunked_prefill_workspace_
    size x heads on this rank x (qk_nope_head_dim + v_head_dim), model dtype (0.19.0 sdist,
    vllm/model_executor/layers/attention/mla_attention.py, MLAAttention.forward_impl; the same
    block since 0.11.0 in vllm/v1/attention/backends/mla/common.py). It is freed on return, so it
    adds to the forward's peak only."""
    return workspace_tokens * heads * nope_plus_v * act_bytes


def vllm_mla_chunked_prefill_workspace_tokens(max_model_len, max_num_seqs, block_size):
    """MLACommonMetadataBuilder.determine_chunked_prefill_workspace_size (0.19.0 sdist,
    mla_attention.py): min(max(8 x max_model_len, 4 x max_num_seqs x block_size), 64 Ki),
    at least max_num_seqs x block_size."""
    w = min(max(8 * max_model_len, 4 * max_num_seqs * block_size), 64 * 1024)
    return max(w, max_num_seqs * block_size)


def vllm_v1_mm_profile_held_bytes(items, pixel_values_per_item, embeds_per_item, hidden, act_bytes):
    """What vLLM V1's profile run of a multimodal model still holds while the text forward and
    the dummy sampler run (0.19.0 sdist, vllm/v1/worker/gpu_model_runner.py, profile_run): the
    dummy batch of `items` images of the maximum feature size (batched_dummy_mm_inputs, a local
    kept to the end: pixel values in the model dtype) and the encoder's outputs, stored in
    encoder_cache["tmp_i"] until the sampler is done (embed_multimodal: embeds_per_item rows of
    the text model's hidden size each). items, pixels and embeddings per item come from the
    model's processor ('Encoder cache will be initialized with a budget of B tokens, and profiled
    with N image items of the maximum feature size'). The vision encoder's own forward runs before
    and peaks on its own; it is not written out here."""
    return items * (pixel_values_per_item + embeds_per_item * hidden) * act_bytes


# --- SGLang -----------------------------------------------------------------------------------


def sglang_cell_bytes(kv_heads, head_dim, layers, kv_bytes, mla: bool = False):
    """One token of every layer on one rank (MLA: the latent plus the rope key, no V)."""
    return kv_heads * head_dim * layers * (1 if mla else 2) * kv_bytes


def sglang_rest_bytes(free_after_weights_bytes, total_bytes, mem_fraction_static):
    """profile_max_num_token's budget: free memory after the weights minus the reserve."""
    reserve = total_bytes * (1 - mem_fraction_static)
    if isinstance(reserve, np.ndarray):
        return free_after_weights_bytes - reserve.astype(np.int64)
    return free_after_weights_bytes - int(reserve)


def sglang_max_total_tokens(rest_bytes, cell_bytes, page_size=1, headroom=0):
    """max_total_num_tokens, rounded down to whole pages; 0 or less means the engine refuses.
    `headroom`: the tokens speculative decoding adds to the profiled count (sglang_spec)."""
    return _maximum(rest_bytes // cell_bytes + headroom, 0) // page_size * page_size


def sglang_k_size_bytes(tokens, page_size, kv_heads, head_dim, layers, kv_bytes):
    """The K buffers of the token pool (V is the same size): tokens + page_size rows."""
    return (tokens + page_size) * kv_heads * head_dim * layers * kv_bytes


def sglang_swa_tokens(max_total_tokens, full_layers, swa_layers, swa_full_tokens_ratio):
    """(full_layer_tokens, swa_layer_tokens): model_runner.set_num_token_hybrid shares the
    token-layers of the one-pool budget so that the sliding pool holds ratio x the full one:
    full = int(tokens x layers / (ratio x swa_layers + full_layers)), swa = int(full x ratio)."""
    total = max_total_tokens * (full_layers + swa_layers)
    denominator = swa_full_tokens_ratio * swa_layers + full_layers
    full = total / denominator
    if isinstance(full, np.ndarray):
        full = full.astype(np.int64)
        return full, (full * swa_full_tokens_ratio).astype(np.int64)
    full = int(full)
    return full, int(full * swa_full_tokens_ratio)


def sglang_refusal(max_total_tokens):
    if max_total_tokens <= 0:
        return "Not enough memory. Please try to increase --mem-fraction-static."
    return None
