"""Speed of checkpoint weight bytes: prints figures, asserts nothing (the target is in the output).

    .venv/bin/python benchmarks/bench_quant.py [--quick]

1. `calc.weight_bytes(spec)` for every preset, warm (the spec's memo filled): the median µs of
   the slowest preset, target <= 20 µs; and the breakdown (a dict copy).
2. The same for quantized specs (presets with a GPTQ, AWQ, fp8-block, compressed-tensors,
   bitsandbytes and ModelOpt NVFP4 config): warm, and cold (a fresh spec each call: the whole
   per-layer assignment and every layout formula).
The machine is shared, so every figure is the best of a few runs; medians within each run.
"""

from __future__ import annotations

import argparse

from timing import best_median_us

TARGET_WARM_US = 20.0

CONFIGS = {  # quantization_config shapes as published checkpoints write them
    "gptq w4 g128 desc_act": {
        "quant_method": "gptq",
        "bits": 4,
        "group_size": 128,
        "desc_act": True,
    },
    "awq w4 g128 gemm": {"quant_method": "awq", "bits": 4, "group_size": 128, "version": "gemm"},
    "fp8 128x128 blocks": {"quant_method": "fp8", "weight_block_size": [128, 128]},
    "bnb nf4 double quant": {
        "quant_method": "bitsandbytes",
        "load_in_4bit": True,
        "bnb_4bit_quant_type": "nf4",
        "bnb_4bit_use_double_quant": True,
    },
    "compressed-tensors w4a16": {
        "quant_method": "compressed-tensors",
        "format": "pack-quantized",
        "config_groups": {
            "g": {"targets": ["Linear"], "weights": {"num_bits": 4, "group_size": 128}}
        },
        "ignore": ["lm_head"],
    },
    "modelopt nvfp4": {
        "quant_method": "modelopt",
        "quant_algo": "NVFP4",
        "exclude_modules": ["lm_head"],
    },
}


def bench_presets(iterations: int, runs: int) -> tuple[str, float, float]:
    import calc

    worst = ("", 0.0, 0.0)
    for name in calc.list_presets():
        spec = calc.load_preset(name)
        calc.weight_bytes(spec)  # fill the memo
        warm = best_median_us(lambda: calc.weight_bytes(spec), iterations, runs)  # noqa: B023
        parts = best_median_us(lambda: calc.weight_bytes_breakdown(spec), iterations, runs)  # noqa: B023
        if warm > worst[1]:
            worst = (name, warm, parts)
    return worst


def bench_quantized(iterations: int, runs: int) -> dict[str, tuple[float, float]]:
    import calc
    from calc.quant import parse_quantization_config

    base = calc.load_preset("llama-3.1-70b")
    out = {}
    for label, qc in CONFIGS.items():
        q = parse_quantization_config(qc, dtype="bf16")
        spec = base.replace(quantization=q.model_dump())
        calc.weight_bytes(spec)
        warm = best_median_us(lambda: calc.weight_bytes(spec), iterations, runs)  # noqa: B023
        fresh = [
            base.replace(quantization=q.model_dump()) for _ in range(max(20, iterations // 50))
        ]
        it = iter(fresh)
        cold = best_median_us(lambda: calc.weight_bytes(next(it)), len(fresh), 1)  # noqa: B023
        out[label] = (warm, cold)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer iterations")
    args = ap.parse_args()
    iterations, runs = (200, 2) if args.quick else (2000, 5)
    name, warm, parts = bench_presets(iterations, runs)
    ok = "ok" if warm <= TARGET_WARM_US else "MISSED"
    print(
        f"weight_bytes, slowest preset warm ({name}): {warm:.2f} µs  (target <= {TARGET_WARM_US} µs: {ok})"
    )
    print(f"weight_bytes_breakdown, same preset warm: {parts:.2f} µs")
    print("quantized llama-3.1-70b (warm / cold µs):")
    for label, (w, c) in bench_quantized(iterations, runs).items():
        print(f"  {label:28s} {w:8.2f} / {c:10.1f}")


if __name__ == "__main__":
    main()
