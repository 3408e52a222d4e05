"""Grids of engine plans: the arithmetic of calc.serving.memory over numpy arrays.

`engine_plan_grid(model, gpu, "vllm", gpu_memory_utilization=[...], max_model_len=[...])`
returns one row per combination, with the columns of `engine_plan`'s JSON. The per-config
constants (weights, KV layout, overheads) come from the same `prepare` / `overheads` the single
plan uses, and every row's figures from the same memory.py functions, on arrays: a row equals
`engine_plan(...)` for its settings (tests/test_serving_grid.py checks it).
"""

from __future__ import annotations

import numpy as np

from calc.serving import memory as m
from calc.serving.overheads import overheads
from calc.serving.plan import GIB, prepare

GRID_AXES = ("gpu_memory_utilization", "mem_fraction_static", "max_model_len", "available_kv_gib")


def engine_plan_grid(model, gpu, engine: str = "vllm", *, weight_dtype="bf16", **settings):
    """Rows over the cartesian product of the list-valued GRID_AXES settings."""
    import pandas as pd

    axes = {k: np.atleast_1d(np.asarray(v)) for k, v in settings.items() if k in GRID_AXES}
    fixed = {k: v for k, v in settings.items() if k not in GRID_AXES}
    given = axes.pop("available_kv_gib", None)
    mesh = np.meshgrid(*axes.values(), indexing="ij") if axes else []
    cols = {k: a.ravel() for k, a in zip(axes, mesh, strict=True)}
    first = {k: (v[0].item() if hasattr(v[0], "item") else v[0]) for k, v in cols.items()}
    spec, hw, cfg, lay, weights, kd, wd, total = prepare(
        model, gpu, engine, weight_dtype=weight_dtype, **fixed, **first
    )
    n_rows = max((len(v) for v in cols.values()), default=1)
    L = cols.get("max_model_len", np.full(n_rows, cfg.max_model_len)).astype(np.int64)
    if given is not None:
        avail = np.broadcast_to(
            (given * GIB).astype(np.int64), (n_rows,) if n_rows > 1 else given.shape
        )
        L = np.broadcast_to(L, avail.shape)
    w = max(weights)
    if engine == "sglang":
        frac = cols.get("mem_fraction_static", np.full(n_rows, cfg.mem_fraction_static))
        if given is None:
            sg_total = total - _init_used(cfg)
            avail = m.sglang_rest_bytes(sg_total - w, sg_total, frac)
        tokens = m.sglang_max_total_tokens(avail, lay.cell_bytes(), cfg.page_size)
        if lay.sglang_swa:  # the full layers' pool (the sliding pool is ratio x as many)
            full, swa = lay.sglang_swa
            tokens = m.sglang_swa_tokens(tokens, full, swa, cfg.swa_full_tokens_ratio)[0]
        return pd.DataFrame(
            {
                **cols,
                "weights_gib": w / GIB,
                "available_kv_cache_gib": avail / GIB,
                "num_gpu_blocks": tokens // cfg.page_size,
                "gpu_kv_cache_tokens": tokens,
                "max_concurrency": tokens / L,
            }
        )
    if not cfg.is_v1:
        raise ValueError(f"'version' {cfg.version} is a V0 engine: grids model V1 (0.8.0 on)")
    B = lay.block_size(cfg.block_size)
    if given is None:
        u = cols.get("gpu_memory_utilization", np.full(n_rows, cfg.gpu_memory_utilization))
        act, nt, cg = overheads(spec, cfg, wd, None)
        avail = m.vllm_available_bytes(total, u, w, act, nt, cg)
    page = lay.page_bytes(B)
    blocks = m.vllm_num_blocks(avail, page, lay.rank_group_size(int(np.argmax(weights))))
    tokens = m.vllm_gpu_kv_cache_tokens(blocks, lay.report_block(B, L), len(lay.groups))
    per_req = lay.blocks_per_request(L, B, cfg.max_num_batched_tokens)
    return pd.DataFrame(
        {
            **cols,
            "weights_gib": w / GIB,
            "available_kv_cache_gib": avail / GIB,
            "num_gpu_blocks": blocks,
            "gpu_kv_cache_tokens": tokens,
            "max_concurrency": blocks / per_req,
        }
    )


def _init_used(cfg) -> int:
    from calc.serving.overheads import non_torch_bytes

    return non_torch_bytes(cfg.tensor_parallel_size, 1)
