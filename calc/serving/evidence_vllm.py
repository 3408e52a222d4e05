"""vLLM's start-up report checked from what the log itself gives: the logged available memory
(blocks, tokens, the one-request refusal, PP ranks' minimum), the logged blocks (the memory
they fill) and the concurrency line. calc/serving/evidence.py holds the verdicts' vocabulary
and the first-principles checks."""

from __future__ import annotations

from calc.serving import figures
from calc.serving import memory as m
from calc.serving.engine import parse_version
from calc.serving.evidence_checks import HALF, Check, _eq, _interval, _pct
from calc.serving.plan import GIB, engine_plan
from calc.spec import ModelSpec


def given_memory_checks(case: dict, spec: ModelSpec, hw, wd, s: dict, cfg, lay) -> list[Check]:
    """The start-up report given the logged available memory (rounded to 0.01 GiB): blocks,
    tokens, the one-request refusal's figures, and PP ranks' minimum (`cfg` / `lay` are read
    only for PP ranks and another rank's token line)."""
    cid, log, x = case["id"], case["logged"], case["logged"].get("available_kv_cache_gib")
    out: list[Check] = []
    if "warmup_kv_blocks" in log and lay is not None:
        return _warmup_checks(case, spec, hw, wd, s, cfg, lay)
    if x is not None and x > 0 and "pp_non_kv_total_gib" in log:
        out += _pp_ranks(case, cfg, lay, x)
    elif x is not None and x > 0:
        lo = engine_plan(spec, hw, available_kv_gib=x - HALF, weight_dtype=wd, **s)
        hi = engine_plan(spec, hw, available_kv_gib=x + HALF - 1e-9, weight_dtype=wd, **s)
        for key, label in (
            ("gpu_kv_cache_tokens", "GPU KV cache size, tokens"),
            ("num_gpu_blocks", "GPU blocks"),
        ):
            if key in log and log.get("token_line_other_rank"):
                B, one = cfg.block_size, lay.page_bytes(cfg.block_size) * lay.group_size
                per_block = block_bytes(lay, B) if len(lay.groups) == 1 else one
                out.append(_other_rank(cid, label, log[key], lo, hi, x, B, per_block))
            elif key in log:
                out.append(_interval(cid, label, log[key], getattr(lo, key), getattr(hi, key), x))
        out += _refusal_figures(cid, log, lo, hi, x)
    return out


def _warmup_checks(case: dict, spec: ModelSpec, hw, wd, s: dict, cfg, lay) -> list[Check]:
    """vLLM 0.34.0's extensible KV cache: the blocks of the "Memory after warmup" line are the
    cache's ("Available KV cache memory" only reserves its capacity), so the token and
    concurrency lines follow from them exactly (calc.serving.vllm_extensible), and the capacity
    must hold them."""
    cid, log = case["id"], case["logged"]
    B = lay.block_size(cfg.block_size)
    n, per = log["warmup_kv_blocks"], block_bytes(lay, B)
    p = engine_plan(spec, hw, available_kv_gib=n * per / GIB, weight_dtype=wd, **s)
    note = f"from the logged {n:,} blocks after warmup"
    out = [_eq(cid, "GPU blocks", n, p.num_gpu_blocks, note)]
    if "gpu_kv_cache_tokens" in log:
        out.append(_eq(cid, "GPU KV cache size, tokens", log["gpu_kv_cache_tokens"],
                       p.gpu_kv_cache_tokens, note))  # fmt: skip
    if "max_concurrency" in log:
        want, got = f"{log['max_concurrency']:.2f}", f"{p.max_concurrency:.2f}"
        out.append(_eq(cid, "maximum concurrency", want, got, note))
    x = log.get("available_kv_cache_gib")
    if x is not None:
        cap = int((x + HALF) * GIB) // per
        out.append(_eq(cid, "capacity holds the blocks", True, cap >= n, f"{x} GiB reserved"))
    return out


def _refusal_figures(cid: str, log: dict, lo, hi, x: float) -> list[Check]:
    """The one-request refusal's figures (KV needed, the estimated maximum model length) of the
    plans at the two ends of the logged memory's rounding."""
    out = []
    if "needed_kv_cache_gib" in log:
        got = _between(lo.refusal or "", "max seq len (", "GiB KV cache is needed")
        got = got.split("(")[-1].strip() if got else "-"
        want = f"{log['needed_kv_cache_gib']:.2f}"
        out.append(_eq(cid, "KV cache needed for one request, GiB", want, got))
    if "estimated_max_model_len" in log:
        e = log["estimated_max_model_len"]
        out.append(
            _interval(cid, "estimated maximum model length", e, _longest(lo), _longest(hi), x)
        )
    return out


