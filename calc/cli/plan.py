"""`kvcalc plan`: the capacity planner on the command line (`fit` and `hardware` are in
calc.cli.fit, which imports the memory arguments defined here).

    kvcalc plan llama-3-70b --gpu h100-sxm --gpus 2 --seq 8192       # memory + latency
    kvcalc plan mixtral-8x7b --gpu rtx-4090 --weights int4 --kv fp8 --json
    kvcalc plan llama-2-70b --gpu h100-sxm --gpus 3                  # tp=1, pp=3, with a note

Without --tp, tp is the largest degree that works on --gpus GPUs (calc.tp): all of them where
the head counts allow, else fewer with pipeline stages, and a note on stderr says why. An --tp
that cannot work is an error that lists the ones that can. Integer arguments are bounded by
calc.limits. Registered through calc.cli.main.EXTENSIONS; errors are one line and exit 2.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from calc.cli.args import add_command, add_model_arg, dtype_arg, int_at_least, kv_dtype_arg
from calc.cli.output import context_note, emit_json, note

GIB = 2**30


def _float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number: got {text!r}")
    return value


def memory_args(p, seq_required: bool) -> None:
    """--seq, --batch, dtypes and the vLLM memory knobs, as `plan` and `fit` take them."""
    p.add_argument(
        "--seq",
        type=int_at_least(2, "seq_len"),
        required=seq_required,
        metavar="N",
        help="tokens per sequence, prompt + output"
        + ("" if seq_required else " (default: the model's context)"),
    )
    p.add_argument(
        "--batch",
        type=int_at_least(1, "batch"),
        default=1,
        metavar="B",
        help="concurrent sequences (default 1)",
    )
    p.add_argument(
        "--weights",
        type=dtype_arg,
        default=None,
        metavar="D",
        help="weight dtype: fp32, bf16, fp16, fp8, int8, int4 (default bf16; with --engine, a "
        "quantized checkpoint's torch_dtype)",
    )
    p.add_argument(
        "--kv",
        type=kv_dtype_arg,
        default=None,
        metavar="D",
        help="KV-cache dtype (default bf16; with --engine, auto: the model's dtype, and the "
        "release's --kv-cache-dtype choices)",
    )
    p.add_argument(
        "--group-size",
        type=int_at_least(1, "group_size"),
        default=128,
        metavar="G",
        help="int4 quantization group (default 128)",
    )
    p.add_argument(
        "--util",
        type=_float,
        default=None,
        metavar="U",
        help="gpu_memory_utilization in (0, 1] (default 0.9; with --engine, the release's own: "
        "0.92 from vLLM 0.20)",
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
        type=int_at_least(1, "max_num_batched_tokens"),
        default=8192,
        metavar="T",
        help="prefill chunk the activation peak is sized for (default 8192)",
    )
    p.add_argument(
        "--block-size",
        type=int_at_least(1, "block_size"),
        default=None,
        metavar="N",
        help="KV block size in tokens (default 16; with --engine vllm the release's backend "
        "default, 256 for DeepSeek-V4)",
    )


def generic_util(args) -> float:
    """--util, or the generic plan's default (vLLM's 0.9 before 0.20)."""
    from calc.activation import DEFAULT_GPU_MEMORY_UTILIZATION

    return DEFAULT_GPU_MEMORY_UTILIZATION if args.util is None else args.util


def _generic_kv(kv: str | None) -> str:
    """kvcalc's own plan: bf16 for auto; nvfp4 is an engine format (vLLM's) it does not plan."""
    if kv == "nvfp4":
        raise ValueError("'--kv' nvfp4 is vLLM's packed cache: plan it with --engine vllm")
    return "bf16" if kv in (None, "auto") else kv


def memory_kwargs(args) -> dict:
    reserve = None if args.reserve_gib is None else args.reserve_gib * GIB
    if reserve is not None:
        if not 0 <= reserve <= 2**50:
            raise ValueError(f"'--reserve-gib' must be from 0 to 1,048,576: got {args.reserve_gib}")
        reserve = int(reserve)
    return dict(
        seq_len=args.seq,
        batch=args.batch,
        weight_dtype=args.weights or "bf16",
        kv_dtype=_generic_kv(args.kv),
        group_size=args.group_size,
        gpu_memory_utilization=generic_util(args),
        runtime_reserve_bytes=reserve,
        max_num_batched_tokens=args.max_batched_tokens,
        block_size=args.block_size or 16,
    )


def gpu_arg(text: str, total_gib: float | None = None):
    """A hardware preset, ignoring case, or a .toml path (calc.hardware.resolve_hardware);
    `total_gib` (--gpu-memory-gib) replaces the total CUDA reports."""
    from calc.hardware import list_hardware, resolve_hardware

    folded = {n.casefold(): n for n in list_hardware()}
    name = folded.get(text.strip().casefold(), text)
    if name == text and Path(text).is_dir():
        raise ValueError(f"'--gpu' {text!r} is a directory: pass a hardware preset or a .toml file")
    hw = resolve_hardware(name)
    if total_gib is None:
        return hw
    most = hw.cuda_total_most_gib
    if not 0 < total_gib <= most:
        raise ValueError(
            f"'--gpu-memory-gib' must be in (0, {most:.2f}] ({hw.name}'s "
            f"{'nvidia-smi' if hw.driver_total_mib else 'nominal'} total): got {total_gib:g}"
        )
    return hw.model_copy(update={"cuda_total_gib": total_gib})


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
    p.add_argument(
        "--gpu-memory-gib",
        type=_float,
        default=None,
        metavar="X",
        help="total memory per GPU as CUDA reports it (vLLM logs it as total_gpu_memory, "
        "torch's out-of-memory error as 'total capacity'; default: the preset's)",
    )
    p.add_argument(
        "--gpus", type=int_at_least(1, "gpus"), default=1, metavar="N", help="GPUs (default 1)"
    )
    p.add_argument(
        "--tp",
        type=int_at_least(1, "tp"),
        default=None,
        metavar="N",
        help="tensor-parallel degree, pp = gpus / tp (default: the largest that works, "
        "--gpus where the head counts allow)",
    )
    memory_args(p, seq_required=False)
    p.add_argument(
        "--output",
        type=int_at_least(1, "output_tokens"),
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


# --- plan -------------------------------------------------------------------------------------


def _tp(spec, gpus: int, tp: int | None) -> int:
    """--tp as given (an error listing what works if it cannot), else the largest that works."""
    from calc.tp import pick_tp, tp_problem, valid_tps

    if tp is None:
        tp, why = pick_tp(spec, gpus)
        if why:
            note(f"--tp not given; {why}")
        return tp
    problem = tp_problem(spec, gpus, tp)
    if problem:
        works = ", ".join(map(str, valid_tps(spec, gpus))) or "none"
        raise ValueError(
            f"{problem} (tp values that work for {spec.label} on {gpus} GPUs: {works})"
        )
    return tp


def cmd_plan(args) -> int:
    if args.engine:
        from calc.serving.cli import cmd_engine_plan

        return cmd_engine_plan(args)
    from calc.plan import plan
    from calc.presets import resolve_model

    spec, hw = resolve_model(args.model), gpu_arg(args.gpu, args.gpu_memory_gib)
    p = plan(
        spec,
        hw,
        gpus=args.gpus,
        tp=_tp(spec, args.gpus, args.tp),
        output_tokens=args.output,
        mfu=args.mfu,
        bandwidth_efficiency=args.bw_eff,
        **memory_kwargs(args),
    )
    context_note(spec, args.seq)
    if args.json:
        emit_json(p)
        return 0
    from calc.cli.plan_text import print_plan

    print_plan(p, spec, hw)
    return 0
