"""Speed of the engine-exact planner: `python benchmarks/bench_serving.py`.

Prints the warm time of one `engine_plan` (derived and from a logged available memory, vLLM and
SGLang) and of a 10^5-plan grid (1000 utilizations x 100 max_model_lens).
Bars (issue 10): one plan <= 100 us warm; a 10^5-plan grid <= 1 s.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from calc.serving.grid import engine_plan_grid  # noqa: E402
from calc.serving.plan import engine_plan  # noqa: E402


def per_call_us(fn, n: int = 2000, repeats: int = 5) -> float:
    fn()
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - t) / n)
    return best * 1e6


def main() -> int:
    cases = {
        "vllm plan, derived": lambda: engine_plan(
            "llama-3.1-70b", "h100-sxm", tensor_parallel_size=4, max_model_len=32768
        ),
        "vllm plan, --available-kv-gib": lambda: engine_plan(
            "llama-3.1-8b", "h100-sxm", available_kv_gib=6.51, max_model_len=32768
        ),
        "sglang plan, derived": lambda: engine_plan("llama-3.1-8b", "h100-sxm", "sglang"),
    }
    for name, fn in cases.items():
        print(f"{name:<34} {per_call_us(fn):8.1f} us per plan (bar 100 us)")
    utils, lens = np.linspace(0.5, 0.95, 1000), np.arange(1, 101) * 1024
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter()
        df = engine_plan_grid(
            "llama-3.1-8b", "h100-sxm", gpu_memory_utilization=utils, max_model_len=lens
        )
        best = min(best, time.perf_counter() - t)
    print(f"{'grid of ' + format(len(df), ',') + ' plans':<34} {best * 1e3:8.1f} ms (bar 1000 ms)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
