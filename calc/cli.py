"""The `kvcalc` command line: tables for people, `--json` for programs, one-line errors.

    kvcalc presets                               # every shipped model
    kvcalc show llama-3-70b                      # spec, sources, parameter breakdown
    kvcalc kv llama-3-70b --seq 8192             # KV-cache bytes (GB and GiB)
    kvcalc attention llama-3-70b --seq 8192      # QK^T + AV FLOPs, score-matrix bytes
    kvcalc compare llama-2-70b --seq 4096        # the same model as MHA / GQA / MQA
    kvcalc errata                                # the seed notes' numbers, recomputed

MODEL is a preset name or a path to a Hugging Face config.json (or a spec .toml). Bad input
prints one line, `kvcalc: error: <what is wrong>`, and exits 2; never a traceback (set
KVCALC_DEBUG=1 to see one).

This module is the parser, the entry point and the helpers every command shares; the built-in
commands are in calc.cli_commands (kv, attention, compare, errata, and the registration of all
six) and calc.cli_models (presets, show).

Extensions: each module named in `EXTENSIONS` has `add_commands(subparsers) -> None`, adding
subparsers whose `func(args) -> int` is run by `run_guarded`. They are imported only when the
command line asks for something that is not built in, so `kvcalc kv ...` stays fast; they must
not import torch at import time. Helpers for them: `add_command`, `add_model_arg`,
`add_size_args`, `int_at_least`, `dtype_arg`, `emit_json`, `print_table`, `print_pairs`, `wrap`,
`run_guarded`.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from collections.abc import Callable, Sequence

from calc.errors import format_error

PROG = "kvcalc"
# Modules that add subcommands (see the module docstring); e.g. "calc.validate.cli".
EXTENSIONS: tuple[str, ...] = ("calc.plan_cli", "calc.validate.cli", "calc.serving.cli")
BUILTIN_COMMANDS: tuple[str, ...] = ("presets", "show", "kv", "attention", "compare", "errata")


# --- shared helpers (also for extension modules) ----------------------------------------------


def fail(message: str) -> int:
    """Print `kvcalc: error: <message>` as one line on stderr; return the exit status 2."""
    print(f"{PROG}: error: {' '.join(str(message).split())}", file=sys.stderr)
    return 2


def emit_json(obj) -> None:
    """Print a pydantic model (its model_dump), or plain data, as indented JSON."""
    if hasattr(obj, "model_dump"):
        obj = obj.model_dump(mode="json")
    elif isinstance(obj, list):
        obj = [o.model_dump(mode="json") if hasattr(o, "model_dump") else o for o in obj]
    print(json.dumps(obj, indent=2))


def _is_number(cell: str) -> bool:
    head = cell.lstrip("-~")[:1]
    return head.isdigit()


def print_table(
    rows: Sequence[Sequence[object]],
    headers: Sequence[str] | None = None,
    indent: int = 0,
    align: str | None = None,
) -> None:
    """Aligned columns. `align` gives "l" or "r" per column; by default a column whose cells
    all start with a digit is right-aligned."""
    text = [[str(c) for c in r] for r in rows]
    head = [str(h) for h in headers] if headers else None
    all_rows = ([head] if head else []) + text
    if not all_rows:
        return
    ncol = max(len(r) for r in all_rows)
    for r in all_rows:
        r.extend([""] * (ncol - len(r)))
    widths = [max(len(r[i]) for r in all_rows) for i in range(ncol)]
    if align is None:
        right = [
            bool(text) and all(_is_number(r[i]) or not r[i] for r in text) for i in range(ncol)
        ]
    else:
        right = [i < len(align) and align[i] == "r" for i in range(ncol)]
    pad = " " * indent
    for k, r in enumerate(all_rows):
        cells = [
            c.rjust(w) if right[i] and not (head and k == 0) else c.ljust(w)
            for i, (c, w) in enumerate(zip(r, widths, strict=True))
        ]
        print(pad + "  ".join(cells).rstrip())
        if head and k == 0:
            print(pad + "  ".join("-" * w for w in widths))


def print_pairs(pairs: Sequence[tuple[str, object]], indent: int = 2) -> None:
    """`label   value` lines, labels padded to one width, values left as they are."""
    print_table([(k, v) for k, v in pairs], indent=indent, align="ll")


def wrap(text: str, indent: int = 2, width: int = 96) -> str:
    """Fill `text` to `width` columns, never splitting a number from its unit ("2.50 GiB")."""
    import re
    import textwrap

    nbsp = "\u00a0"
    glued = re.sub(r"(\d) (?=[A-Za-z%])", "\\1" + nbsp, " ".join(text.split()))
    pad = " " * indent
    return textwrap.fill(glued, width, initial_indent=pad, subsequent_indent=pad).replace(nbsp, " ")


def run_guarded(func: Callable[..., int | None], *args) -> int:
    """Run a command; any exception becomes one `kvcalc: error:` line and exit status 2."""
    try:
        rc = func(*args)
        sys.stdout.flush()
        return 0 if rc is None else int(rc)
    except KeyboardInterrupt:
        fail("interrupted")
        return 130
    except BrokenPipeError:  # `kvcalc presets | head -1`: the reader left; not an error
        _silence_stdout()
        return 0
    except Exception as exc:
        if os.environ.get("KVCALC_DEBUG"):
            raise
        return fail(_describe(exc))


def _describe(exc: BaseException) -> str:
    text = format_error(exc)
    if isinstance(exc, ValueError | OSError | LookupError):  # expected: bad input
        return text
    return f"{type(exc).__name__}: {text}"  # a bug, but still one line


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


# --- argument types ---------------------------------------------------------------------------


def int_at_least(lo: int) -> Callable[[str], int]:
    """An argparse type: an integer >= lo, with an error naming the bound and the value."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < lo:
            raise argparse.ArgumentTypeError(f"must be an integer >= {lo}: got {text!r}")
        return value

    return parse


