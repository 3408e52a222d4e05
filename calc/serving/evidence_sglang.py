"""SGLang's start-up logs against kvcalc (calc.serving.evidence): the pool's token count from
the logged free memory, the K / KV buffer size from the logged #tokens, the weights; then from
first principles (no logged memory): the free memory before the weights (SGLang's "total",
calc.serving.sglang_memory), #tokens and the K / KV size, and the default mem_fraction_static
against the one server_args printed."""

from __future__ import annotations

from calc.serving.defaults_sglang import sglang_version
from calc.serving.evidence_checks import HALF, Check, _abs, _eq, _pct
from calc.serving.evidence_sglang_pool import pool_end_checks
from calc.serving.memory import sglang_k_size_bytes, sglang_max_total_tokens, sglang_rest_bytes
from calc.serving.plan import GIB, engine_plan, prepare
from calc.serving.sglang_memory import sglang_load_extra_bytes
from calc.serving.sglang_requests import RESOLVE_FROM, mamba_cap, max_running_requests
from calc.serving.sglang_spec_pool import headroom_tokens, pool_cell_bytes
from calc.spec import ModelSpec


def sglang_checks(case: dict, spec: ModelSpec, s: dict, hw) -> list[Check]:
    cid, log = case["id"], case["logged"]
    _, _, cfg, lay, _, _, _, _ = prepare(spec, hw, "sglang", **s)
    if "max_total_num_tokens" not in log:  # no KV line: the weights and the default fraction
        return _sglang_weights(case, spec, hw, s) + _sglang_default_fraction(case, s, cfg)
    t = log["max_total_num_tokens"]
    out = _sglang_from_avail(case, cfg, lay) + _sglang_requests(case, cfg, lay)
    out += _sglang_weights(case, spec, hw, s)
    out += _sglang_first_principles(case, spec, hw, s, cfg)
    out += pool_end_checks(case, spec, hw, s, cfg, lay)
    if lay.mla:  # one buffer, "KV size" (NSA: with the indexer keys from sglang #11309 on)
        if "kv_size_gib" not in log:  # a log quoting no pool line
            return out
        kv = lay.sglang_pool_bytes(t, cfg.page_size, logged=True)
        want = f"{log['kv_size_gib']:.2f}"
        return [_eq(cid, "KV size, GiB (from the logged #tokens)", want, f"{kv / GIB:.2f}")] + out
    k = sglang_k_size_bytes(
        t, cfg.page_size, lay.kv_heads, lay.head_size, max(lay.rank_layers), lay.kv_bytes
    )
    if "k_size_gib" not in log:  # a report giving K + V together (kv_total_gib) or neither
        if "kv_total_gib" not in log:
            return out
        want = f"{log['kv_total_gib']:.2f}"
        return [_eq(cid, "K + V size, GiB (from the #tokens)", want, f"{2 * k / GIB:.2f}")] + out
    want = f"{log['k_size_gib']:.2f}"
    return [_eq(cid, "K size, GiB (from the logged #tokens)", want, f"{k / GIB:.2f}")] + out


def avail_before(log: dict) -> tuple[float | None, float]:
    """(free memory before the weights, its half-width): "Load weight begin. avail mem" (0.01
    GiB, HALF), else "Load weight end"'s avail mem + mem usage, both taken from the same two
    unrounded readings (model_runner.load_model: mem usage = before - after), so their sum is
    known to 2 x HALF; (None, 0) when neither is logged."""
    if "sglang_avail_before_weights_gib" in log:
        return log["sglang_avail_before_weights_gib"], HALF
    after, usage = log.get("sglang_avail_after_weights_gib"), log.get("weights_gib")
    if after is None or usage is None:
        return None, 0.0
    return round(after + usage, 2), 2 * HALF


def _sglang_from_avail(case: dict, cfg, lay) -> list[Check]:
    """#tokens from the logged free memory: "Load weight begin. avail mem" is SGLang's total
    (the free memory after its distributed init, model_runner.init_torch_distributed), "Load
    weight end. avail mem" what profile_max_num_token starts from; both printed to 0.01 GiB."""
    log = case["logged"]
    before, e = avail_before(log)
    after = log.get("sglang_avail_after_weights_gib")
    if before is None or after is None or lay.sglang_swa or lay.sglang_mamba:
        return []  # the mamba pool's share of the budget: not checked from a log yet
    f, P = cfg.mem_fraction_static, cfg.page_size
    cell = pool_cell_bytes(lay.cell_bytes(), cfg, max(lay.rank_layers))  # + a draft's layers
    lo = sglang_rest_bytes(int((after - HALF) * GIB), int((before + e) * GIB), f)
    hi = sglang_rest_bytes(int((after + HALF) * GIB), int((before - e) * GIB), f)
    h = headroom_tokens(cfg)  # speculative decoding's draft / verify tokens (sglang_spec)
    t_lo, t_hi = (sglang_max_total_tokens(x, cell, P, h) for x in (lo, hi))
    t = log["max_total_num_tokens"]
    verdict = "exact" if t_lo == t_hi == t else ("in interval" if t_lo <= t <= t_hi else "miss")
    note = f"{t_lo:,}..{t_hi:,} for avail mem {before} GB before / {after} GB after the weights"
    return [
        Check(case["id"], "#tokens (from the logged avail mem)", t, (t_lo, t_hi), verdict, note)
    ]