def v4_checks(case: dict, spec: ModelSpec, hw, s: dict) -> list[Check]:
    """DeepSeek-V4 (calc.serving.plan_v4): the report given the logged memory, and the weights
    per GPU where calc.serving.v4_weights models the run; the available memory from first
    principles is not modelled (its activation peak)."""
    cid, log = case["id"], case["logged"]
    b = case.get("kv_cache_memory_bytes")  # --kv-cache-memory: the available memory exactly
    if b is None:
        out = given_memory_checks(case, spec, hw, None, s, None, None)
    else:
        p = engine_plan(spec, hw, available_kv_gib=b / GIB, **s)
        note = f"given --kv-cache-memory {b:,} B"
        out = [_eq(cid, "GPU KV cache size, tokens", log["gpu_kv_cache_tokens"],
                   p.gpu_kv_cache_tokens, note)]  # fmt: skip
        if "max_concurrency" in log:
            want, got = f"{log['max_concurrency']:.2f}", f"{p.max_concurrency:.2f}"
            out.append(_eq(cid, "maximum concurrency", want, got, note))
    x = log.get("available_kv_cache_gib")
    if log.get("refused"):
        p = engine_plan(spec, hw, available_kv_gib=x, **s)
        out.append(_eq(cid, "refused at start-up", True, not p.fits, f"given {x} GiB"))
    if "weights_gib" in log:
        from calc.serving.v4_weights import check_v4_vllm

        p = engine_plan(spec, hw, available_kv_gib=x if x is not None else 1.0, **s)
        if p.weights_bytes is not None:
            out.append(_pct(cid, "weights_gib", log["weights_gib"], p.weights_bytes / GIB))
        else:
            try:  # the reason it is not modelled
                pp = s.get("pipeline_parallel_size", 1)
                check_v4_vllm(spec, parse_version(p.version), hw.name, pp)
            except ValueError as e:
                out.append(Check(cid, "weights_gib", "-", "-", "not modelled", str(e)))
    why = "DeepSeek-V4's activation peak (hyper-connections, compressors, indexer, fp4 MoE)"
    out.append(Check(cid, "available memory", "-", "-", "not modelled", why))
    return out


def from_logged_blocks(case, spec, hw, wd, s, cfg, lay) -> list[Check]:
    """A log that prints blocks or tokens but not the memory (V0 before 0.7, refusals): the
    memory the blocks fill, n x block bytes (+ half a block: the floor's mean remainder),
    against the first-principles figure."""
    B = cfg.block_size
    n = logged_blocks(case["logged"], B)
    if not n:
        return []
    p = engine_plan(spec, hw, weight_dtype=wd, **s)
    check = _pct(
        case["id"], "available_kv_cache_gib", round((n + 0.5) * block_bytes(lay, B) / GIB, 4),
        p.available_kv_cache_bytes / GIB, f"from the logged {n:,} blocks: ",
    )  # fmt: skip
    return [check]


def logged_blocks(log: dict, B: int) -> int:  # printed, or the token capacity / B; else 0
    return log.get("num_gpu_blocks") or log.get("kv_cache_capacity_tokens", 0) // B


def block_bytes(lay, B: int) -> int:  # a block of every layer (one KV-cache group)
    return lay.page_bytes(B) * max(lay.rank_layers)


def _pp_ranks(case: dict, cfg, lay, x: float) -> list[Check]:
    """Pipeline parallel, vLLM V1: each rank sizes its own cache (requested memory minus its own
    non-KV total, gpu_worker.py determine_available_memory) and the engine keeps the fewest
    blocks (0.19.0 sdist, v1/core/kv_cache_utils.py get_kv_cache_configs). Only rank 0 prints
    "Available KV cache memory" at INFO; every rank prints its "Total non KV cache memory" at
    DEBUG ([logged] pp_non_kv_total_gib), so rank r had x + non_kv[0] - non_kv[r]: three
    figures printed to 0.01 GiB, known to within 0.015 GiB (0.005 for rank 0)."""
    log, L = case["logged"], cfg.max_model_len
    nk = log["pp_non_kv_total_gib"]
    slack = [HALF if r == 0 else 3 * HALF for r in range(len(nk))]
    mid = [x + nk[0] - n for n in nk]
    pairs = list(zip(mid, slack, strict=True))
    lo = figures.vllm_figures(lay, cfg, [int((a - e) * GIB) for a, e in pairs], L)
    hi = figures.vllm_figures(lay, cfg, [int((a + e) * GIB) - 1 for a, e in pairs], L)
    per = ", ".join(f"{a:.2f}" for a in mid)
    out = []
    for key, label, name in (
        ("gpu_kv_cache_tokens", "GPU KV cache size, tokens", "tokens"),
        ("num_gpu_blocks", "GPU blocks", "num_gpu_blocks"),
    ):
        if key in log:
            a, b, got = lo[name], hi[name], log[key]
            verdict = "exact" if a == b == got else ("in interval" if a <= got <= b else "miss")
            note = f"{a:,}..{b:,} for ranks' {per} GiB (limiting rank {lo['rank']})"
            out.append(Check(case["id"], label, got, (a, b), verdict, note))
    return out


