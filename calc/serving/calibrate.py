"""Calibration: put kvcalc's figures beside a real start-up log's, and keep what the log taught.

What a log fixes that kvcalc can only estimate:
- vLLM: the memory that is neither weights nor KV cache (activation peak of the profile run,
  non-torch memory, CUDA graphs): non_kv_overhead = total x utilization - logged weights -
  logged available KV memory. V0's "Memory profiling results" line also gives the device total.
- vLLM 0.34's extensible KV cache: the "Memory after warmup" line's free + committed memory,
  allocated peak and torch reservation growth, which size its blocks.
- vLLM --kv-cache-memory-bytes: the "Initial free memory" its line prints (the init snapshot),
  which kvcalc's check that the cache fits beside the weights starts from.
- SGLang: the memory in use before the weights load ("Load weight begin. avail mem" against
  the device total), which sets SGLang's own "total".
`plan(..., calibration=...)` then uses those instead of the estimates, so a calibrated plan of
the same deployment reproduces the log, and one with other settings moves from a measured base.
"""

from __future__ import annotations

import json
from pathlib import Path

from calc.presets import resolve_model
from calc.results import Result
from calc.serving.defaults import vllm_gpu_memory_utilization
from calc.serving.engine import parse_version
from calc.serving.hardware import resolve_hardware
from calc.serving.logs import parse_log
from calc.serving.plan import GIB, engine_plan

COMPARED = (
    ("weights_gib", "model weights, GiB"),
    ("available_kv_cache_gib", "available KV cache memory, GiB"),
    ("num_gpu_blocks", "GPU blocks"),
    ("warmup_kv_blocks", "KV cache blocks after warmup (vLLM 0.34 extensible)"),
    ("warmup_transient_gib", "kept for transient activations, GiB (vLLM 0.34)"),
    ("reserved_kv_gib", "reserved KV cache memory, GiB (kv_cache_memory_bytes)"),
    ("init_free_gib", "initial free memory, GiB (kv_cache_memory_bytes)"),
    ("gpu_kv_cache_tokens", "GPU KV cache size, tokens"),
    ("max_concurrency", "maximum concurrency"),
    ("max_total_num_tokens", "SGLang #tokens"),
    ("k_size_gib", "SGLang K size, GiB"),
    ("sglang_pool_end_gib", "SGLang Memory pool end, avail GiB"),
)


class Calibration(Result):
    engine: str
    model: str
    gpu: str
    logged: dict
    rows: list[dict]  # {"figure", "logged", "kvcalc", "error_pct"}
    learned: dict


def _kvcalc_value(plan, key):
    if key == "max_total_num_tokens":
        return plan.gpu_kv_cache_tokens
    if key == "warmup_kv_blocks":
        return plan.num_gpu_blocks if plan.extensible_kv_cache else None
    if key == "warmup_transient_gib":
        on = plan.extensible_kv_cache and plan.activation_bytes is not None
        return round(plan.activation_bytes / GIB, 2) if on else None
    if key == "reserved_kv_gib":
        kv_set = plan.source == "kv_cache_memory_bytes"
        return round(plan.available_kv_cache_bytes / GIB, 2) if kv_set else None
    if key == "sglang_pool_end_gib":  # calc.serving.sglang_pool_end (derived plans only)
        free = plan.pool_end_free_bytes
        return None if free is None else round(free / GIB, 2)
    if key == "init_free_gib":  # the reserved line's, or the suggestion's (vllm_suggestion)
        free = plan.initial_free_bytes
        return None if free is None else round(free / GIB, 2)
    return getattr(plan, key, None)


