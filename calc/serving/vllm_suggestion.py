"""vLLM's suggested --kv-cache-memory: the line a worker logs after CUDA-graph capture when the
KV memory was profiled (Worker.compile_or_warm_up_model, vllm/v1/worker/gpu_worker.py; read in
the 0.14.0 - 0.34.0 sdists). logger.debug up to 0.25.x, logger.info from 0.26.0, so kvcalc
prints it from 0.26.0 (the lines of its plans are the INFO ones):

    non_kv  = consumed + peak activation + CUDA-graph memory     (the capture's actual bytes)
    to_req  = requested - non_kv - 150 MiB   ("to fit into requested memory")
    to_gpu  = init free - non_kv - 150 MiB   ("to fully utilize gpu memory")

- 0.26.x: "X GiB for weight, Y GiB for peak activation, Z GiB for non-torch memory, and W GiB
  for CUDAGraph memory": non_kv = weights + torch peak increase + non-torch + graphs.
- 0.27.0 on: "X GiB for consumed memory (weights + non-torch), Y GiB for peak activation, and W
  GiB for CUDAGraph memory", the peak being the transient headroom plus the CUDA-graph estimate
  applied to the available memory: the graphs count twice, once estimated and once captured,
  so the suggestion is the available memory less the captured graphs and 150 MiB.
- "Current kv cache memory in use is A GiB": the available memory of the profile (0.34's
  extensible cache: its reserved capacity, with no estimate applied).
Not logged with --kv-cache-memory-bytes (the branch tests it is None).

kvcalc's terms stand for vLLM's measured ones: its weights and non-torch estimate for the
consumed memory, its activation peak, the CUDA-graph estimate it subtracts (none where the
release makes none) and its one CUDA-graph figure for the captured pool (calc.serving.overheads.
captured_cudagraph_bytes; none with enforce_eager), the init snapshot as calc.serving.vllm_extensible.
init_free_bytes estimates it. The printed utilization is Python's repr of the float.
"""

from __future__ import annotations

import math

from calc.serving.overheads import captured_cudagraph_bytes

GIB = 2**30
BUFFER = 150 * 2**20  # redundancy_buffer_memory
INFO_FROM = (0, 26, 0)
CONSUMED_FROM = (0, 27, 0)


def _gib(b: int) -> str:
    return f"{round(b / GIB, 2)}"  # format_gib


def suggested_bytes(requested, init_free, non_kv) -> tuple[int, int]:
    """(to fit into requested memory, to fully utilize gpu memory)."""
    return int(requested) - non_kv - BUFFER, init_free - non_kv - BUFFER


def suggestion(version, total, u, init_free, weights, nt, act, cg_applied, cg, available):
    """(line, to_req bytes) of `version`, or (None, None) before it is logged at INFO."""
    v = tuple(version[:3])
    if v < INFO_FROM:
        return None, None
    requested = math.ceil(total * u)
    if v >= CONSUMED_FROM:
        consumed, peak = weights + nt, act + cg_applied
        usage = (
            f"{_gib(consumed)} GiB for consumed memory (weights + non-torch), {_gib(peak)} GiB "
            f"for peak activation, and {_gib(cg)} GiB for CUDAGraph memory"
        )
        non_kv = consumed + peak + cg
    else:
        usage = (
            f"{_gib(weights)} GiB for weight, {_gib(act)} GiB for peak activation, {_gib(nt)} "
            f"GiB for non-torch memory, and {_gib(cg)} GiB for CUDAGraph memory"
        )
        non_kv = weights + act + nt + cg
    to_req, to_gpu = suggested_bytes(requested, init_free, non_kv)
    line = (
        f"Free memory on device ({_gib(init_free)}/{_gib(total)} GiB) on startup. Desired GPU "
        f"memory utilization is ({u}, {_gib(requested)} GiB). Actual usage is {usage}. Replace "
        f"gpu_memory_utilization config with `--kv-cache-memory={to_req}` ({_gib(to_req)} GiB) "
        f"to fit into requested memory, or `--kv-cache-memory={to_gpu}` ({_gib(to_gpu)} GiB) "
        f"to fully utilize gpu memory. Current kv cache memory in use is {_gib(available)} GiB."
    )
    return line, to_req


def with_suggestion(lines: list[str], line: str | None) -> list[str]:
    """The line where the worker logs it: after capture, so before 0.34's "Memory after warmup"
    (the extensible cache is measured after compile_or_warm_up_model), else last."""
    if line is None:
        return lines
    at = next((i for i, x in enumerate(lines) if x.startswith("Memory after warmup")), None)
    return lines + [line] if at is None else [*lines[:at], line, *lines[at:]]


def plan_suggestion(config, init_free, total, weights, act, nt, cg, available):
    """(line, bytes) for a derived vLLM plan's limiting rank (`weights`: that rank's), or
    (None, None) where vLLM does not log it at INFO or its terms are not kvcalc's own."""
    if not config.is_v1 or act is None:
        return None, None
    applied = 0 if config.enable_extensible_kv_cache else cg  # the estimate the profile applied
    captured = captured_cudagraph_bytes(config)
    u = config.gpu_memory_utilization
    v = config.version_tuple
    return suggestion(v, total, u, init_free, weights, nt, act, applied, captured, available)
