"""One-line error messages for people: the field, the constraint and the value.

The CLI prints `format_error(exc)` and exits 2; the dashboard shows it in `st.error`.
"""

from __future__ import annotations

import operator

from pydantic import ValidationError

from calc.limits import check_limit, fmt_int


def format_error(exc: BaseException) -> str:
    """A single line naming what is wrong; never a traceback."""
    if isinstance(exc, ValidationError):
        parts = []
        for err in exc.errors(include_url=False):
            loc = ".".join(str(p) for p in err.get("loc", ()))
            msg = str(err.get("msg", "")).removeprefix("Value error, ")
            if loc and msg.startswith(f"'{loc}' "):  # the message names the field and value
                parts.append(msg)
            elif loc:
                parts.append(
                    f"'{loc}' {msg[0].lower() + msg[1:] if msg else msg}: "
                    f"got {show_value(err.get('input'))}"
                )
            else:
                parts.append(msg)
        return "; ".join(parts)
    text = str(exc) or type(exc).__name__
    return " ".join(text.split())  # one line


def show_value(value: object, width: int = 80) -> str:
    """`repr(value)` for an error message, at most `width` characters (a hostile file's 1 MB
    string or 5,000-digit number is cut, not printed).

    >>> show_value("x" * 100)
    "'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx… (102 characters)"
    """
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**21:
        return fmt_int(value)
    text = repr(value)
    return text if len(text) <= width else f"{text[: width - 2]}… ({len(text):,} characters)"


def check_count(name: str, value: int, allow_zero: bool = False) -> int:
    """`value` as a Python int, or a ValueError naming the field, the bound and the value.

    numpy integers are accepted and converted (so later products cannot overflow int64);
    bools, floats and strings are refused, even where Python would coerce them (True == 1).
    Names with an upper bound in calc.limits (seq_len, batch, gpus, ...) are held to it.

    >>> check_count("batch", 0)
    Traceback (most recent call last):
    ...
    ValueError: 'batch' must be an integer > 0: got 0
    """
    n = None
    if not isinstance(value, bool) and type(value).__name__ != "bool_":  # numpy.bool_ too
        try:
            n = operator.index(value)  # int and numpy integer types only
        except TypeError:
            n = None
    if n is None or (n < 0 if allow_zero else n <= 0):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"'{name}' must be an integer {bound}: got {value!r}")
    return check_limit(name, n)  # the upper bounds of calc.limits, where `name` has one


def check_fraction(name: str, value: float) -> float:
    """`value` as a float in (0, 1] (a utilization or an efficiency), or a ValueError.

    >>> check_fraction("mfu", 1.5)
    Traceback (most recent call last):
    ...
    ValueError: 'mfu' must be in (0, 1]: got 1.5
    """
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 1:
        raise ValueError(f"'{name}' must be in (0, 1]: got {value!r}")
    return float(value)


def check_non_negative(name: str, value: float) -> float:
    """float(value) when it is >= 0 (NaN is not), else a ValueError naming the field."""
    x = float(value)
    if not x >= 0:
        raise ValueError(f"'{name}' must be >= 0: got {value!r}")
    return x
