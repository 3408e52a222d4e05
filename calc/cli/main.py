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

This module is the parser and the entry point, and registers the built-in commands of
calc.cli.commands (kv, attention, compare, errata) and calc.cli.models (presets, show). Imports
go one way: this module imports the command modules; they import calc.cli.output and
calc.cli.args, never this module (tests/test_cli_package.py checks it).

Extensions: each module named in `EXTENSIONS` has `add_commands(subparsers) -> None`, adding
subparsers whose `func(args) -> int` is run by `run_guarded`. They are imported only when the
command line asks for something that is not built in, so `kvcalc kv ...` stays fast; they must
not import torch at import time. Helpers for them: in calc.cli.args `add_command`,
`add_model_arg`, `add_size_args`, `int_at_least`, `dtype_arg`; in calc.cli.output `emit_json`,
`print_table`, `print_pairs`, `wrap`, `note`, `context_note`, `fail`, `run_guarded`.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from calc.cli.args import add_command, add_model_arg, add_size_args, int_at_least
from calc.cli.commands import cmd_attention, cmd_compare, cmd_errata, cmd_kv
from calc.cli.models import cmd_presets, cmd_show
from calc.cli.output import PROG, describe, fail, run_guarded

# Modules that add subcommands (see the module docstring), in the order `kvcalc -h` lists them.
EXTENSIONS: tuple[str, ...] = (
    "calc.cli.plan",
    "calc.cli.fit",
    "calc.validate.cli",
    "calc.serving.cli",
)
BUILTIN_COMMANDS: tuple[str, ...] = ("presets", "show", "kv", "attention", "compare", "errata")


class _Parser(argparse.ArgumentParser):
    """argparse whose usage errors are one line, `kvcalc: error: <command>: <message>`."""

    def error(self, message: str):  # type: ignore[override]
        where = self.prog.removeprefix(PROG).strip()
        hint = f" (see `{self.prog} -h`)"
        self.exit(2, f"{PROG}: error: {where + ': ' if where else ''}{message}{hint}\n")


def add_builtin_commands(sub) -> None:
    """Add every built-in command to `sub` (argparse subparsers)."""
    add_command(sub, "presets", cmd_presets, "list the model presets")
    add_model_arg(add_command(sub, "show", cmd_show, "spec, sources and parameter breakdown"))
    p = add_command(sub, "kv", cmd_kv, "KV-cache bytes for a batch of sequences")
    add_model_arg(p)
    add_size_args(p)
    p.add_argument(
        "--block-size",
        type=int_at_least(1, "block_size"),
        metavar="K",
        help="paged cache: round each sequence's tokens up to whole blocks of K",
    )
    p.add_argument(
        "--window-tokens",
        choices=("window", "window-1"),
        default="window",
        help="tokens a sliding layer keeps: window (vLLM) or window-1 (transformers)",
    )
    p = add_command(sub, "attention", cmd_attention, "attention FLOPs and score-matrix memory")
    add_model_arg(p)
    add_size_args(p)
    p = add_command(sub, "compare", cmd_compare, "the model as MHA, GQA and MQA")
    add_model_arg(p)
    add_size_args(p, seq_required=False)
    add_command(sub, "errata", cmd_errata, "the seed notes' numbers, recomputed")


def build_parser(extensions: bool = True) -> argparse.ArgumentParser:
    from calc import __version__

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
        return fail(describe(exc))
    return run_guarded(args.func, args)
