"""Latency of a serving plan: calc.roofline's TTFT / TPOT for the plan's parallel layout.

One home for the roofline formulas (calc.roofline); this module only maps an EngineConfig
onto its arguments: tp and pp from the config, the weight and KV dtypes the plan resolved.
"""

from __future__ import annotations

from calc.roofline import Roofline, roofline


def plan_latency(
    spec,
    hw,
    plan,
    *,
    batch: int,
    prompt_tokens: int,
    output_tokens: int,
    weight_dtype="bf16",
    **options,
) -> Roofline:
    """TTFT, TPOT and throughput of `batch` requests of prompt + output tokens on `plan`'s GPUs."""
    return roofline(
        spec,
        hw,
        tp=plan.tensor_parallel_size,
        pp=plan.pipeline_parallel_size,
        batch=batch,
        prompt_tokens=prompt_tokens,
        output_tokens=output_tokens,
        weight_dtype=weight_dtype,
        kv_dtype=plan.kv_cache_dtype,
        **options,
    )