def dtype_arg(text: str) -> str:
    from calc.dtypes import canonical_dtype

    try:
        return canonical_dtype(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e).removeprefix("'dtype' ")) from None


class _Parser(argparse.ArgumentParser):
    """argparse whose usage errors are one line, `kvcalc: error: <command>: <message>`."""

    def error(self, message: str):  # type: ignore[override]
        where = self.prog.removeprefix(PROG).strip()
        hint = f" (see `{self.prog} -h`)"
        self.exit(2, f"{PROG}: error: {where + ': ' if where else ''}{message}{hint}\n")


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
        type=int_at_least(0),
        required=seq_required,
        metavar="N",
        help="tokens per sequence" + ("" if seq_required else " (default: the model's context)"),
    )
    p.add_argument(
        "--batch", type=int_at_least(1), default=1, metavar="B", help="sequences (default 1)"
    )
    p.add_argument(
        "--dtype",
        type=dtype_arg,
        default="bf16",
        metavar="D",
        help="fp32, fp16, bf16, fp8, int8, int4 (default bf16)",
    )


# --- parser and entry point -------------------------------------------------------------------


def build_parser(extensions: bool = True) -> argparse.ArgumentParser:
    # calc.cli_commands imports calc.cli, so it is imported here rather than at the top
    from calc import __version__
    from calc.cli_commands import add_commands as add_builtin_commands

    parser = _Parser(
        prog=PROG,
        description="Exact transformer parameter counts, attention cost and KV-cache sizes.",
    )
    parser.add_argument("--json", action="store_true", help="print results as JSON")
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    add_builtin_commands(sub)
    if extensions:
        for name in EXTENSIONS:
            importlib.import_module(name).add_commands(sub)
    return parser


def _first_command(argv: Sequence[str]) -> str | None:
    return next((a for a in argv if not a.startswith("-")), None)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of `kvcalc` and `python -m calc`; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        parser = build_parser(extensions=_first_command(argv) not in BUILTIN_COMMANDS)
        args = parser.parse_args(argv)
    except SystemExit as e:  # argparse: -h / --version (0) or a usage error (2)
        return e.code if isinstance(e.code, int) else (0 if e.code is None else fail(e.code))
    except Exception as exc:  # a broken extension module: still one line
        if os.environ.get("KVCALC_DEBUG"):
            raise
        return fail(_describe(exc))
    return run_guarded(args.func, args)
