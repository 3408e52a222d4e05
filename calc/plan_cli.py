"""`kvcalc plan`, `kvcalc fit` and `kvcalc hardware`: the capacity planner on the command line.

    kvcalc plan llama-3-70b --gpu h100-sxm --gpus 2 --seq 8192       # memory + latency
    kvcalc plan mixtral-8x7b --gpu rtx-4090 --weights int4 --kv fp8 --json
    kvcalc fit llama-3-70b --seq 8192 --batch 16                     # fewest GPUs, every kind
    kvcalc hardware                                                  # the GPU presets

Registered through calc.cli.EXTENSIONS; errors are one line and exit 2 (calc.cli.run_guarded).
"""

from __future__ import annotations

import argparse

from calc.cli import (
    add_command,
    add_model_arg,
    dtype_arg,
    emit_json,
    int_at_least,
    print_pairs,
    print_table,
)

GIB = 2**30


def _float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number: got {text!r}") from None


def _memory_args(p, seq_required: bool) -> None:
    p.add_argument(
        "--seq",
        type=int_at_least(2),
        required=seq_required,
        metavar="N",
        help="tokens per sequence, prompt + output"
        + ("" if seq_required else " (default: the model's context)"),
    )
    p.add_argument(
        "--batch",
        type=int_at_least(1),
        default=1,
        metavar="B",
        help="concurrent sequences (default 1)",
    )
    p.add_argument(
        "--weights",
        type=dtype_arg,
        default="bf16",
        metavar="D",
        help="weight dtype: fp32, bf16, fp16, fp8, int8, int4 (default bf16)",
    )
    p.add_argument(
        "--kv", type=dtype_arg, default="bf16", metavar="D", help="KV-cache dtype (default bf16)"
    )
    p.add_argument(
        "--group-size",
        type=int_at_least(1),
        default=128,
        metavar="G",
        help="int4 quantization group (default 128)",
    )
    p.add_argument(
        "--util",
        type=_float,
        default=0.9,
        metavar="U",
        help="gpu_memory_utilization in (0, 1] (default 0.9, as vLLM)",
    )
    p.add_argument(
        "--reserve-gib",
        type=_float,
        default=None,
        metavar="X",
        help="runtime reserve per GPU, GiB (default 1 on one GPU, 2 on several)",
    )
    p.add_argument(
        "--max-batched-tokens",
        type=int_at_least(1),
        default=8192,
        metavar="T",
        help="prefill chunk the activation peak is sized for (default 8192)",
    )
    p.add_argument(
        "--block-size",
        type=int_at_least(1),
        default=16,
        metavar="N",
        help="KV block size in tokens (default 16)",
    )


def _memory_kwargs(args) -> dict:
    reserve = None if args.reserve_gib is None else args.reserve_gib * GIB
    if reserve is not None:
        if not reserve >= 0:
            raise ValueError(f"'--reserve-gib' must be >= 0: got {args.reserve_gib}")
        reserve = int(reserve)
    return dict(
        seq_len=args.seq,
        batch=args.batch,
        weight_dtype=args.weights,
        kv_dtype=args.kv,
        group_size=args.group_size,
        gpu_memory_utilization=args.util,
        runtime_reserve_bytes=reserve,
        max_num_batched_tokens=args.max_batched_tokens,
        block_size=args.block_size,
    )


