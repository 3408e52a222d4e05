"""vLLM's profile run, term by term: what its dummy forward and dummy sampler hold at their peak
(the activation part of "Available KV cache memory"), one formula per function, each from the
sdists it names. Like calc/serving/memory.py (the KV-cache arithmetic) every function takes
Python ints or numpy arrays; calc/serving/overheads.py adds the terms up per release.
"""

from __future__ import annotations

from calc.serving.memory import _maximum, cdiv


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
