"""Dashboard page rerun times under streamlit.testing's AppTest (target: <= 300 ms per rerun).

For each page: the first run after switching to it (cold: its calc calls miss the cache), then
the median and worst of N reruns (what a user waits for after moving a widget that hits the
cache), and one rerun after a widget change that misses it. Prints a table; asserts nothing.

    .venv/bin/python benchmarks/bench_dashboard.py [N]
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from streamlit.testing.v1 import AppTest  # noqa: E402

VIEWS = ("model", "kv_cache", "attention", "capacity", "compare", "validation")
# one widget per page whose change misses the cache: (kind, key, value)
CHANGES = {
    "model": ("selectbox", "model:model", "llama-2-7b"),
    "kv_cache": ("number_input", "kv:batch", 7),
    "attention": ("number_input", "attention:batch", 7),
    "capacity": ("number_input", "capacity:batch", 7),
    "compare": ("number_input", "compare:ctx", 8192),
    "validation": ("selectbox", "validation:model", "llama-2-7b"),
}


def _ms(f) -> float:
    t = time.perf_counter()
    f()
    return 1000 * (time.perf_counter() - t)


def main(n: int = 20) -> None:
    at = AppTest.from_file(str(ROOT / "dashboard" / "app.py"), default_timeout=120)
    print(f"app start (imports, first page): {_ms(at.run):.0f} ms")
    print(f"{'page':<12} {'cold ms':>8} {'rerun median':>13} {'rerun max':>10} {'changed ms':>11}")
    for view in VIEWS:
        if not (ROOT / "dashboard" / "views" / f"{view}.py").is_file():
            print(f"{view:<12} (missing)")
            continue
        at.switch_page(f"views/{view}.py")
        cold = _ms(at.run)
        if at.exception:
            print(f"{view:<12} exception: {at.exception[0].value}")
            continue
        reruns = [_ms(at.run) for _ in range(n)]
        kind, key, value = CHANGES[view]
        changed = float("nan")
        try:
            widget = getattr(at, kind)(key=key)
            widget.set_value(value)
            changed = _ms(at.run)
        except KeyError:
            pass
        print(
            f"{view:<12} {cold:>8.1f} {statistics.median(reruns):>13.1f} "
            f"{max(reruns):>10.1f} {changed:>11.1f}"
        )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 20)
