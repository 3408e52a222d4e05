"""vLLM's start-up refusals, in each release's words: V1's one-request check
(_check_enough_kv_cache_memory) and V0's block check. The memory they are given is
calc.serving.figures' (less the null block from NULL_BLOCK_CHECK_FROM)."""

from __future__ import annotations

GIB = 2**30

# The start-up error's wording by release (vllm/v1/core/kv_cache_utils.py, kv_cache_planning.py
# from 0.33.0; read in the 0.8.0 - 0.14.0, 0.17.0, 0.20.0 - 0.22.0, 0.24.0 - 0.34.0 sdists):
# 0.8.0 - 0.8.2 print "GB" and no estimate, 0.8.3 "GiB"; 0.8.4 - 0.9.0 append only " Based on
# the available memory," (the f-string with the length is a separate statement there), then
# "  Try"; 0.9.1 adds the estimated length; 0.13.0 adds the docs link; 0.22.0 says "model's"
# and names the CPU backend; 0.34.0 words the advice by sizing mode (_more_kv_cache_memory_hint).
# From 0.29.0 the memory checked is the available memory less one block of every group:
# "Reserve the null block BlockPool permanently holds back" (check_memory,
# get_kv_cache_configs / check_enough_kv_cache_memory).
# the releases that change the wording, in order: "GiB", the estimate's first half, the length,
# the docs link, the CPU note, the advice by sizing mode
WORDING = ((0, 8, 3), (0, 8, 4), (0, 9, 1), (0, 13, 0), (0, 22, 0), (0, 34, 0))
GIB_FROM, ESTIMATE_FROM, LENGTH_FROM, DOCS_FROM, CPU_FROM, HINT_FROM = WORDING
NULL_BLOCK_CHECK_FROM = (0, 29, 0)
_ADVICE = (  # before 0.22.0
    "Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing "
    "the engine."
)
_NO_MEMORY = (  # before 0.13.0, and V0's
    "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when "
    "initializing the engine."
)
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
    if v >= HINT_FROM:
        hint = hint or _CPU_HINT
    if available_bytes <= 0:
        if v >= HINT_FROM:
            return f"No available memory for the cache blocks. {hint} {_DOCS}"
        if v >= CPU_FROM:
            return f"No available memory for the cache blocks. {_CPU_HINT} {_DOCS}"
        return f"{_NO_MEMORY} {_DOCS}" if v >= DOCS_FROM else _NO_MEMORY
    if needed_bytes <= available_bytes:
        return None
    if v < LENGTH_FROM:
        unit = "GiB" if v >= GIB_FROM else "GB"
        head = (
            f"To serve at least one request with the models's max seq len ({max_model_len}), "
            f"({needed_bytes / GIB:.2f} {unit} KV cache is needed, which is larger than the "
            f"available KV cache memory ({available_bytes / GIB:.2f} {unit})."
        )
        if v < ESTIMATE_FROM:
            return f"{head} {_ADVICE}"
        cut = " Based on the available memory," if longest > 0 else ""
        return f"{head}{cut}  {_ADVICE}"
    whose = "model's" if v >= CPU_FROM else "models's"
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
    if v < DOCS_FROM:  # f"{estimated_msg} " (0.11.0)
        return f"{head}{estimate} {_ADVICE}"
    estimate += " " if estimate else ""
    if v >= HINT_FROM:
        shorter = "Decreasing `max_model_len` also reduces what is needed."
        return f"{head}{estimate}{hint} {shorter} {_DOCS}"
    advice = _ADVICE
    if v >= CPU_FROM:
        advice = (
            "Try increasing `gpu_memory_utilization` (which also controls CPU memory on the CPU "
            "backend) or decreasing `max_model_len` when initializing the engine."
        )
    return f"{head}{estimate}{advice} {_DOCS}"


def vllm_v0_refusal(max_model_len, num_blocks, block_size):
    if num_blocks <= 0:
        return _NO_MEMORY
    if max_model_len <= num_blocks * block_size:
        return None
    return (
        f"The model's max seq len ({max_model_len}) is larger than the maximum number of tokens "
        f"that can be stored in KV cache ({num_blocks * block_size}). {_ADVICE}"
    )
