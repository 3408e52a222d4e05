"""One logged figure beside kvcalc's (calc.serving.evidence): the Check record and its verdicts."""

from __future__ import annotations

from dataclasses import dataclass

HALF = 0.005  # GiB printed to 2 decimals
TARGETS = {"weights_gib": 0.5, "available_kv_cache_gib": 2.0, "activation_gib": 2.0}
# vLLM 0.34.0: the KV cache the post-warmup measurement sizes (the 2 % on KV memory)
TARGETS["KV cache after warmup, GiB"] = 2.0
# vLLM 0.26+'s suggested --kv-cache-memory: the available memory less the captured graphs
TARGETS["suggested --kv-cache-memory, GiB"] = 2.0


@dataclass(frozen=True)
class Check:
    case: str
    figure: str
    logged: object
    kvcalc: object
    verdict: str
    note: str = ""


def _eq(cid, figure, logged, mine, note=""):
    return Check(cid, figure, logged, mine, "exact" if logged == mine else "miss", note)


def _interval(cid, label, logged, lo, hi, x) -> Check:
    verdict = "exact" if lo == hi == logged else ("in interval" if lo <= logged <= hi else "miss")
    note = f"{lo:,}..{hi:,} for {x - HALF:.3f}..{x + HALF:.3f} GiB"
    return Check(cid, label, logged, (lo, hi), verdict, note)


NON_TORCH_TARGET_GIB = 0.1  # a term of a few hundredths of a GiB: judged in GiB, not percent


def _abs(cid, key, logged, mine) -> Check:
    err = mine - logged
    verdict = "within target" if abs(err) <= NON_TORCH_TARGET_GIB else "miss"
    note = f"{err:+.3f} GiB (target {NON_TORCH_TARGET_GIB} GiB)"
    return Check(cid, key, logged, round(mine, 4), verdict, note)


def _pct(cid, key, logged, mine, prefix="") -> Check:
    err = 100 * (mine - logged) / abs(logged)
    verdict = "within target" if abs(err) <= TARGETS[key] else "miss"
    note = f"{prefix}{err:+.2f} % (target {TARGETS[key]} %)"
    return Check(cid, key, logged, round(mine, 4), verdict, note)
