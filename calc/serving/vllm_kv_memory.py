"""vLLM's --kv-cache-memory-bytes (CacheConfig.kv_cache_memory_bytes, from 0.10.2): each
worker's KV-cache memory in bytes, instead of the profiled figure.

Read in the PyPI sdists 0.10.1 (absent), 0.10.2 - 0.14.1, 0.16.0 - 0.34.0
(vllm/v1/worker/gpu_worker.py determine_available_memory, vllm/config/cache.py,
vllm/engine/arg_utils.py, vllm/utils/argparse_utils.py from 0.20.0, vllm/config/vllm.py):

- `if kv_cache_memory_bytes := cache_config.kv_cache_memory_bytes:` the worker runs the profile
  (it compiles the model) and returns the value as its available memory: every pipeline rank
  gets the same bytes. No "Available KV cache memory" line and no CUDA-graph estimate (0.21.0
  on); "Initial free memory F GiB, reserved X GiB memory for KV Cache as specified by
  kv_cache_memory_bytes config and skipped memory profiling. ..." instead (RESERVED_WORDING).
  From 0.27.0 the value passes reserve_mm_ipc_gpu_memory, which returns it unchanged unless
  mm_ipc_gpu_memory_gb (default 0) or a GPU video decoder reserves memory (not taken here).
- 0 is falsy: the worker profiles as without the flag. But from 0.34.0 any value that is not
  None turns the extensible KV cache off (_resolve_extensible_kv_cache: "it sizes the KV cache
  from measured memory, which kv_cache_memory_bytes overrides"), 0 included.
- The one-request check, blocks, tokens and concurrency then follow from that memory as from a
  profiled one (calc.serving.figures); --num-gpu-blocks-override still overrides the blocks.
- The flag's text is human_readable_int: "1k" = 10^3, "1K" = 2^10, m / M, g / G, and t / T from
  0.13.0; decimals only before a decimal suffix ("25.6k"); otherwise int(). vLLM itself takes a
  negative number (and then refuses the memory); kvcalc refuses it as input.
- The "Initial free memory" figure is the worker's init snapshot: kvcalc's estimate of it is the
  total less the CUDA context and NCCL's buffers (calc.serving.sglang_memory.init_used_parts),
  as for 0.34's extensible cache; other processes on the GPU are not seen.
"""

from __future__ import annotations

import re

from calc.serving.vllm_state_dtype import release

GIB = 2**30
KV_CACHE_MEMORY_FROM = (0, 10, 2)
TERA_FROM = (0, 13, 0)  # human_readable_int's t / T suffixes
# the reserved line by release: 0.10.2 - 0.11.0 print the free memory unformatted, "X.XXGiB" and
# "This does does not"; 0.11.1 - 0.13.0 "{:.2f} GiB" both; 0.14.0 on format_gib (round(x, 2))
TWO_DECIMALS_FROM, FORMAT_GIB_FROM = (0, 11, 1), (0, 14, 0)
_TAIL = (
    "gpu_memory_utilization config. Only use kv_cache_memory_bytes config when you want manual "
    "control of KV cache memory size. If OOM'ed, check the difference of initial free memory "
    "between the current run and the previous run where kv_cache_memory_bytes is suggested and "
    "update it correspondingly."
)
_DECIMAL = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BINARY = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def parse_kv_cache_memory(value, version: tuple[int, ...]) -> int:
    """--kv-cache-memory-bytes as vLLM's human_readable_int reads it in `version`; a clear error
    for what it refuses, and for negative sizes."""
    if isinstance(value, bool):
        raise ValueError(f"'kv_cache_memory_bytes' must be a number of bytes: got {value!r}")
    if isinstance(value, int):
        n = value
    elif isinstance(value, str):
        n = _parse_text(value.strip(), version)
    else:
        raise ValueError(
            f"'kv_cache_memory_bytes' must be bytes as an integer or text such as '8G': "
            f"got {type(value).__name__}"
        )
    if n < 0:
        raise ValueError(f"'kv_cache_memory_bytes' must be >= 0 bytes: got {n:,}")
    return n


