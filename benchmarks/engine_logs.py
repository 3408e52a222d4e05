"""kvcalc beside every committed start-up log: `python benchmarks/engine_logs.py`.

One row per check (see calc.serving.evidence for the verdicts), then a summary.
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
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
