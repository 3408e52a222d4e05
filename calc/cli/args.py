"""Argument helpers every `kvcalc` command shares: `add_command` (a subcommand with `--json`),
`add_model_arg`, `add_size_args` (--seq / --batch / --dtype), and the argparse types
`int_at_least` and `dtype_arg`. Imports no command module and not calc.cli.main.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable


def int_at_least(lo: int, field: str | None = None) -> Callable[[str], int]:
    """An argparse type: an integer >= lo and, when `field` has one, <= its bound in
    calc.limits (the API's and the dashboard's bound too), with an error naming both."""
    from calc.limits import fmt_int, limit

    hi = limit(field) if field else None

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < lo:
            bound = f"from {lo} to {hi:,}" if hi else f">= {lo}"
            shown = text if len(text) <= 40 else f"{text[:37]}..."
            raise argparse.ArgumentTypeError(f"must be an integer {bound}: got {shown!r}")
        if hi is not None and value > hi:
            raise argparse.ArgumentTypeError(f"must be <= {hi:,}: got {fmt_int(value)}")
        return value

    return parse


def dtype_arg(text: str) -> str:
    from calc.dtypes import canonical_dtype

    try:
        return canonical_dtype(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e).removeprefix("'dtype' ")) from None


def kv_dtype_arg(text: str) -> str:
    """A KV-cache dtype: "auto" (an engine's default), vLLM's packed "nvfp4", or one dtype_arg
    reads."""
    word = text.strip().lower()
    return word if word in ("auto", "nvfp4") else dtype_arg(text)


def add_command(subparsers, name: str, func: Callable, help: str, **kwargs):
    """A subcommand with `--json` and `func`; returns its parser for more arguments."""
    p = subparsers.add_parser(name, help=help, description=help, **kwargs)
    p.add_argument(
        "--json",
        action="store_true",
        default=argparse.SUPPRESS,  # keeps a `kvcalc --json <command>` given before it
        help="print the result as JSON instead of a table",
    )
    p.set_defaults(func=func)
    return p


def add_model_arg(p) -> None:
    p.add_argument("model", metavar="MODEL", help="preset name, or path to a config.json")


def add_size_args(p, seq_required: bool = True) -> None:
    """--seq, --batch and --dtype, as `kv`, `attention` and `compare` take them."""
    p.add_argument(
        "--seq",
        type=int_at_least(0, "seq_len"),
        required=seq_required,
        metavar="N",
        help="tokens per sequence" + ("" if seq_required else " (default: the model's context)"),
    )
    p.add_argument(
        "--batch",
        type=int_at_least(1, "batch"),
        default=1,
        metavar="B",
        help="sequences (default 1)",
    )
    p.add_argument(
        "--dtype",
        type=dtype_arg,
        default="bf16",
        metavar="D",
        help="fp32, fp16, bf16, fp8, int8, int4 (default bf16)",
    )