def _parse_text(text: str, version: tuple[int, ...]) -> int:
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([kKmMgGtT])", text)
    if match:
        number, suffix = match.groups()
        if suffix in "tT" and tuple(version[:3]) < TERA_FROM:
            raise ValueError(
                f"'kv_cache_memory_bytes': the suffix {suffix!r} is read from "
                f"{release(TERA_FROM)} on (k/K, m/M, g/G before): got {text!r} for "
                f"{release(version)}"
            )
        if suffix in _DECIMAL:
            return int(float(number) * _DECIMAL[suffix])
        if "." in number:
            raise ValueError(
                f"'kv_cache_memory_bytes': Decimals are not allowed with binary suffixes like "
                f"{suffix}. Did you mean to use {number}{suffix.lower()} instead?"
            )
        return int(number) * _BINARY[suffix]
    try:
        return int(text)
    except ValueError:
        raise ValueError(
            f"'kv_cache_memory_bytes' must be bytes, as an integer or with a suffix k/K, m/M, "
            f"g/G{', t/T' if tuple(version[:3]) >= TERA_FROM else ''} (decimal lower case, "
            f"binary upper case): got {text!r}"
        ) from None


def check_kv_cache_memory_flag(version: tuple[int, ...], value: int | None) -> None:
    """--kv-cache-memory-bytes exists from 0.10.2."""
    if value is not None and tuple(version[:3]) < KV_CACHE_MEMORY_FROM:
        raise ValueError(
            f"'kv_cache_memory_bytes' is a vLLM setting from {release(KV_CACHE_MEMORY_FROM)}: "
            f"got {value:,} for {release(version)}"
        )


def sets_memory(config) -> bool:
    """Whether the worker takes kv_cache_memory_bytes as its memory (a non-zero value)."""
    return bool(getattr(config, "kv_cache_memory_bytes", None))


def reserved_line(version: tuple[int, ...], init_free: int, kv_bytes: int) -> str:
    """determine_available_memory's line in `version`'s words."""
    v = tuple(version[:3])
    if v >= FORMAT_GIB_FROM:
        free, kv, sep, does = (
            f"{round(init_free / GIB, 2)}",
            f"{round(kv_bytes / GIB, 2)}",
            " ",
            "does",
        )
    elif v >= TWO_DECIMALS_FROM:
        free, kv, sep, does = f"{init_free / GIB:.2f}", f"{kv_bytes / GIB:.2f}", " ", "does"
    else:
        free, kv, sep, does = f"{init_free / GIB}", f"{kv_bytes / GIB:.2f}", "", "does does"
    return (
        f"Initial free memory {free} GiB, reserved {kv}{sep}GiB memory for KV Cache as "
        f"specified by kv_cache_memory_bytes config and skipped memory profiling. This {does} "
        f"not respect the {_TAIL}"
    )


def oom_refusal(kv_bytes: int, weights: int, init_free: int) -> str | None:
    """vLLM does not check the value against the GPU (#56698, open): a cache that cannot fit
    beside the weights in the memory free at start-up fails when the engine allocates it
    (torch.OutOfMemoryError in initialize_kv_cache). kvcalc's bound, from its own estimates:
    the weights plus the cache above the init snapshot's free memory. Below it the run can
    still fail later (the activation peak, CUDA graphs): that is not claimed either way."""
    if kv_bytes + weights <= init_free:
        return None
    return (
        f"CUDA out of memory (kvcalc's estimate, not vLLM's check): kv_cache_memory_bytes "
        f"{kv_bytes:,} B ({kv_bytes / GIB:.2f} GiB) and the weights ({weights / GIB:.2f} GiB) "
        f"exceed the {init_free / GIB:.2f} GiB free at start-up; allocating the KV cache would "
        f"raise torch.OutOfMemoryError"
    )


def check_one_memory(given, config) -> None:
    """A logged available memory (available_kv_gib) and kv_cache_memory_bytes both set it."""
    if given is not None and sets_memory(config):
        raise ValueError(
            "'available_kv_gib' replaces a profiled available memory, which "
            "'kv_cache_memory_bytes' sets: give one of them"
        )
