"""kvcalc beside every committed start-up log: `python benchmarks/engine_logs.py`.

One row per check (see calc.serving.evidence for the verdicts), then a summary: the verdicts,
and per category (model feature) how many of its logs kvcalc checks at least one figure of.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from calc.serving.evidence import evaluate, load_cases

FOLDER = Path(__file__).parent / "engine_logs"


def main() -> int:
    cases = load_cases(FOLDER)
    checks = [c for case in cases for c in evaluate(case)]
    width = max(len(c.case) for c in checks)
    for c in checks:
        print(
            f"{c.case:<{width}}  {c.figure:<40} logged {c.logged!s:<14} kvcalc "
            f"{c.kvcalc!s:<22} {c.verdict:<14} {c.note}"
        )
    counts = Counter(c.verdict for c in checks)
    print(
        f"\n{len(cases)} logs, {len(checks)} checks: "
        + ", ".join(f"{n} {v}" for v, n in counts.most_common())
    )
    print("modelled logs by category: " + ", ".join(category_summary(cases, checks)))
    quant = {c["id"] for c in cases if "quantized" in c.get("categories", [])}
    for c in checks:
        if c.case in quant and c.figure == "weights_gib":
            print(f"quantized weights: {c.case} logged {c.logged} GiB, kvcalc {c.kvcalc} {c.note}")
    return 0


def category_summary(cases: list[dict], checks) -> list[str]:
    """'sliding-hybrid 4/4': logs of the category with at least one figure checked / all."""
    checked = {c.case for c in checks if c.verdict != "not modelled"}
    total: Counter = Counter()
    done: Counter = Counter()
    for case in cases:
        for cat in case.get("categories", []):
            total[cat] += 1
            done[cat] += case["id"] in checked
    return [f"{cat} {done[cat]}/{n}" for cat, n in sorted(total.items())]


if __name__ == "__main__":
    raise SystemExit(main())
