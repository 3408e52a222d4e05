"""Serving defaults by engine release: what vLLM and SGLang apply to a setting the user left unset,
and the release that changed each.

vLLM (vllm/engine/arg_utils.py, vllm/config/*.py). Each boundary below was read in the released
source distribution of the releases on either side of it (`pip download vllm==X --no-binary
:all:`, the PyPI sdist of that release), not inferred from a PR's merge date:
- block_size 16 on CUDA (read in 0.5.5, 0.6.4, 0.7.3, 0.8.5, 0.9.2, 0.10.2, 0.11.0, 0.16.0,
  0.20.0, 0.33.0); 64 from 0.34.0 (CacheConfig.DEFAULT_BLOCK_SIZE; calc/serving/vllm_block.py).
  gpu_memory_utilization 0.9 (CacheConfig) up to 0.19.x, 0.92 from 0.20.0 (vllm/config/cache.py;
  vllm PR #38284 "Enable CUDAGraph memory profiling by default", which raised both together);
  0.34.0: 1.0 where the extensible KV cache is on (calc/serving/vllm_extensible.py), else 0.92.
- V0 (releases before 0.8.0; VLLM_USE_V1 defaults to "1" in vllm/envs.py from 0.8.0, "0" in
  0.7.3; 0.8.0 release notes: "enabled V1 engine by default (#13726)"): max_num_seqs 256;
  without chunked prefill max_num_batched_tokens = max(max_model_len, 2048) (SchedulerConfig);
  EngineArgs turns chunked prefill on for max_model_len > 32768 on CUDA (not for multimodal,
  sliding-window, LoRA or speculative models, which kvcalc does not check), and the chunk
  budget is then 512 tokens up to 0.6.4.post1, 2048 from 0.6.5 (vllm PR #10544).
- V1 (0.8.0 on), API server (EngineArgs._set_default_args_v1 / get_batch_defaults):
  0.8.0 - 0.8.3: 8192 tokens on "h100" / "h200" by device name, else 2048 (vllm PR #12369);
  1024 sequences on every GPU. 0.8.4: 256 sequences off H100 / H200 (vllm PR #16158).
  0.8.5 and 0.8.5.post1: by memory, >= 70 GiB -> 8192 / 1024, A100-80GB included (vllm PR
  #17073). 0.9.0 on: "a100" excluded again (vllm PR #17885). 0.28.0 on: >= 160 GiB -> 16384 /
  1024 (vllm PR #51726). Unchanged otherwise up to 0.34.0, the newest release read (0.33.0
  also keeps GB10 on the small tier; kvcalc has no GB10 preset).
- the start-up report: V0 logs "# GPU blocks: N"; V1 logged "# GPU blocks: N" too up to 0.7.3
  and "GPU KV cache size: N tokens" from 0.8.0 (vllm/v1/core/kv_cache_utils.py), num_blocks //
  groups x block_size since the hybrid allocator.
SGLang's defaults by release (mem_fraction_static, chunked_prefill_size, cuda_graph_max_bs,
page_size, swa_full_tokens_ratio): calc/serving/defaults_sglang.py.
"""

from __future__ import annotations

# VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE's default (vllm/envs.py of the PyPI sdists):
# "0" in 0.10.1 - 0.13.0, "1" from 0.14.0 (read in 0.14.0, 0.16.0 - 0.33.0); Llama 4's chunked
# layers then form their own KV-cache groups (llm-d-planner's 0.19.0 Scout TP4 log: 91,495
# blocks = 4 groups x 22,873, the variable printed True in its compile-cache factors)
CHUNKED_LOCAL_HYBRID_FROM = (0, 14, 0)
V1_DEFAULT_FROM = (0, 8, 0)  # V1 engine by default (envs.VLLM_USE_V1 "1"; 0.8.0 release notes)
TOKENS_LINE_FROM = (0, 8, 0)  # "GPU KV cache size: N tokens" (0.7.3 still logs "# GPU blocks")
LARGE_GPU_GIB = 70  # get_batch_defaults: H100-class gets the larger batch defaults
XL_GPU_GIB = 160  # ... and B200-class the largest, from V1_XL_BATCH_FROM
V1_SEQS_256_FROM = (0, 8, 4)  # vllm #16158: 256 sequences off H100/H200 (0.8.3: 1024)
V1_BATCH_BY_MEMORY_FROM = (0, 8, 5)  # vllm #17073: by GPU memory, not name, A100 included
V1_A100_SMALL_FROM = (0, 9, 0)  # vllm #17885: "a100" back on the small defaults (0.8.5.post1: not)
V1_XL_BATCH_FROM = (0, 28, 0)  # vllm #51726: >= 160 GiB gets 16384 tokens (0.27.1: 8192)
V0_LONG_CONTEXT = 32768  # V0 turns chunked prefill on above this max_model_len
V0_CHUNK_TOKENS = 512  # ... with this token budget up to 0.6.4.post1
V0_CHUNK_2048_FROM = (0, 6, 5)  # vllm #10544: ... and 2048 from 0.6.5
GPU_MEMORY_UTILIZATION = ((0, 20, 0), 0.92, 0.9)  # (from, then, before): vllm #38284
V0_MIN_BATCHED_TOKENS = 2048  # V0 without chunked prefill: max(max_model_len, 2048)
VLLM_NEWEST = (0, 34, 0)  # the newest release whose sdist was read (PyPI, 2026-12): later refused
# 0.34.0: gpu_memory_utilization None, resolved to 1.0 with the extensible KV cache, else
# DEFAULT_GPU_MEMORY_UTILIZATION 0.92 (CacheConfig.resolved_gpu_memory_utilization)
EXTENSIBLE_UTILIZATION = 1.0


def check_vllm_release(version: tuple[int, ...]) -> None:
    """A release newer than the newest read is refused by name: its defaults and memory
    accounting may have changed (as they did in 0.8.0, 0.9.2, 0.20.0 and 0.28.0)."""
    if tuple(version[:3]) > VLLM_NEWEST:
        newest = ".".join(map(str, VLLM_NEWEST))
        raise ValueError(
            f"'version' {'.'.join(map(str, version[:3]))} is newer than vLLM {newest}, the newest "
            f"release kvcalc has read: plan it as {newest} (--engine-version {newest}) if its "
            "serving defaults are unchanged"
        )


# --- defaults by version ----------------------------------------------------------------------


def vllm_batch_defaults(
    version: tuple[int, int, int], gpu_memory_gib: float, gpu_name: str, max_model_len: int
) -> tuple[int, int, bool]:
    """(max_num_batched_tokens, max_num_seqs, chunked prefill on) for `vllm serve` (see the
    module docstring for the releases)."""
    if version >= V1_DEFAULT_FROM:
        name = gpu_name.lower()
        if version >= V1_BATCH_BY_MEMORY_FROM:
            a100 = version >= V1_A100_SMALL_FROM and "a100" in name
            large = gpu_memory_gib >= LARGE_GPU_GIB and not a100
        else:
            large = "h100" in name or "h200" in name
        if version >= V1_XL_BATCH_FROM and gpu_memory_gib >= XL_GPU_GIB:
            return 16384, 1024, True
        seqs = 1024 if large or version < V1_SEQS_256_FROM else 256
        return (8192 if large else 2048), seqs, True
    if max_model_len > V0_LONG_CONTEXT:
        return (2048 if version >= V0_CHUNK_2048_FROM else V0_CHUNK_TOKENS), 256, True
    return max(max_model_len, V0_MIN_BATCHED_TOKENS), 256, False


def vllm_gpu_memory_utilization(version: tuple[int, ...], extensible: bool = False) -> float:
    """gpu_memory_utilization when unset (vllm/config/cache.py of that release; 0.34.0's
    resolved_gpu_memory_utilization: 1.0 with the extensible KV cache)."""
    if extensible:
        return EXTENSIBLE_UTILIZATION
    since, then, before = GPU_MEMORY_UTILIZATION
    return then if version >= since else before


# SGLang: calc/serving/defaults_sglang.py (re-exported here: defaults.py was their home)
from calc.serving.defaults_sglang import (  # noqa: E402, F401
    SGLANG_B200_FROM,
    SGLANG_GENERAL_FROM,
    SGLANG_GPU_MEM_FROM,
    SGLANG_H200_RELAX_FROM,
    SGLANG_NEWEST,
    SGLANG_NSA_08,
    SGLANG_RESERVE_FROM,
    SGLANG_TP_TABLE,
    SGLANG_VLM_FROM,
    _sglang_chunk,
    sglang_chunk_default,
    sglang_graph_bs_default,
    sglang_mem_fraction_default,
    sglang_version,
)
