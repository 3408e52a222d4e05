"""What every `kvcalc` command prints: tables, `label value` pairs, JSON, wrapped prose, and the
one-line notes and errors on stderr; `run_guarded` turns any exception into such a line.

This module imports no command module and not calc.cli.main, so every command module (and the
extension modules, calc.validate.cli and calc.serving.cli) can import it.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Sequence

from calc.errors import format_error

PROG = "kvcalc"


def fail(message: str) -> int:
    """Print `kvcalc: error: <message>` as one line on stderr; return the exit status 2."""
    print(f"{PROG}: error: {' '.join(str(message).split())}", file=sys.stderr)
    return 2


def note(message: str) -> None:
    """`kvcalc: note: <message>` on stderr: a choice made for the user, said once."""
    print(f"{PROG}: note: {' '.join(str(message).split())}", file=sys.stderr)


def context_note(spec, seq_len: int | None) -> None:
    """A note when `seq_len` runs past the model's own context (max_position_embeddings)."""
    if seq_len is not None and seq_len > spec.max_position_embeddings:
        note(
            f"{seq_len:,} tokens is beyond {spec.label}'s context of "
            f"{spec.max_position_embeddings:,} tokens; the figures assume it could run that long"
        )


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
        return fail(describe(exc))


def describe(exc: BaseException) -> str:
    """An exception as the text of one error line: bad input as it is, a bug with its type."""
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
