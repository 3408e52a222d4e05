"""vLLM 0.34.0's extensible KV cache: the cache sized from the memory free after warmup and CUDA
graph capture, not from the profile run's estimate. Read in the 0.34.0 sdist (vllm/config/
vllm.py _resolve_extensible_kv_cache, vllm/config/cache.py, vllm/v1/worker/gpu_worker.py,
vllm/v1/worker/extensible_kv_cache.py, vllm/v1/core/kv_cache_planning.py, vllm/v1/engine/
core.py, vllm/v1/worker/gpu/model_runner.py); not checked against a 0.34.0 start-up log (none
public yet).

When: on by default on CUDA and ROCm (--enable-extensible-kv-cache / --no-...; None decides),
off elsewhere or where the driver has no virtual-memory management (not modelled), and off with
kv_cache_memory_bytes or num_gpu_blocks_override (both taken), elastic EP and some KV
connectors (settings kvcalc does not take). gpu_memory_utilization then defaults to 1.0
(resolved_gpu_memory_utilization); a given one still caps the budget.

What vLLM does with it on:
1. determine_available_memory still profiles and logs "Available KV cache memory: X GiB" =
   ceil(total x util) - non_kv_cache_memory - the CUDA-graph estimate, which is 0 here
   (GPUModelRunner.profile_cudagraph_memory returns 0 with the extensible cache). That sizes only
   the reserved address range: its blocks (X // bytes per block, the minimum over ranks) cap the
   result.
2. Warmup and capture run with one block committed; then measure_kv_cache_bytes:
     non_kv_used = init_free - free - committed      (everything but the KV cache since start)
     headroom    = free + committed
     margin      = max(1 GiB (3 on ROCm), int(0.75 x transient))
     kv_bytes    = min(requested - non_kv_used, headroom - margin) - max(transient, growth)
   transient = the profile's transient peak (allocated peak - allocated after the run) or a
   larger one from the warmup steps; growth = torch's reservation growth over a sizing step.
3. blocks_within(kv_bytes): the most blocks whose physical pages fit, each segment (one per
   layer's tensor in the default layer-outermost layout) rounded up to the 2 MiB granule; then
   the minimum over ranks and the capacity (finalize_extensible_kv_cache). "GPU KV cache size"
   and "Maximum concurrency" are reported from that count.

kvcalc models the measured terms with its own estimates: init_free = total - the CUDA context
and NCCL's buffers (calc.serving.sglang_memory.init_used_parts: vLLM takes its init snapshot
after the distributed set-up since 0.11.0); non_kv_used = weights + the non-torch term + the
CUDA-graph memory (calc.serving.overheads' estimate standing for the captured pools; none with
enforce_eager); transient = the profile's activation peak; growth = 0 (not modelled).
"""

from __future__ import annotations

import math

import numpy as np

from calc.serving.memory import _maximum, _minimum
from calc.serving.sglang_memory import init_used_parts
from calc.serving.vllm_state_dtype import release

EXTENSIBLE_FROM = (0, 34, 0)
GIB = 2**30
MARGIN_FLOOR = {"NVIDIA": 1 * GIB, "AMD": 3 * GIB}  # KV_CACHE_MARGIN_FLOOR_BYTES
MARGIN_FRACTION = 0.75  # KV_CACHE_MARGIN_FRACTION
GRANULE = 2 * 2**20  # extensible_tensor.granule_size: max(driver granularity, 2 MiB)


def check_extensible_flag(version: tuple[int, ...], flag: bool | None) -> None:
    """--enable-extensible-kv-cache exists from 0.34.0."""
    if flag and tuple(version[:3]) < EXTENSIBLE_FROM:
        raise ValueError(
            f"'enable_extensible_kv_cache' is a vLLM setting from {release(EXTENSIBLE_FROM)}: "
            f"got True for {release(version)}"
        )


def extensible_on(
    version: tuple[int, ...],
    vendor: str,
    flag: bool | None,
    kv_cache_memory_bytes: int | None = None,
    num_gpu_blocks_override: int | None = None,
) -> bool:
    """_resolve_extensible_kv_cache: on where supported when not given; a request where it is
    not supported is vLLM's error (its reasons in its order: the platform, then the settings that
    size the cache otherwise)."""
    check_extensible_flag(version, flag)
    if tuple(version[:3]) < EXTENSIBLE_FROM or flag is False:
        return False
    unsupported = None
    if vendor not in MARGIN_FLOOR:
        unsupported = "it is only supported on CUDA and ROCm"
    else:
        for name, value in (
            ("kv_cache_memory_bytes", kv_cache_memory_bytes),
            ("num_gpu_blocks_override", num_gpu_blocks_override),
        ):
            if value is not None:
                unsupported = f"it sizes the KV cache from measured memory, which {name} overrides"
                break
    if unsupported is not None and flag:
        raise ValueError(f"enable_extensible_kv_cache: {unsupported}.")
    return unsupported is None