def concurrency_check(cid, log, cfg, lay, B, L) -> Check:
    """The concurrency line from the logged blocks, or tokens, through figures.vllm_concurrency
    (what engine_plan prints). With G KV-cache groups the token line is blocks // G x block
    (the attention block, raised for a linear layer's state), so it leaves G candidate block
    counts; from 0.21.0 it is int(concurrency x L), which leaves the block counts that print
    it: the check is that the logged figure is one of theirs."""
    want = f"{log['max_concurrency']:.2f}"
    note = "from the logged blocks / tokens"
    if "num_gpu_blocks" in log:
        candidates = [log["num_gpu_blocks"]]
    elif not cfg.is_v1:
        candidates = [log["gpu_kv_cache_tokens"] // B]
    elif cfg.version_tuple >= m.TOKENS_FROM_CONCURRENCY:  # tokens = int(concurrency x L)
        per_request = figures.vllm_concurrency(lay, cfg, 1, L)[2]
        guess = log["gpu_kv_cache_tokens"] * per_request // L
        near = range(max(guess - 2, 0), guess + 3)
        candidates = [n for n in near
                      if figures.vllm_concurrency(lay, cfg, n, L)[0] == log["gpu_kv_cache_tokens"]]  # fmt: skip
    else:
        groups = len(lay.groups)
        dcp = cfg.decode_context_parallel_size  # the token line's factor before 0.21
        k = log["gpu_kv_cache_tokens"] // dcp // lay.report_block(lay.block_size(B), L)
        candidates = [k * groups + i for i in range(groups)]
    if not candidates:
        return Check(cid, "maximum concurrency", want, None, "miss", "no block count prints the "
                     "logged tokens")  # fmt: skip
    got = sorted({f"{figures.vllm_concurrency(lay, cfg, n, L)[1]:.2f}" for n in candidates})
    if len(got) == 1:
        return _eq(cid, "maximum concurrency", want, got[0], note)
    per_request = figures.vllm_concurrency(lay, cfg, candidates[0], L)[2]
    note = (
        f"{candidates[0]:,}..{candidates[-1]:,} blocks of {lay.block_size(B)} tokens, "
        f"{per_request} a request"
    )
    verdict = "in interval" if want in got else "miss"
    return Check(cid, "maximum concurrency", want, (got[0], got[-1]), verdict, note)


def _other_rank(cid, label, logged, lo, hi, x, block, per_block) -> Check:
    """A token / block line printed by another worker than the quoted available-memory line:
    the memory its own worker had is what its blocks need (one group: blocks x bytes a block
    of every layer), to within one block."""
    blocks = logged // block if label.startswith("GPU KV cache size") else logged
    low, high = blocks * per_block / GIB, (blocks + 1) * per_block / GIB
    note = (
        f"{lo.gpu_kv_cache_tokens:,}..{hi.gpu_kv_cache_tokens:,} for the quoted {x} GiB; the "
        f"line's own worker had {low:.3f}..{high:.3f} GiB"
    )
    return Check(cid, label, logged, (getattr(lo, _KEY[label]), getattr(hi, _KEY[label])),
                 "other rank", note)  # fmt: skip


_KEY = {"GPU KV cache size, tokens": "gpu_kv_cache_tokens", "GPU blocks": "num_gpu_blocks"}


def _between(text: str, a: str, b: str) -> str:
    i = text.find(a)
    j = text.find(b, i)
    return text[i + len(a) : j] if i >= 0 and j > i else ""


def _longest(plan) -> int:
    line = plan.refusal or ""
    key = "estimated maximum model length is "
    return int(line[line.find(key) + len(key) :].split(".")[0]) if key in line else -1


def kv_memory_checks(case: dict, spec: ModelSpec, hw, wd, s: dict) -> list[Check]:
    """--kv-cache-memory-bytes (calc.serving.vllm_kv_memory): the setting, exactly as passed on
    the command line, is the memory, so kvcalc's own plan (no logged figure given) must print
    the log's reserved GiB, tokens and concurrency exactly."""
    cid, log = case["id"], case["logged"]
    p = engine_plan(spec, hw, weight_dtype=wd, **s)
    note = f"--kv-cache-memory-bytes {s['kv_cache_memory_bytes']}"
    out = []
    if "reserved_kv_gib" in log:
        line = next(x for x in p.log_lines if x.startswith("Initial free memory"))
        got = _between(line, ", reserved ", "GiB memory").strip()
        out.append(
            _eq(cid, "reserved KV cache memory, GiB", str(log["reserved_kv_gib"]), got, note)
        )
    for key, label in (
        ("num_gpu_blocks", "GPU blocks"),
        ("gpu_kv_cache_tokens", "GPU KV cache size, tokens"),
    ):
        if key in log:
            out.append(_eq(cid, label, log[key], getattr(p, key), note))
    if "max_concurrency" in log:
        want, got = f"{log['max_concurrency']:.2f}", f"{p.max_concurrency:.2f}"
        out.append(_eq(cid, "maximum concurrency", want, got, note))
    if "weights_gib" in log:
        out.append(_pct(cid, "weights_gib", log["weights_gib"], p.weights_bytes / GIB))
    return out
