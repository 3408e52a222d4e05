"""Human formatting at the edges: bytes in GB *and* GiB, FLOP counts, parameter counts.

Everything in calc/ computes in raw units (bytes, FLOPs, parameters); only the CLI and the
dashboard turn them into text, here. Every string names its unit, and byte sizes give both
readings, because "GB" is ambiguous in the wild: GB = 10^9 bytes (SI), GiB = 2^30 bytes (IEC).

>>> fmt_bytes(2 * 80 * 64 * 128 * 2048 * 2)   # LLaMA 65B, 2048 tokens, fp16
'5,368,709,120 B = 5.37 GB = 5.00 GiB'
>>> fmt_params(70_553_706_496)
'70,553,706,496 (70.55B)'
"""

from __future__ import annotations

SI_BYTES: tuple[str, ...] = ("B", "kB", "MB", "GB", "TB", "PB", "EB", "ZB", "YB")  # powers of 1000
IEC_BYTES: tuple[str, ...] = (
    "B",
    "KiB",
    "MiB",
    "GiB",
    "TiB",
    "PiB",
    "EiB",
    "ZiB",
    "YiB",
)  # powers of 1024
SI_PREFIXES: tuple[str, ...] = ("", "k", "M", "G", "T", "P", "E", "Z", "Y")
COUNT_SUFFIXES: tuple[str, ...] = ("", "K", "M", "B", "T")  # LLM convention: 7B = 7e9 params


# --- plain numbers ----------------------------------------------------------------------------


def group(n: int | float) -> str:
    """Thousands separators: 5368709120 -> '5,368,709,120'; a non-integer float keeps 1 decimal."""
    if isinstance(n, float) and not n.is_integer():
        return f"{n:,.1f}"
    return f"{int(n):,}"


def _scaled(x: float, base: int, units: tuple[str, ...], digits: int) -> str:
    """x in the largest unit that keeps the mantissa >= 1, e.g. 5.37e9 -> '5.37 G'; past the
    largest unit, scientific notation in the base unit ('1.00e+30 B'), never a 20-digit
    mantissa."""
    i, v = 0, float(x)
    while abs(v) >= base and i < len(units) - 1:
        v /= base
        i += 1
    if abs(v) >= base:
        return f"{float(x):.{digits}e} {units[0]}".rstrip()
    if i == 0 and float(x).is_integer():
        return f"{int(x)} {units[0]}".rstrip()
    return f"{v:.{digits}f} {units[i]}".rstrip()


def plural(n: int, word: str, many: str | None = None) -> str:
    """'1 claim', '3 claims' (`many` for irregular plurals)."""
    return f"{n:,} {word if n == 1 else (many or word + 's')}"


def percent(fraction: float, digits: int = 2) -> str:
    """0.875 -> '87.50%'."""
    return f"{100 * fraction:.{digits}f}%"


# --- bytes ------------------------------------------------------------------------------------


def si_bytes(n: int | float, digits: int = 2) -> str:
    """Decimal units: 5368709120 -> '5.37 GB' (1 GB = 10^9 B)."""
    return _scaled(n, 1000, SI_BYTES, digits)


def iec_bytes(n: int | float, digits: int = 2) -> str:
    """Binary units: 5368709120 -> '5.00 GiB' (1 GiB = 2^30 B)."""
    return _scaled(n, 1024, IEC_BYTES, digits)


def fmt_bytes(n: int) -> str:
    """Exact bytes, then SI and IEC readings: '5,368,709,120 B = 5.37 GB = 5.00 GiB'.

    Below 1000 B only the exact figure is shown ('512 B').
    """
    if abs(n) < 1000:
        return f"{group(n)} B"
    return f"{group(n)} B = {si_bytes(n)} = {iec_bytes(n)}"


# --- FLOPs and parameters ---------------------------------------------------------------------


def si_flops(n: int | float, digits: int = 2) -> str:
    """A FLOP *count* with an SI prefix: 1.41e15 -> '1.41 PFLOPs' (rates are FLOP/s)."""
    return _scaled(n, 1000, tuple(f"{p}FLOPs" for p in SI_PREFIXES), digits)


def fmt_flops(n: int | float) -> str:
    """Exact count, then SI: '1,407,374,883,553,280 FLOPs = 1.41 PFLOPs'."""
    if abs(n) < 1000:
        return f"{group(n)} FLOPs"
    return f"{group(n)} FLOPs = {si_flops(n)}"


def human_count(n: int | float, digits: int = 2) -> str:
    """Parameter-style count: 70553706496 -> '70.55B', 124439808 -> '124.44M'."""
    return _scaled(n, 1000, COUNT_SUFFIXES, digits).replace(" ", "")


def fmt_params(n: int) -> str:
    """Exact parameters, then the short form: '70,553,706,496 (70.55B)'."""
    if abs(n) < 1000:
        return group(n)
    return f"{group(n)} ({human_count(n)})"


# --- time ---------------------------------------------------------------------------------------

_DURATIONS: tuple[tuple[float, str], ...] = (
    (60.0, "min"),
    (3600.0, "h"),
    (86400.0, "days"),
    (365.25 * 86400.0, "years"),  # Julian year
)


def fmt_duration(seconds: float) -> str:
    """A latency for people: ms below 1 s, then s, min, h, days, years.

    >>> fmt_duration(0.02835), fmt_duration(2.3256), fmt_duration(1_567_194_725.094)
    ('28.35 ms', '2.33 s', '49.66 years')
    """
    s = float(seconds)
    if s != s:
        return "n/a"
    if abs(s) < 1:
        return f"{s * 1e3:,.2f} ms"
    unit, value = "s", s
    for size, name in _DURATIONS:
        if abs(s) >= size:
            unit, value = name, s / size
    if abs(value) >= 1e6:
        return f"{value:.2e} {unit}"
    return f"{value:,.2f} {unit}"
