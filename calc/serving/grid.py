"""Grids of engine plans: `engine_plan`'s figures over numpy arrays of settings.

`engine_plan_grid(model, gpu, "vllm", gpu_memory_utilization=[...], max_model_len=[...])`
returns one row per combination of the list-valued GRID_AXES, with the columns of
`engine_plan`'s JSON. The per-config constants (weights, KV layout, overheads) come from the
same `prepare` / `overheads.overheads` the single plan uses, and every row's figures from the
same calc.serving.figures functions, evaluated on arrays instead of at one point: a row equals
`engine_plan(...)` for its settings (tests/test_plan_unified.py checks it).
"""

from __future__ import annotations

import numpy as np

from calc.serving import figures as f
from calc.serving.defaults_sglang import sglang_version, sglang_vlm_runner_scale
from calc.serving.overheads import overheads
from calc.serving.plan import GIB, prepare
from calc.serving.vllm_drafter import drafter_modelled
from calc.serving.vllm_kv_memory import check_one_memory, sets_memory
from calc.serving.vllm_spec import check_derivable
from calc.serving.vllm_xpu import check_xpu_derivable


def _drafter_unknown(spec, cfg, lay, wd) -> bool:
    if cfg.engine != "vllm" or not lay.speculation.draft_layers:
        return False
    return not drafter_modelled(spec, wd)


GRID_AXES = ("gpu_memory_utilization", "mem_fraction_static", "max_model_len", "available_kv_gib")


def engine_plan_grid(
    model, gpu, engine: str = "vllm", *, weight_dtype=None, calibration=None, **settings
):
    """Rows over the cartesian product of the list-valued GRID_AXES settings (C order, in the
    order given); available_kv_gib replaces the derivation of the available memory, as in
    engine_plan."""
    import pandas as pd

    axes = {k: np.atleast_1d(np.asarray(v)) for k, v in settings.items() if k in GRID_AXES}
    fixed = {k: v for k, v in settings.items() if k not in GRID_AXES}
    for k, v in axes.items():
        if v.size == 0:
            raise ValueError(f"'{k}' must not be empty")
    mesh = np.meshgrid(*axes.values(), indexing="ij") if axes else []
    cols = {k: a.ravel() for k, a in zip(axes, mesh, strict=True)}
    given = cols.pop("available_kv_gib", None)
    # the engine's checks of each setting (its range, max_model_len <= the model's) at the
    # extremes of every axis, the other axes at their first point; the constants from the first
    cfg_axes = {k: v for k, v in axes.items() if k != "available_kv_gib"}
    first = {k: v[0].item() for k, v in cfg_axes.items()}
    for k, v in cfg_axes.items():
        for x in {v.min().item(), v.max().item()} - {first[k]}:
            at = {**fixed, **first, k: x}
            prepare(model, gpu, engine, weight_dtype=weight_dtype, calibration=calibration, **at)
    spec, hw, cfg, lay, weights, kd, wd, total = prepare(
        model, gpu, engine, weight_dtype=weight_dtype, calibration=calibration, **fixed, **first
    )
    if getattr(cfg, "auto_max_model_len", False):  # each plan's own search (vllm_autofit)
        raise ValueError(
            "'max_model_len' -1 (auto-fit) is planned one at a time (engine_plan): a grid takes "
            "explicit lengths"
        )
    n_rows = len(next(iter(cols.values()))) if cols else (1 if given is None else len(given))
    L = cols.get("max_model_len", np.full(n_rows, cfg.max_model_len)).astype(np.int64)
    w = max(weights)
    if engine == "sglang":
        if given is not None:
            rest = f.given_bytes(given)
        else:
            if "mem_fraction_static" in cols:  # as engine_config scales a given fraction
                kind = spec.vision.kind if spec.vision else None
                scale = sglang_vlm_runner_scale(sglang_version(cfg.version), kind)
                frac = cols["mem_fraction_static"] * scale
            else:
                frac = np.full(n_rows, cfg.mem_fraction_static)
            init_used = f.sglang_init_used(cfg, calibration, hw)
            rest = f.sglang_derived_budget(spec, cfg, weights, total, init_used, frac).rest
        r = f.sglang_figures(lay, cfg, rest, L)
        avail = rest
    else:
        if not cfg.is_v1:
            raise ValueError(f"'version' {cfg.version} is a V0 engine: grids model V1 (0.8.0 on)")
        measured = None
        check_one_memory(given, cfg)
        if given is not None:
            per_rank = [f.given_bytes(given)] * len(weights)
        elif sets_memory(cfg):  # --kv-cache-memory-bytes: the utilization has no effect
            per_rank = [np.full(n_rows, b, dtype=np.int64) for b in f.vllm_set_memory(cfg, weights)]
        else:
            check_derivable(cfg.speculative_method)
            check_xpu_derivable(hw.vendor)
            u = cols.get("gpu_memory_utilization", np.full(n_rows, cfg.gpu_memory_utilization))
            act, nt, cg = overheads(spec, cfg, wd, calibration, hw)
            per_rank, warm = f.vllm_derived_memory(
                cfg, weights, total, act, nt, cg, u, hw, calibration
            )
            measured = None if warm is None else [x[0] for x in warm]
        r = f.vllm_figures(lay, cfg, per_rank, L, measured)
        avail = r["logged_available"]  # what determine_available_memory logged
    out = {
        **cols,
        # an MTP drafter whose weights are not modelled (calc.serving.vllm_drafter): no figure
        "weights_gib": np.full(n_rows, np.nan if _drafter_unknown(spec, cfg, lay, wd) else w / GIB),
        "available_kv_cache_gib": avail / GIB,
        "num_gpu_blocks": r["num_gpu_blocks"],
        "gpu_kv_cache_tokens": r["tokens"],
        "max_concurrency": r["max_concurrency"],
    }
    if engine == "sglang":  # the scheduler's cap (calc.serving.sglang_requests)
        out["max_running_requests"] = np.broadcast_to(r["max_running_requests"], n_rows)
    return pd.DataFrame(out)
