"""SGLang's "Memory pool end. avail mem" against kvcalc (calc.serving.sglang_pool_end): from the
same rank's logged "Load weight end. avail mem" less the pools' segments, and from first
principles (the free memory before the weights, less kvcalc's weights and pools)."""

from __future__ import annotations

from calc.serving.defaults_sglang import sglang_version
from calc.serving.evidence_checks import HALF, Check, _abs
from calc.serving.plan import GIB, engine_plan
from calc.serving.sglang_pool_end import pool_bytes
from calc.serving.sglang_requests import request_pool_size

FROM_LOG = "Memory pool end, avail GiB (from the logged Load weight end)"
FIRST_PRINCIPLES = "Memory pool end, avail GiB"


def pool_end_checks(case: dict, spec, hw, s: dict, cfg, lay) -> list[Check]:
    log = case["logged"]
    if "sglang_pool_end_gib" not in log or "max_total_num_tokens" not in log:
        return []
    return _from_log(case, spec, cfg, lay) + _first_principles(case, spec, hw, s)


def _from_log(case: dict, spec, cfg, lay) -> list[Check]:
    """after - pool against the logged pool end: each printed to 0.01 GiB from an unrounded
    reading, so the two agree when they differ by less than 2 x HALF. The request pool's rows
    from the logged #tokens (E before 0.5.10 reads the count before the page rounding: the
    same 2048 / 4096 clamp for every case here)."""
    log = case["logged"]
    after = log.get("sglang_avail_after_weights_gib")
    if after is None:
        return []
    v, t = sglang_version(cfg.version), log["max_total_num_tokens"]
    L = log.get("context_len", cfg.max_model_len)
    size = request_pool_size(v, t, L, cfg)
    swa = log.get("swa_layer_tokens")  # a sliding-window pool's second count
    pool = (
        None if lay.sglang_swa and swa is None else pool_bytes(v, spec, lay, cfg, t, size, L, swa)
    )
    if pool is None:
        return [Check(case["id"], FROM_LOG, log["sglang_pool_end_gib"], "-", "not modelled")]
    mine = after - pool / GIB
    end = log["sglang_pool_end_gib"]
    verdict = "in interval" if abs(mine - end) < 2 * HALF else "miss"
    note = (
        f"{after} GiB after the weights - {pool / GIB:.4f} GiB of pool segments "
        f"(a request pool of {size:,} x {L + 4:,}; {t:,} tokens)"
    )
    return [Check(case["id"], FROM_LOG, end, round(mine, 4), verdict, note)]


def _first_principles(case: dict, spec, hw, s: dict) -> list[Check]:
    """kvcalc's derived plan's pool end (its weights, start-up and pools) beside the log."""
    wd = case.get("weight_dtype", "bf16")
    p = engine_plan(spec, hw, "sglang", weight_dtype=wd, **s)
    if p.pool_end_free_bytes is None:
        return []
    end = case["logged"]["sglang_pool_end_gib"]
    return [_abs(case["id"], FIRST_PRINCIPLES, end, p.pool_end_free_bytes / GIB)]