def calibrate(text: str, model, gpu, weight_dtype: str | None = None, **settings) -> Calibration:
    """Compare a log with kvcalc's derived plan for the same settings; learn the overheads."""
    settings = {k: v for k, v in settings.items() if v is not None}
    logged = parse_log(text)
    if not logged:
        raise ValueError("the log has no vLLM or SGLang start-up line kvcalc knows")
    spec, hw = resolve_model(model), resolve_hardware(gpu)
    engine = settings.pop("engine", None) or logged["engine"]
    if "max_model_len" in logged and "max_model_len" not in settings:
        settings["max_model_len"] = logged["max_model_len"]
    if engine == "vllm" and "gpu_memory_utilization" in logged:
        settings.setdefault("gpu_memory_utilization", logged["gpu_memory_utilization"])
    if "kv_cache_dtype" in logged:  # the fp8 cache the log names
        settings.setdefault("kv_cache_dtype", logged["kv_cache_dtype"])
    if engine == "vllm" and "speculative_method" in logged:  # refused by the derived plan
        settings.setdefault("speculative_method", logged["speculative_method"])
        settings.setdefault("num_speculative_tokens", logged["num_speculative_tokens"])
    for flag in ("language_model_only", "skip_mm_profiling", "enable_lora"):  # non-default args
        if engine == "vllm" and logged.get(flag):
            settings.setdefault(flag, True)
    for key in ("cpu_offload_gb", "mm_encoder_tp_mode", "max_loras", "max_lora_rank"):
        if engine == "vllm" and key in logged:
            settings.setdefault(key, logged[key])
    if engine == "vllm" and "limit_mm_per_prompt" in logged:
        settings.setdefault("limit_mm_per_prompt", logged["limit_mm_per_prompt"])
    if engine == "vllm" and "reserved_kv_gib" in logged:  # the flag's bytes, else its line's GiB
        kv = logged.get("kv_cache_memory_bytes", int(logged["reserved_kv_gib"] * GIB))
        settings.setdefault("kv_cache_memory_bytes", kv)
    plan = engine_plan(spec, hw, engine, weight_dtype=weight_dtype, **settings)
    rows = []
    for key, label in COMPARED:
        if key not in logged:
            continue
        mine = _kvcalc_value(plan, key)
        err = None
        if mine is not None and logged[key]:
            err = round(100 * (mine - logged[key]) / abs(logged[key]), 3)
        rows.append({"figure": label, "logged": logged[key], "kvcalc": mine, "error_pct": err})
    learned = {"engine": engine, "model": spec.name, "gpu": hw.name}
    total = hw.total_memory_bytes
    if "total_gpu_memory_gib" in logged:
        total = int(logged["total_gpu_memory_gib"] * GIB)
        learned["total_memory_bytes"] = total
    if engine == "vllm" and {"weights_gib", "available_kv_cache_gib"} <= set(logged):
        # unset: the release's default (0.92 from 0.20.0; 1.0 with 0.34.0's extensible cache)
        v = parse_version(plan.version)
        u = settings.get("gpu_memory_utilization")
        u = vllm_gpu_memory_utilization(v, plan.extensible_kv_cache) if u is None else u
        used = (logged["weights_gib"] + logged["available_kv_cache_gib"]) * GIB
        learned["non_kv_overhead_bytes"] = int(total * u - used)
    if engine == "vllm" and {"peak_torch_gib", "non_torch_gib", "weights_gib"} <= set(logged):
        # V0's profile line splits the overhead: the activation peak scales with the tokens
        # of the profile batch (max_num_batched_tokens), the non-torch memory does not
        act = (logged["peak_torch_gib"] - logged["weights_gib"]) * GIB
        learned["activation_bytes_per_batched_token"] = act / plan.max_num_batched_tokens
        learned["non_torch_bytes"] = int(logged["non_torch_gib"] * GIB)
        learned.pop("non_kv_overhead_bytes", None)
    warm = ("warmup_free_gib", "warmup_committed_gib", "warmup_peak_gib")
    if engine == "vllm" and set(warm) <= set(logged):  # 0.34's measured sizing (vllm_extensible)
        headroom = logged["warmup_free_gib"] + logged["warmup_committed_gib"]
        learned["warmup_headroom_bytes"] = int(headroom * GIB)
        learned["warmup_transient_bytes"] = int(logged["warmup_peak_gib"] * GIB)
        learned["warmup_growth_bytes"] = int(logged.get("warmup_growth_gib", 0) * GIB)
    if engine == "vllm" and "init_free_gib" in logged:
        learned["init_free_bytes"] = int(logged["init_free_gib"] * GIB)
    if engine == "sglang" and "sglang_avail_before_weights_gib" in logged:
        learned["init_used_bytes"] = int(total - logged["sglang_avail_before_weights_gib"] * GIB)
    return Calibration(
        engine=engine, model=spec.name, gpu=hw.name, logged=logged, rows=rows, learned=learned
    )


def save_calibration(cal: Calibration, path: str | Path) -> None:
    Path(path).write_text(json.dumps(cal.learned, indent=2) + "\n")


def load_calibration(path: str | Path) -> dict:
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"cannot read calibration {str(path)!r}: {exc}") from exc
    if not isinstance(data, dict) or "engine" not in data:
        raise ValueError(f"calibration {str(path)!r} is not a file `kvcalc calibrate` wrote")
    return data
