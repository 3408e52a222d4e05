"""What SGLang's KV budget is short of beside the target's weights, and the refusal when none is
left (calc.serving.figures.sglang_derived_budget takes the budget from here).

The budget (profile_max_num_token; from 0.5.14 ModelRunnerKVCacheMixin._profile_available_bytes,
from 0.5.16 mem_cache/kv_cache_configurator.py) is the free memory the pool sizing reads
(get_available_gpu_memory, GB there = GiB) minus pre_model_load_memory x (1 -
mem_fraction_static), read in the released wheels (pypi.org sglang <version>):
- from 0.5.14 the free memory is read after the draft worker has loaded too (Scheduler.
  init_model_worker: init_tp_model_worker, maybe_init_draft_worker, then init_memory_pools;
  sglang#23862): its weights (the draft worker's own "Load weight end ... mem usage", with the
  bf16 embed_tokens / lm_head copies an MTP draft frees only in alloc_memory_pool, after the
  target's pool is sized: sglang#36452) are calc.serving.sglang_spec_pool.draft_weight_bytes;
- from 0.5.18 a multimodal model's budget also leaves out mm_runtime_reservation_gb ("Multimodal
  GPU memory allocated only after the KV pool is sized"): SGLANG_VLM_CACHE_SIZE_MB (environ.py:
  100), + SGLANG_MM_FEATURE_CACHE_MB (1024) with --mm-feature-transport cuda_ipc / cuda_vmm
  (SglangConfig.mm_feature_transport; unset: cpu on one node, so not added; kvcalc plans one
  node). The flag is in server_args.py from 0.5.16 ("cpu" / "cuda_ipc"; "cuda_vmm" from
  0.5.18); in 0.5.16 - 0.5.17 its pool is allocated after the KV pool with nothing reserved, so
  the budget does not change. SGLang refuses both GPU transports off CUDA ("requires NVIDIA
  CUDA") and cuda_vmm with pipeline parallelism. is_multimodal: the architecture on
  multimodal_model_archs or a vision / audio sub-config (model_config.py); kvcalc's is
  calc.serving.sglang_multimodal.sglang_multimodal;
- from 0.5.14 a budget of 0 or less raises its own ValueError ("Loaded weights leave no GPU
  memory for the KV cache under --mem-fraction-static=F. Raise --mem-fraction-static above S
  (minimum viable = 1 - available/pre = M). If using speculative decoding, draft weights are now
  counted."), S = ceil(M x 1000) / 1000, M = 1 - available / pre; before it such a budget gives
  0 tokens and the pool's "Not enough memory" (calc.serving.memory.sglang_refusal).
"""

from __future__ import annotations

import math

from calc.serving.defaults_sglang import sglang_version

BUDGET_REFUSAL_FROM = (0, 5, 14, 0)
MM_RESERVE_FROM = (0, 5, 18, 0)
VLM_CACHE_MIB = 100  # SGLANG_VLM_CACHE_SIZE_MB's default (environ.py, 0.5.17 - 0.5.23)
FEATURE_CACHE_MIB = 1024  # SGLANG_MM_FEATURE_CACHE_MB's default (environ.py, 0.5.16 - 0.5.23)
GPU_TRANSPORTS = ("cuda_ipc", "cuda_vmm")
TRANSPORT_FROM = {"cpu": (0, 5, 16, 0), "cuda_ipc": (0, 5, 16, 0), "cuda_vmm": (0, 5, 18, 0)}
GIB = 2**30


def check_transport(config, vendor: str) -> None:
    """--mm-feature-transport: its choices by release and SGLang's refusals (module docstring)."""
    t = config.mm_feature_transport
    if t is None:
        return
    if t not in TRANSPORT_FROM:
        raise ValueError(
            f"'mm_feature_transport' must be one of {', '.join(TRANSPORT_FROM)}: got {t!r}"
        )
    since = TRANSPORT_FROM[t]
    if sglang_version(config.version) < since:
        release = ".".join(str(x) for x in since[:3])
        raise ValueError(
            f"'mm_feature_transport' {t} needs SGLang {release} or later: got {config.version}"
        )
    if t in GPU_TRANSPORTS and vendor != "NVIDIA":
        raise ValueError(f"--mm-feature-transport={t} requires NVIDIA CUDA.")
    if t == "cuda_vmm" and config.pipeline_parallel_size != 1:
        raise ValueError("--mm-feature-transport=cuda_vmm does not support pipeline parallelism.")


def mm_reserve_bytes(version: str, multimodal: bool, transport: str | None = None) -> int:
    """mm_runtime_reservation_gb in bytes from 0.5.18 for a multimodal model: 100 MiB, 1 GiB
    more with a GPU feature transport."""
    if not multimodal or sglang_version(version) < MM_RESERVE_FROM:
        return 0
    return (VLM_CACHE_MIB + (FEATURE_CACHE_MIB if transport in GPU_TRANSPORTS else 0)) * 2**20


def budget_refusal(config, pre_bytes: int, available_bytes: int, rest_bytes: int) -> str | None:
    """0.5.14's refusal of a budget of 0 or less (module docstring); `pre_bytes`: the free memory
    before the weights, `available_bytes`: after them (the draft's too), `rest_bytes`: the
    budget (after the mamba state pool, which is charged before the check)."""
    if sglang_version(config.version) < BUDGET_REFUSAL_FROM or rest_bytes > 0:
        return None
    minimum = 1 - (available_bytes / GIB) / (pre_bytes / GIB)
    suggested = math.ceil(minimum * 1000) / 1000
    return (
        "Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static="
        f"{config.mem_fraction_static}. Raise --mem-fraction-static above {suggested:.3f} "
        f"(minimum viable = 1 - available/pre = {minimum:.4f}). If using speculative decoding, "
        "draft weights are now counted."
    )