def add_commands(subparsers) -> None:
    p = add_command(
        subparsers,
        "plan",
        cmd_plan,
        "does a model fit on N GPUs, how many sequences, and how fast (roofline)",
    )
    add_model_arg(p)
    p.add_argument(
        "--gpu",
        required=True,
        metavar="GPU",
        help="hardware preset (see `kvcalc hardware`) or a .toml in that schema",
    )
    p.add_argument("--gpus", type=int_at_least(1), default=1, metavar="N", help="GPUs (default 1)")
    p.add_argument(
        "--tp",
        type=int_at_least(1),
        default=None,
        metavar="N",
        help="tensor-parallel degree (default: --gpus; pp = gpus / tp)",
    )
    _memory_args(p, seq_required=False)
    p.add_argument(
        "--output",
        type=int_at_least(1),
        default=None,
        metavar="N",
        help="output tokens of the --seq (default min(256, seq / 2))",
    )
    p.add_argument(
        "--mfu",
        type=_float,
        default=0.5,
        metavar="F",
        help="prefill FLOPs utilization (default 0.5)",
    )
    p.add_argument(
        "--bw-eff",
        type=_float,
        default=0.8,
        metavar="F",
        help="decode HBM bandwidth efficiency (default 0.8)",
    )
    from calc.serving.cli import add_engine_args

    add_engine_args(p)  # --engine: the engine-exact plan (calc.serving)

    p = add_command(
        subparsers,
        "fit",
        cmd_fit,
        "the fewest GPUs of each kind that hold --batch sequences of --seq tokens",
    )
    add_model_arg(p)
    _memory_args(p, seq_required=True)
    p.add_argument(
        "--gpu",
        action="append",
        default=None,
        metavar="GPU",
        help="a hardware preset (repeat for several; default: every preset)",
    )
    p.add_argument(
        "--max-gpus",
        type=int_at_least(1),
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


# --- plan -------------------------------------------------------------------------------------


def cmd_plan(args) -> int:
    if args.engine:
        from calc.serving.cli import cmd_engine_plan

        return cmd_engine_plan(args)
    from calc.hardware import resolve_hardware
    from calc.plan import plan
    from calc.presets import resolve_model

    spec, hw = resolve_model(args.model), resolve_hardware(args.gpu)
    p = plan(
        spec,
        hw,
        gpus=args.gpus,
        tp=args.tp,
        output_tokens=args.output,
        mfu=args.mfu,
        bandwidth_efficiency=args.bw_eff,
        **_memory_kwargs(args),
    )
    if args.json:
        emit_json(p)
        return 0
    _print_plan(p, spec, hw)
    return 0


def _print_plan(p, spec, hw) -> None:
    from calc.units import fmt_bytes, group

    m, r = p.memory, p.roofline
    print(
        f"{spec.label} on {m.gpus} x {hw.label} (tp={m.tp}, pp={m.pp}), "
        f"weights {m.weight_dtype}, KV cache {m.kv_dtype}"
    )
    print("memory per GPU (GB = 10^9 B, GiB = 2^30 B)")
    total_src = (
        "nvidia-smi total" if hw.driver_total_mib else f"nominal {hw.memory_published or ''}"
    )
    print_pairs(
        [
            (f"total ({total_src.strip()})", fmt_bytes(m.total_memory_bytes)),
            (
                f"budget (x gpu_memory_utilization {m.gpu_memory_utilization})",
                fmt_bytes(m.budget_bytes),
            ),
            (f"weights ({m.weight_dtype})", fmt_bytes(m.weight_bytes)),
            (
                f"activations ({group(m.max_num_batched_tokens)}-token prefill chunk)",
                fmt_bytes(m.activation_bytes),
            ),
            ("runtime reserve", fmt_bytes(m.reserve_bytes)),
            ("KV-cache pool (budget - the above)", fmt_bytes(m.kv_budget_bytes)),
            (
                f"KV cache of the target ({m.batch} x {group(m.seq_len)} tokens)",
                fmt_bytes(m.kv_cache_bytes),
            ),
            ("free (total - weights - activations - reserve - target)", fmt_bytes(m.free_bytes)),
        ]
    )
    print("KV cache")
    rep = f", each replicated x{m.kv_replication} (tp > KV heads)" if m.kv_replication > 1 else ""
    ctx = "unbounded" if m.max_context_tokens is None else f"{group(m.max_context_tokens)} tokens"
    print_pairs(
        [
            ("KV heads per GPU", f"{m.kv_heads_per_gpu} of {spec.n_kv_heads}{rep}"),
            ("per token per GPU", fmt_bytes(m.kv_bytes_per_token)),
            (
                f"blocks of {m.block_size} tokens",
                f"{group(m.kv_blocks)} ({group(m.kv_tokens)} tokens)",
            ),
            (
                f"max concurrent sequences of {group(m.seq_len)} tokens",
                group(m.max_concurrent_seqs),
            ),
            (
                f"max context at batch {m.batch}",
                f"{ctx} (model context {group(m.model_context_tokens)})",
            ),
        ]
    )
    print(
        f"latency (roofline: mfu {r.mfu}, bandwidth efficiency {r.bandwidth_efficiency}, "
        f"{r.compute_dtype} peak {r.peak_flops_per_s / 1e12:,.1f} TFLOP/s dense, "
        f"ridge {r.ridge_flops_per_byte:,.0f} FLOP/B)"
    )
    print_pairs(
        [
            (
                f"TTFT ({group(r.prompt_tokens)}-token prompt)",
                f"{r.ttft_s * 1e3:,.2f} ms, {r.prefill.bound}-bound "
                f"({r.prefill.arithmetic_intensity:,.0f} FLOP/B)",
            ),
            (
                f"TPOT (mean over {group(r.output_tokens)} output tokens)",
                f"{r.tpot_s * 1e3:,.3f} ms, {r.decode_last.bound}-bound "
                f"({r.decode_last.arithmetic_intensity:,.1f} FLOP/B at the last step)",
            ),
            ("all-reduce time per decode step", f"{r.decode_first.comm_s * 1e3:,.3f} ms"),
            ("tokens/s per sequence", f"{r.tokens_per_s_per_seq:,.1f}"),
            (f"tokens/s total (batch {r.batch})", f"{r.tokens_per_s_total:,.1f}"),
            ("end to end", f"{r.e2e_s:,.3f} s"),
        ]
    )
    print(p.memory.message)


# --- fit --------------------------------------------------------------------------------------


def cmd_fit(args) -> int:
    from calc.fit import fit_table
    from calc.units import group, iec_bytes, si_bytes

    kw = _memory_kwargs(args)
    seq, batch = kw.pop("seq_len"), kw.pop("batch")
    t = fit_table(args.model, seq_len=seq, batch=batch, gpus=args.gpu, max_gpus=args.max_gpus, **kw)
    if args.json:
        emit_json(t)
        return 0
    print(
        f"{t.model}: fewest GPUs for {group(batch)} x {group(seq)} tokens "
        f"(weights {args.weights}, KV {args.kv}, gpu_memory_utilization {args.util})"
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
