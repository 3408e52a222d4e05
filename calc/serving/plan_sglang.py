"""SGLang's start-up figures for one deployment (calc.serving.plan.engine_plan's SGLang path): the
KV budget given or derived (calc.serving.figures), the pools, the scheduler's cap and the lines
SGLang prints."""

from __future__ import annotations

from calc.serving import figures as f
from calc.serving import memory as m
from calc.serving.defaults_sglang import sglang_version
from calc.serving.figures import GIB
from calc.serving.indexed_sglang import sglang_dsa_lines
from calc.serving.plan_result import EnginePlan, identity
from calc.serving.sglang_budget import budget_refusal
from calc.serving.sglang_fp4 import fp4_lines
from calc.serving.sglang_kv_lines import (
    allocated_pool_bytes,
    draft_pool_lines,
    dtype_line,
    sglang_pool_lines,
    torch_kv_dtype,
)
from calc.serving.sglang_nvfp4 import nvfp4_lines
from calc.serving.sglang_pool_end import pool_bytes, pool_end_line
from calc.serving.sglang_requests import scheduler_line
from calc.serving.sglang_spec import speculation
from calc.serving.sglang_spec_pool import draft_pool_bytes, mtp_pool_layers


def sglang_plan(
    spec, hw, config, lay, weights, kd, total, given_gib, calibration, model_dtype
) -> EnginePlan:
    """`model_dtype`: SGLang's (calc.serving.sglang_kv_lines.sglang_model_dtype)."""
    L = config.max_model_len
    w = max(weights)
    budget = None  # derived: its free memory is what 0.5.14's refusal reads
    if given_gib is not None:
        rest, source = f.given_bytes(given_gib), "given"
        init_used = None
    else:
        init_used = f.sglang_init_used(config, calibration, hw)
        frac = config.mem_fraction_static
        budget = f.sglang_derived_budget(spec, config, weights, total, init_used, frac)
        rest = budget.rest
        source = "calibrated" if calibration else "derived"
    r = f.sglang_figures(lay, config, rest, L)
    tokens, k_size, cell, conc = (
        r["tokens"],
        r["k_size_bytes"],
        r["cell_bytes"],
        r["max_concurrency"],
    )
    v = sglang_version(config.version)
    kv = config.kv_cache_dtype
    fp4 = nvfp4_lines(v, hw) if kv == "nvfp4" else fp4_lines() if kv == "fp4_e2m1" else []
    warn, hook = fp4[:1], fp4[1:]  # the warning by the pool's lines; nvfp4's hook line first
    lines = [
        *hook,
        *([lay.block_line] if lay.block_line else []),
        *sglang_dsa_lines(config, lay),
    ]
    lines.append(f"Load weight end. mem usage={w / GIB:.2f} GB")
    dtype = torch_kv_dtype(config.kv_cache_dtype, model_dtype, hw, v)
    lines += warn + dtype_line(v, dtype) + sglang_pool_lines(lay, config, r, dtype)
    sp, draft = speculation(config), mtp_pool_layers(config, lay)
    draft_bytes = None
    if draft and tokens > 0:  # the draft worker's pool, printed after the target's
        draft_bytes = draft_pool_bytes(lay, tokens, config.page_size, draft)
        lines += draft_pool_lines(config, r, dtype, draft_bytes)
    refusal = (r["mamba"] or {}).get("refusal")
    if budget is not None and not refusal:  # the budget after the mamba pool (sglang_budget)
        left = r["mamba"]["rest"] if r["mamba"] else rest
        refusal = budget_refusal(config, budget.pre, budget.available, left)
    refusal = refusal or m.sglang_refusal(tokens)
    refusal = refusal or r["requests_refusal"]
    n = r["max_running_requests"]
    pool = free_end = None
    if not refusal:  # the pools' segments; the free memory after them where it was derived
        size, swa = r["request_pool_size"], r["swa_tokens"]
        pool = pool_bytes(v, spec, lay, config, tokens, size, L, swa)
    if pool is not None and budget is not None:
        free_end = budget.available - pool
        lines.append(pool_end_line(free_end))
    lines.append(scheduler_line(sglang_version(config.version), tokens, config, n, L))
    if refusal:
        lines.append(f"RuntimeError: {refusal}")
    return EnginePlan(
        **identity(spec, hw, config, kd, source, total),
        max_num_batched_tokens=None,
        weights_bytes=w,
        weights_gib=round(w / GIB, 2),
        activation_bytes=None,
        non_torch_bytes=init_used,
        cudagraph_bytes=None,
        available_kv_cache_bytes=rest,
        available_kv_cache_gib=round(rest / GIB, 2),
        kv_groups=1,
        page_bytes=cell,
        num_gpu_blocks=r["num_gpu_blocks"],
        gpu_kv_cache_tokens=tokens,
        max_concurrency=conc,
        refusal=refusal,
        k_size_gib=None if k_size is None else round(k_size / GIB, 2),
        allocated_kv_cache_bytes=allocated_pool_bytes(lay, config, r, rest),
        max_mamba_cache_size=r["mamba"]["slots"] if r["mamba"] else None,
        max_running_requests=n,
        speculative_method=sp.algorithm if sp else None,
        num_speculative_tokens=sp.draft_tokens if sp else None,
        draft_layers=config.speculative_draft_num_layers or 0,
        draft_kv_size_gib=None if draft_bytes is None else round(draft_bytes / GIB, 2),
        draft_weights_bytes=(budget.held or None) if budget else None,
        pool_allocated_bytes=pool,
        pool_end_free_bytes=free_end,
        log_lines=lines,
    )