def _sglang_requests(case: dict, cfg, lay) -> list[Check]:
    """The scheduler line's max_running_requests from its own max_total_num_tokens and
    context_len (and the logged max_mamba_cache_size for linear layers): exact, by the release's
    rule (calc.serving.sglang_requests). Skipped where the rule reads a count the log does not
    print: the sliding-window split's input before 0.5.10."""
    log, v = case["logged"], sglang_version(cfg.version)
    if "max_running_requests" not in log or (lay.sglang_swa and v < RESOLVE_FROM):
        return []
    cap = None
    if lay.sglang_mamba:
        if "max_mamba_cache_size" not in log:
            return []
        cap = mamba_cap(lay.sglang_mamba, v, cfg, log["max_mamba_cache_size"])
    t, L = log["max_total_num_tokens"], log["context_len"]
    n = max_running_requests(v, t, L, cfg, cap)
    note = f"from max_total_num_tokens={t:,}, context_len={L:,}"
    if cap is not None:
        note += f", max_mamba_cache_size={cap[0]} // {cap[1]} states a request"
    return [
        _eq(
            case["id"],
            "max_running_requests (from the logged #tokens)",
            log["max_running_requests"],
            n,
            note,
        )
    ]


def _sglang_weights(case: dict, spec: ModelSpec, hw, s: dict) -> list[Check]:
    """'Load weight end ... mem usage=X GB': the load's allocation on one rank, 0.01 GiB."""
    log = case["logged"]
    before = log.get("sglang_avail_before_weights_gib")
    after = log.get("sglang_avail_after_weights_gib")
    want = log.get("weights_gib")
    if want is None and before is not None and after is not None:
        want = round(before - after, 2)  # releases that print no "mem usage" (0.4.1)
    if want is None:
        return []
    wd = case.get("weight_dtype", "bf16")
    p = engine_plan(spec, hw, "sglang", available_kv_gib=1.0, weight_dtype=wd, **s)
    mine = (p.weights_bytes + sglang_load_extra_bytes()) / GIB  # the drop in free memory
    return [_pct(case["id"], "weights_gib", want, mine)]


def _sglang_first_principles(case: dict, spec: ModelSpec, hw, s: dict, cfg) -> list[Check]:
    """kvcalc's own plan (no logged memory) beside the log, under the names vLLM's first-principles
    checks use: non_torch_gib = what start-up took before "Load weight begin. avail mem" (total
    - that figure; target 0.1 GiB), available_kv_cache_gib = the token pool (K + V size, or the
    MLA KV size; target 2 %, #tokens in the note); and the default mem_fraction_static where
    server_args printed one with no flag."""
    cid, log = case["id"], case["logged"]
    wd = case.get("weight_dtype", "bf16")
    p = engine_plan(spec, hw, "sglang", weight_dtype=wd, **s)
    if p.refusal and log.get("max_total_num_tokens"):  # the log allocated a pool; kvcalc none
        why = (
            f"kvcalc's weights ({p.weights_gib} GiB a GPU in {wd}) leave no pool: the case gives "
            "no quantization_config for its checkpoint"
        )
        return [Check(cid, "first principles", "-", "-", "not modelled", why)]
    out = []
    before, e = avail_before(log)
    if before is not None:
        used = p.total_memory_bytes / GIB - before
        c = _abs(cid, "non_torch_gib", round(used, 4), p.non_torch_bytes / GIB)
        if e != HALF:  # no "Load weight begin" line: its figure from "Load weight end"
            c = Check(cid, c.figure, c.logged, c.kvcalc, c.verdict, f"{c.note}; {before} GiB = "
                      "avail mem + mem usage of Load weight end")  # fmt: skip
        out.append(c)
    if "k_size_gib" in log or "kv_size_gib" in log or "kv_total_gib" in log:
        want = log.get("kv_size_gib") or log.get("kv_total_gib")
        want = want or log["k_size_gib"] + log["v_size_gib"]
        mine = p.k_size_gib if "kv_size_gib" in log else 2 * p.k_size_gib
        c = _pct(cid, "available_kv_cache_gib", round(want, 2), mine)
        t = log["max_total_num_tokens"]
        note = f"{c.note}; #tokens {p.gpu_kv_cache_tokens:,} for {t:,} ({_pct_of(p.gpu_kv_cache_tokens, t)})"
        out.append(Check(cid, c.figure, c.logged, c.kvcalc, c.verdict, note))
    return out + _sglang_default_fraction(case, s, cfg)


def _sglang_default_fraction(case: dict, s: dict, cfg) -> list[Check]:
    """server_args' mem_fraction_static when the run gave none: SGLang rounds its default to 3
    decimals (round((gpu_mem - reserved) / gpu_mem, 3)) and prints that float's repr, so the
    check is exact to the printed digits (0.83 is 0.830)."""
    log = case["logged"]
    if "mem_fraction_static_printed" not in log or "mem_fraction_static" in s:
        return []
    printed = log["mem_fraction_static_printed"]
    mine = round(cfg.mem_fraction_static, 3)
    return [_eq(case["id"], "default mem_fraction_static", printed, mine)]


def _pct_of(mine, logged) -> str:
    return f"{100 * (mine - logged) / logged:+.2f} %"
