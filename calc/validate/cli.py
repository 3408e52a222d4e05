"""`kvcalc validate`: measure real PyTorch modules and compare with kvcalc's numbers.

    kvcalc validate llama-2-70b                       # one model, table on stdout
    kvcalc validate --all --device cpu --markdown --out reports/validation-cpu.md
    kvcalc validate --all --json --out reports/validation-cpu.json

Exit status: 0 when every check is within its tolerance, 1 when one is not, 2 on bad input.
A progress bar goes to stderr when it is a terminal (not with --quiet). Importing this module
does not import torch; running the command does.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from calc.cli.args import add_command
from calc.cli.output import print_table
from calc.validate.results import CHECKS

BAR_WIDTH = 30


class ProgressBar:
    """`[#####-----] 12/144 llama-2-70b: flops` on stderr, redrawn in place; silent off a TTY."""

    def __init__(self, enabled: bool, stream=None) -> None:
        self.stream = stream or sys.stderr
        self.enabled = enabled and getattr(self.stream, "isatty", lambda: False)()
        self.t0 = time.perf_counter()

    def __call__(self, done: int, total: int, label: str) -> None:
        if not self.enabled:
            return
        filled = BAR_WIDTH * done // max(total, 1)
        bar = "#" * filled + "-" * (BAR_WIDTH - filled)
        secs = time.perf_counter() - self.t0
        line = f"[{bar}] {done}/{total} {secs:5.0f}s {label}"
        self.stream.write("\r" + line[:120].ljust(120))
        self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self.stream.write("\r" + " " * 120 + "\r")
            self.stream.flush()


def _checks_arg(text: str) -> tuple[str, ...]:
    import argparse

    names = tuple(t.strip() for t in text.split(",") if t.strip())
    bad = [n for n in names if n not in CHECKS]
    if bad or not names:
        raise argparse.ArgumentTypeError(
            f"must be a comma-separated list of {', '.join(CHECKS)}: got {text!r}"
        )
    return names


def add_commands(subparsers) -> None:
    p = add_command(
        subparsers,
        "validate",
        cmd_validate,
        "measure real PyTorch modules and compare with kvcalc (params, FLOPs, KV, peak memory)",
    )
    p.add_argument("models", nargs="*", metavar="MODEL", help="preset names or config paths")
    p.add_argument(
        "--all", action="store_true", help="every shipped preset, then the layer-kind models"
    )
    p.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (default cpu)")
    p.add_argument(
        "--dtype", default=None, help="fp32, bf16 or fp16 (default: fp32 on CPU, bf16 on CUDA)"
    )
    p.add_argument(
        "--checks",
        type=_checks_arg,
        default=CHECKS,
        metavar="LIST",
        help=f"subset of {','.join(CHECKS)}",
    )
    p.add_argument(
        "--flop-layers",
        type=int,
        default=None,
        metavar="L",
        help="count FLOPs on L layers instead of the full depth (faster; per-layer counts are the same)",
    )
    p.add_argument("--markdown", action="store_true", help="print the Markdown report")
    p.add_argument(
        "--out",
        metavar="FILE",
        help="write the report to FILE (format from --json/--markdown or the suffix)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def _specs(args):
    """Presets, config paths, or the layer-kind models of calc.validate.kinds (`--all`: every
    preset the reference modules build, then the kind models; DeepSeek-V4 presets are left
    out: `run` refuses them, tests/test_deepseek_v4_reference.py checks them against
    transformers' own model)."""
    from calc.presets import list_presets, load_preset, resolve_model
    from calc.validate.kinds import CONFIGS, kind_spec

    if args.all and args.models:
        raise ValueError("give MODEL names or --all, not both")
    if not args.all and not args.models:
        raise ValueError("give one or more MODEL names, or --all")
    presets = list_presets()
    if args.all:
        built = [n for n in presets if not load_preset(n).is_v4]
        names = built + [k for k in CONFIGS if k not in presets]
    else:
        names = args.models
    return [kind_spec(n) if n in CONFIGS and n not in presets else resolve_model(n) for n in names]


def _format(args) -> str:
    json_out = getattr(args, "json", False)
    if json_out and args.markdown:
        raise ValueError("'--json' and '--markdown' exclude each other")
    if json_out:
        return "json"
    if args.markdown:
        return "markdown"
    if args.out and Path(args.out).suffix in (".md", ".json"):
        return "markdown" if Path(args.out).suffix == ".md" else "json"
    return "table"


def _command_line(args) -> str:
    parts = ["kvcalc validate"] + (["--all"] if args.all else list(args.models))
    parts += ["--device", args.device]
    if args.flop_layers:
        parts += ["--flop-layers", str(args.flop_layers)]
    parts.append("--markdown")
    if args.out:
        parts += ["--out", args.out]
    return " ".join(parts)


def cmd_validate(args) -> int:
    from calc.validate import report as rp
    from calc.validate.runner import run_many

    if args.flop_layers is not None and args.flop_layers < 1:
        raise ValueError(f"'--flop-layers' must be an integer >= 1: got {args.flop_layers}")
    fmt = _format(args)
    specs = _specs(args)
    if args.out:
        out = Path(args.out)
        if not out.parent.is_dir():
            raise ValueError(f"'--out' directory does not exist: {str(out.parent)!r}")
    bar = ProgressBar(enabled=not args.quiet)
    try:
        rep = run_many(
            specs,
            args.device,
            dtype=args.dtype,
            flop_layers=args.flop_layers,
            checks=args.checks,
            on_progress=bar,
        )
    finally:
        bar.close()
    if fmt == "markdown":
        text = rp.to_markdown(rep, command=_command_line(args))
    elif fmt == "json":
        text = rp.to_json(rep)
    else:
        text = None
    if args.out:
        Path(args.out).write_text(text if text is not None else _table_text(rep), encoding="utf-8")
        n_bad = sum(not c.passed for m in rep.models for c in m.checks)
        print(f"wrote {args.out}: {len(rep.models)} models, {n_bad} failing checks")
    elif text is not None:
        sys.stdout.write(text)
    else:
        _print_tables(rep)
    return 0 if rep.passed else 1


def _print_tables(rep) -> None:
    from calc.validate import report as rp

    for m in rep.models:
        print(
            f"{m.model} on {m.device} ({m.dtype}): {'pass' if m.passed else 'FAIL'}, {m.seconds:.1f} s"
        )
        print_table([[c.check, *rp.check_row(c)] for c in m.checks], rp.HEADERS, indent=2)
        print()
    print("summary")
    print_table(
        [[r[0], r[1], r[2], r[3], r[4]] for r in rp.summary_rows(rep)],
        ["check", "comparisons", "failed", "max rel error", "max abs error"],
        indent=2,
    )
    print(f"\n{'all checks pass' if rep.passed else 'SOME CHECKS FAIL'}; tolerances:")
    for k, v in rep.tolerances.items():
        print(f"  {k}: {v}")


def _table_text(rep) -> str:
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        _print_tables(rep)
    return buf.getvalue()


__all__ = ["ProgressBar", "add_commands", "cmd_validate"]
