"""`kvcalc fit` and `kvcalc hardware`: the fewest GPUs of each kind for a target, and the GPU
presets. Registered through calc.cli.main.EXTENSIONS; `fit` takes the memory arguments of
calc.cli.plan.

    kvcalc fit llama-3-70b --seq 8192 --batch 16                     # fewest GPUs, every kind
    kvcalc hardware                                                  # the GPU presets
"""

from __future__ import annotations

from calc.cli.args import add_command, add_model_arg, int_at_least
from calc.cli.output import emit_json, print_table
from calc.cli.plan import generic_util, gpu_arg, memory_args, memory_kwargs


def add_commands(subparsers) -> None:
    p = add_command(
        subparsers,
        "fit",
        cmd_fit,
        "the fewest GPUs of each kind that hold --batch sequences of --seq tokens",
    )
    add_model_arg(p)
    memory_args(p, seq_required=True)
    p.add_argument(
        "--gpu",
        action="append",
        default=None,
        metavar="GPU",
        help="a hardware preset (repeat for several; default: every preset)",
    )
    p.add_argument(
        "--max-gpus",
        type=int_at_least(1, "max_gpus"),
        default=64,
        metavar="N",
        help="largest deployment to consider (default 64)",
    )
    add_command(
        subparsers,
        "hardware",
        cmd_hardware,
        "GPU presets: memory, bandwidth, dense peak TFLOP/s, interconnect",
    )


# --- fit --------------------------------------------------------------------------------------


def cmd_fit(args) -> int:
    from calc.fit import fit_table
    from calc.units import group, iec_bytes, si_bytes

    kw = memory_kwargs(args)
    seq, batch = kw.pop("seq_len"), kw.pop("batch")
    gpus = [gpu_arg(g) for g in args.gpu] if args.gpu else None
    t = fit_table(args.model, seq_len=seq, batch=batch, gpus=gpus, max_gpus=args.max_gpus, **kw)
    if args.json:
        emit_json(t)
        return 0
    print(
        f"{t.model}: fewest GPUs for {group(batch)} x {group(seq)} tokens "
        f"(weights {args.weights or 'bf16'}, KV {memory_kwargs(args)['kv_dtype']}, gpu_memory_utilization {generic_util(args)})"
    )
    rows = []
    for r in t.rows:
        if not r.fits:
            rows.append((r.gpu, "-", "-", "-", "-", "-", f"no fit up to {args.max_gpus} GPUs"))
            continue
        rows.append(
            (
                r.gpu,
                r.gpus,
                r.tp,
                r.pp,
                f"{si_bytes(r.weight_bytes)} / {iec_bytes(r.weight_bytes)}",
                f"{si_bytes(r.kv_budget_bytes)} / {iec_bytes(r.kv_budget_bytes)}",
                group(r.max_concurrent_seqs),
            )
        )
    print_table(
        rows,
        (
            "gpu",
            "gpus",
            "tp",
            "pp",
            "weights per GPU (GB / GiB)",
            "KV pool per GPU (GB / GiB)",
            "max sequences",
        ),
    )
    return 0


# --- hardware ---------------------------------------------------------------------------------


def cmd_hardware(args) -> int:
    from calc.hardware import list_hardware, load_hardware
    from calc.units import iec_bytes

    hws = [load_hardware(n) for n in list_hardware()]
    if args.json:
        emit_json([h.model_dump(mode="json") for h in hws])
        return 0
    rows = []
    for h in hws:
        rows.append(
            (
                h.name,
                h.memory_published or f"{h.memory_size:g} {h.memory_unit}",
                iec_bytes(h.total_memory_bytes),
                f"{h.hbm_bandwidth_gb_per_s:,.0f}",
                _peak(h, "bf16"),
                _peak(h, "fp8"),
                _peak(h, "int8"),
                f"{h.interconnect} {h.interconnect_gb_per_s:,.0f}",
            )
        )
    print_table(
        rows,
        (
            "name",
            "memory (as published)",
            "visible",
            "GB/s",
            "bf16 TFLOP/s",
            "fp8",
            "int8 TOPS",
            "interconnect GB/s (both ways)",
        ),
    )
    print(
        "\nPeak rates are dense (datasheet 'with sparsity' figures halved). `--json` for sources."
    )
    return 0


def _peak(h, dtype: str) -> str:
    return f"{h.peak_flops_per_s(dtype) / 1e12:,.0f}" if h.has_peak(dtype) else "-"
