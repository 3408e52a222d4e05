"""Number formats and their sizes, in bits so that int4 stays exact.

>>> nbytes(1001, "int4")   # 1001 half-bytes round up to whole bytes
501
"""

from __future__ import annotations

from functools import lru_cache

from calc.errors import check_count

# Bits per element. fp8 comes in two encodings (e4m3 for weights/activations, e5m2 for
# gradients); both are one byte, so they cost the same here.
DTYPE_BITS: dict[str, int] = {
    "fp32": 32,
    "fp16": 16,
    "bf16": 16,
    "fp8": 8,
    "fp8_e4m3": 8,
    "fp8_e5m2": 8,
    "int8": 8,
    "int4": 4,
}
DTYPES: tuple[str, ...] = tuple(DTYPE_BITS)

_ALIASES = {
    "float32": "fp32",
    "float": "fp32",
    "float16": "fp16",
    "half": "fp16",
    "bfloat16": "bf16",
    "e4m3": "fp8_e4m3",
    "e5m2": "fp8_e5m2",
    "float8_e4m3fn": "fp8_e4m3",
    "float8_e5m2": "fp8_e5m2",
}


def canonical_dtype(dtype: str) -> str:
    """'bfloat16' -> 'bf16'; raises ValueError naming the choices on an unknown name."""
    if not isinstance(dtype, str):
        raise ValueError(f"'dtype' must be a string, one of {', '.join(DTYPES)}: got {dtype!r}")
    return _canonical(dtype)


@lru_cache(maxsize=256)  # a pure function of the name, read several times a plan
def _canonical(dtype: str) -> str:
    d = dtype.strip().lower()
    d = _ALIASES.get(d, d)
    if d not in DTYPE_BITS:
        raise ValueError(f"'dtype' must be one of {', '.join(DTYPES)}: got {dtype!r}")
    return d


def dtype_bits(dtype: str) -> int:
    return DTYPE_BITS[canonical_dtype(dtype)]


def nbytes(n_elements: int, dtype: str) -> int:
    """Bytes to store `n_elements` values, rounded up to whole bytes.

    Integer ceiling division: `ceil(n * bits / 8)` goes through a float and loses the exact
    value above 2**53 (nbytes(2**60 + 1, "int4") is 2**59 + 1, not 2**59).
    """
    n = check_count("n_elements", n_elements, allow_zero=True)
    return -(-n * dtype_bits(dtype) // 8)
