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
