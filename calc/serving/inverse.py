"""Inverse queries: which setting gives C concurrent requests of L tokens.

- `utilization_for`: the smallest gpu_memory_utilization (vLLM) or mem_fraction_static
  (SGLang) whose plan reports max_concurrency >= C for max_model_len = L, to 0.01 (the
  precision people pass). The memory each needs is the plan's, so the answer is the plan's.
- `kv_cache_memory_for`: vLLM, the least --kv-cache-memory-bytes (whole MiB) whose plan
  reaches C: with that flag the utilization sizes nothing.
- `max_model_len_for`: the longest max_model_len (whole blocks) with concurrency >= C.
- `tp_for`: the fewest tensor-parallel GPUs (a divisor the model allows) that reach C. Only the
  split rules of every engine are checked up front (calc.sharding.check_split), not the generic
  planner's model limits: models only the engines plan (attention sinks, MLA, linear attention)
  have an answer too; a size the engine itself refuses (e.g. a quantized width it cannot split)
  is skipped.
Each returns None when no value reaches C.
"""

from __future__ import annotations

from calc.serving.plan import engine_plan
from calc.sharding import check_split


def _reaches(plan, concurrency: float) -> bool:
    return plan.refusal is None and plan.max_concurrency >= concurrency


def utilization_for(model, gpu, engine: str, concurrency: float, **settings) -> float | None:
    key = "gpu_memory_utilization" if engine == "vllm" else "mem_fraction_static"
    lo, hi = 1, 100 if engine == "vllm" else 99  # hundredths
    best = None
    while lo <= hi:  # concurrency grows with the fraction: bisect on hundredths
        mid = (lo + hi) // 2
        plan = engine_plan(model, gpu, engine, **{**settings, key: mid / 100})
        if _reaches(plan, concurrency):
            best, hi = mid / 100, mid - 1
        else:
            lo = mid + 1
    return best


def kv_cache_memory_for(model, gpu, concurrency: float, **settings) -> int | None:
    """The least kv_cache_memory_bytes, in whole MiB, whose vLLM plan reaches C (None: not even
    with the whole GPU, or refused for another reason)."""
    from calc.serving.hardware import resolve_hardware

    mib = 2**20
    lo, hi, best = 1, resolve_hardware(gpu).total_memory_bytes // mib, None
    while lo <= hi:  # concurrency grows with the memory: bisect on MiB
        mid = (lo + hi) // 2
        plan = engine_plan(model, gpu, "vllm", **{**settings, "kv_cache_memory_bytes": mid * mib})
        if _reaches(plan, concurrency):
            best, hi = mid * mib, mid - 1
        else:
            lo = mid + 1
    return best


def memory_setting_for(model, gpu, engine: str, concurrency: float, **settings):
    """(the setting that sizes the KV memory, its least value for C): kv_cache_memory_bytes when
    it is set (the utilization then sizes nothing), else gpu_memory_utilization (vLLM) or
    mem_fraction_static (SGLang)."""
    if settings.get("kv_cache_memory_bytes"):
        return "kv_cache_memory_bytes", kv_cache_memory_for(model, gpu, concurrency, **settings)
    key = "gpu_memory_utilization" if engine == "vllm" else "mem_fraction_static"
    return key, utilization_for(model, gpu, engine, concurrency, **settings)


def max_model_len_for(model, gpu, engine: str, concurrency: float, **settings) -> int | None:
    rest = {k: v for k, v in settings.items() if k != "max_model_len"}
    lo, hi, best = 1, engine_plan(model, gpu, engine, **rest).max_model_len, None
    while lo <= hi:
        mid = (lo + hi) // 2
        plan = engine_plan(model, gpu, engine, **{**settings, "max_model_len": mid})
        if _reaches(plan, concurrency):
            best, lo = mid, mid + 1
        else:
            hi = mid - 1
    return best


def tp_for(model, gpu, engine: str, concurrency: float, max_tp: int = 64, **settings):
    from calc.presets import resolve_model

    spec = resolve_model(model)
    for tp in range(1, max_tp + 1):
        try:
            check_split(spec, tp, 1)
            plan = engine_plan(spec, gpu, engine, **{**settings, "tensor_parallel_size": tp})
        except ValueError:
            continue
        if _reaches(plan, concurrency):
            return tp
    return None
