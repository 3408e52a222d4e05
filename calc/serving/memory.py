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


# The start-up error's wording by release (vllm/v1/core/kv_cache_utils.py, kv_cache_planning.py
# from 0.33.0; read in the 0.8.0 - 0.14.0, 0.17.0, 0.20.0 - 0.22.0, 0.24.0 - 0.34.0 sdists):
# 0.8.0 - 0.8.2 print "GB" and no estimate, 0.8.3 "GiB"; 0.8.4 - 0.9.0 append only " Based on
# the available memory," (the f-string with the length is a separate statement there), then
# "  Try"; 0.9.1 adds the estimated length; 0.13.0 adds the docs link; 0.22.0 says "model's" and names the CPU backend; 0.34.0 words the
# advice by sizing mode (_more_kv_cache_memory_hint). From 0.29.0 the memory checked is the
# available memory less one block of every group: "Reserve the null block BlockPool permanently
# holds back" (check_memory, get_kv_cache_configs / check_enough_kv_cache_memory).
REFUSAL_GIB_FROM = (0, 8, 3)
REFUSAL_ESTIMATE_FROM = (0, 8, 4)
REFUSAL_LENGTH_FROM = (0, 9, 1)
REFUSAL_DOCS_FROM = (0, 13, 0)
REFUSAL_CPU_FROM = (0, 22, 0)
REFUSAL_HINT_FROM = (0, 34, 0)
NULL_BLOCK_CHECK_FROM = (0, 29, 0)
_DOCS = "See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details."
_CPU_HINT = (
    "Try increasing `gpu_memory_utilization` when initializing the engine (this flag also "
    "controls CPU memory reservation on the CPU backend, despite its name)."
)


def vllm_refusal_hint(extensible: bool, utilization: float, after_warmup: bool) -> str:
    """0.34.0's _more_kv_cache_memory_hint."""
    if not extensible:
        return _CPU_HINT
    used_by = "the model and its activations"
    graphs = ""
    if after_warmup:
        used_by = "the model, its activations, CUDA graphs and warmup"
        graphs = (
            " CUDA graphs take less with fewer or smaller capture sizes in the compilation config."
        )
    if utilization < 1.0:
        return (
            f"The KV cache gets what is left after {used_by} within `gpu_memory_utilization`="
            f"{utilization}; increase it (with the extensible KV cache it defaults to 1.0) or "
            f"decrease `max_model_len` or `max_num_seqs`.{graphs}"
        )
    return (
        f"The extensible KV cache already takes all device memory left after {used_by}; "
        f"decrease `max_model_len` or `max_num_seqs`, or the model needs a device with more "
        f"memory.{graphs}"
    )


def vllm_v1_refusal(
    max_model_len, needed_bytes, available_bytes, longest, version=(0, 11, 0), hint=None
):
    """vLLM V1's start-up error when one request of max_model_len does not fit, or None, in the
    release's words (`hint`: 0.34.0's advice, vllm_refusal_hint; `available_bytes`: the memory
    checked, less the null block's from NULL_BLOCK_CHECK_FROM)."""
    v = tuple(version[:3])
    if v >= REFUSAL_HINT_FROM:
        hint = hint or _CPU_HINT
    if available_bytes <= 0:
        if v >= REFUSAL_HINT_FROM:
            return f"No available memory for the cache blocks. {hint} {_DOCS}"
        if v >= REFUSAL_CPU_FROM:
            return f"No available memory for the cache blocks. {_CPU_HINT} {_DOCS}"
        tail = f" {_DOCS}" if v >= REFUSAL_DOCS_FROM else ""
        return (
            "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` "
            f"when initializing the engine.{tail}"
        )
    if needed_bytes <= available_bytes:
        return None
    whose = "model's" if v >= REFUSAL_CPU_FROM else "models's"
    if v < REFUSAL_LENGTH_FROM:
        unit = "GiB" if v >= REFUSAL_GIB_FROM else "GB"
        tail = (
            "Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when "
            "initializing the engine."
        )
        head = (
            f"To serve at least one request with the models's max seq len ({max_model_len}), "
            f"({needed_bytes / GIB:.2f} {unit} KV cache is needed, which is larger than the "
            f"available KV cache memory ({available_bytes / GIB:.2f} {unit})."
        )
        if v < REFUSAL_ESTIMATE_FROM:
            return f"{head} {tail}"
        cut = " Based on the available memory," if longest > 0 else ""
        return f"{head}{cut}  {tail}"
    head = (
        f"To serve at least one request with the {whose} max seq len ({max_model_len}), "
        f"({needed_bytes / GIB:.2f} GiB KV cache is needed, which is larger than the available "
        f"KV cache memory ({available_bytes / GIB:.2f} GiB). "
    )
    estimate = (
        f"Based on the available memory, the estimated maximum model length is {longest}."
        if longest > 0
        else ""
    )
    if v < REFUSAL_DOCS_FROM:  # f"{estimated_msg} " (0.11.0)
        return (
            f"{head}{estimate} Try increasing `gpu_memory_utilization` or decreasing "
            "`max_model_len` when initializing the engine."
        )
    estimate += " " if estimate else ""
    if v >= REFUSAL_HINT_FROM:
        return f"{head}{estimate}{hint} Decreasing `max_model_len` also reduces what is needed. {_DOCS}"
    if v >= REFUSAL_CPU_FROM:
        advice = (
            "Try increasing `gpu_memory_utilization` (which also controls CPU memory on the CPU "
            "backend) or decreasing `max_model_len` when initializing the engine."
        )
    else:
        advice = (
            "Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when "
            "initializing the engine."
        )
    return f"{head}{estimate}{advice} {_DOCS}"


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