def _floor(x):
    if isinstance(x, np.ndarray):
        return np.floor(x).astype(np.int64)
    return int(math.floor(x))


def measure_kv_cache_bytes(init_free, free, committed, requested, transient, growth, floor):
    """extensible_kv_cache.measure_kv_cache_bytes, term for term (ints or numpy arrays)."""
    non_kv_used = init_free - free - committed
    headroom = free + committed
    margin = _maximum(floor, _floor(transient * MARGIN_FRACTION))
    available = _minimum(requested - non_kv_used, headroom - margin)
    available = available - _maximum(transient, growth)
    out = _maximum(available, 0)
    return out if isinstance(out, np.ndarray) else int(out)


def blocks_within(kv_bytes, page_bytes: int, segments: int, capacity_blocks):
    """ExtensibleKVCache.blocks_within for `segments` tensors of one `page_bytes` stride each: the
    most blocks n <= capacity with segments x ceil(n x page / granule) x granule <= kv_bytes."""
    pages_fit = kv_bytes // (segments * GRANULE) * GRANULE // page_bytes
    return _minimum(_minimum(kv_bytes // (segments * page_bytes), pages_fit), capacity_blocks)


def init_free_bytes(total: int, ranks: int, hw, calibration=None) -> int:
    """A worker's init snapshot (its free memory): a calibration's logged one (init_free_bytes,
    calc.serving.calibrate), else kvcalc's estimate, the total less the CUDA context and NCCL's
    buffers of the `ranks` (TP x PP) world; other processes are not seen."""
    logged = (calibration or {}).get("init_free_bytes")
    return logged or total - sum(init_used_parts(ranks, hw).values())


def measured_kv_bytes(
    total, utilization, weights, act, non_torch, graphs, tp: int, hw, calibration=None
):
    """(kv_bytes, headroom, requested) of one rank as kvcalc models the measurement (module
    docstring); headroom = free + committed. A calibration from a 0.34 log's "Memory after
    warmup" line (calc.serving.calibrate: warmup_headroom_bytes, warmup_transient_bytes,
    warmup_growth_bytes) replaces the modelled headroom, transient peak and growth; a logged init
    snapshot (init_free_bytes: "Free memory on device (F/T GiB)") the estimated one."""
    cal = calibration or {}
    init_free = init_free_bytes(total, tp, hw, cal)
    if isinstance(utilization, np.ndarray):
        requested = np.ceil(total * utilization).astype(np.int64)
    else:
        requested = math.ceil(total * utilization)
    non_kv_used = weights + non_torch + graphs
    free = init_free - non_kv_used  # with nothing committed: headroom = free + committed
    growth = 0
    if "warmup_headroom_bytes" in cal:
        free, act = cal["warmup_headroom_bytes"], cal["warmup_transient_bytes"]
        growth = cal.get("warmup_growth_bytes", 0)
    floor = MARGIN_FLOOR.get(getattr(hw, "vendor", "NVIDIA"), MARGIN_FLOOR["NVIDIA"])
    out = measure_kv_cache_bytes(init_free, free, 0, requested, act, growth, floor)
    return out, free, requested


def committed_bytes(page_bytes: int, segments: int) -> int:
    """What is committed when the cache is measured: min_committed_blocks (the null block, 1 in
    the layer-outermost layout) of every segment, each rounded up to the granule."""
    return segments * -(-page_bytes // GRANULE) * GRANULE


def warmup_line(headroom: int, committed: int, blocks: int, bytes_per_block: int, act: int, req):
    """The worker's "Memory after warmup" line (extensible_kv_cache.measure_kv_cache_blocks), in
    the figures kvcalc models (torch's reservation growth: 0), without its last sentence (the
    torch limit, which kvcalc does not model)."""
    g = GIB
    return (
        f"Memory after warmup: {(headroom - committed) / g:.2f} GiB free, {committed / g:.2f} "
        "GiB committed to the KV cache, "
        f"{act / g:.2f} GiB kept for transient activations ({act / g:.2f} GiB allocated at "
        f"peak, 0.00 GiB of torch reservation growth); {blocks} KV cache blocks "
        f"({blocks * bytes_per_block / g:.2f} GiB) fit within the requested {req / g:.2f} GiB."
    )
