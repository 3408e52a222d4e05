"""`kvcalc show`'s stored-weights section: the bytes a checkpoint of the model stores
(calc.weight_bytes_breakdown), in the checkpoint's own base dtype (its quantization config's, else
config.json's torch_dtype, else bf16), by component and part, with the quantization scheme."""

from __future__ import annotations

from calc.cli.output import print_pairs, print_table
from calc.units import fmt_bytes, group, iec_bytes


def stored_summary(spec) -> dict:
    """What `show --json` reports under "stored_weights"."""
    from calc.quant.weights import stored_dtype, weight_bytes_breakdown

    parts = weight_bytes_breakdown(spec)
    q = spec.quantization
    return {
        "base_dtype": stored_dtype(spec),
        "quant_method": q.method if q else None,
        "total_bytes": sum(parts.values()),
        "breakdown_bytes": {k: v for k, v in parts.items() if v},
    }


def print_stored(spec) -> None:
    s = stored_summary(spec)
    q = spec.quantization
    if q is None:
        what = f"every tensor in {s['base_dtype']}"
        if spec.checkpoint_dtype is None:
            what += " (no torch_dtype given: bf16 assumed)"
    else:
        schemes = ", ".join(_scheme_text(x) for x in q.schemes)
        if q.expert_dtype == "fp4":  # DeepSeek-V4 (calc/quant/weights_v4.py)
            schemes += "; routed experts 4-bit fp4, group 32, e8m0 scales"
        what = f"{q.method}: {schemes}; the rest in {s['base_dtype']}"
    print("\nstored weights (what a checkpoint's safetensors hold)")
    print_pairs([("checkpoint", what)])
    rows = [(k, group(v), iec_bytes(v)) for k, v in s["breakdown_bytes"].items()]
    print_table(rows, ("component:part", "bytes", "size"), indent=2)
    print()
    print_pairs([("total", fmt_bytes(s["total_bytes"]))])


def _scheme_text(x) -> str:
    if x.block_size:
        grain = f"block {x.block_size[0]}x{x.block_size[1]}"
    elif x.group_size:
        grain = f"group {x.group_size}"
    else:
        grain = x.strategy
    kind = x.quant_type or x.layout
    return f"{x.bits}-bit {kind}, {grain}, {x.scale_dtype} scales"
