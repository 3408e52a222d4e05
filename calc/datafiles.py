"""Data files: the shipped TOML presets, and the TOML / JSON files people pass in, read with a
size cap, parsed and validated, every error one line that names the file.

Shared by calc.presets (models), calc.hardware (GPUs), calc.hf (config.json), calc.validate.report
(validation reports) and the dashboard's uploads. Nothing here is executed: TOML and JSON only.

>>> parse_json_object('{"hidden_size": 8192}', origin="config.json")
{'hidden_size': 8192}
>>> parse_json_object("[1, 2]", origin="config.json")
Traceback (most recent call last):
...
ValueError: config.json: expected a JSON object: got list
"""

from __future__ import annotations

import difflib
import json
import re
import tomllib
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from calc.errors import format_error

MAX_FILE_BYTES = 1_000_000  # presets and configs are a few KB; refuse anything huge
# a config.json nests 2-4 levels (rope_scaling, quantization_config, text_config); Python's
# json and tomllib recurse per level, so a 10,000-deep file would exhaust the stack
MAX_NESTING = 64

M = TypeVar("M", bound=BaseModel)


# --- reading ----------------------------------------------------------------------------------


def _check_size(origin: str, size: int, max_bytes: int) -> None:
    if size > max_bytes:
        raise ValueError(f"{origin}: file must be at most {max_bytes} bytes: got {size}")


_BOMS = (  # byte-order marks of the encodings a JSON/TOML file must not be in (RFC 8259 §8.1)
    (b"\x00\x00\xfe\xff", "UTF-32"),
    (b"\xff\xfe\x00\x00", "UTF-32"),
    (b"\xfe\xff", "UTF-16"),
    (b"\xff\xfe", "UTF-16"),
)


def decode_text(content: bytes, origin: str, max_bytes: int = MAX_FILE_BYTES) -> str:
    """UTF-8 text of `content` (an upload, a file's bytes), at most `max_bytes` long. A UTF-8
    byte-order mark is dropped; UTF-16 / UTF-32 text is refused, saying so."""
    _check_size(origin, len(content), max_bytes)
    wide = next((enc for bom, enc in _BOMS if content.startswith(bom)), None)
    if wide is None and b"\x00" in content[:1000]:  # ASCII text saved as UTF-16, without a BOM
        wide = "UTF-16 or UTF-32"
    if wide:
        raise ValueError(
            f"{origin}: file is not UTF-8 text: it is {wide}; save it as UTF-8 "
            "(JSON and TOML files must be UTF-8)"
        )
    try:
        return content.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as e:
        raise ValueError(f"{origin}: file is not UTF-8 text (byte {e.start:,})") from None


def read_text(path: str | Path, max_bytes: int = MAX_FILE_BYTES, origin: str | None = None) -> str:
    """The file's UTF-8 text; its size is checked before it is read. Errors name `origin`
    (default: the path)."""
    p = Path(path)
    if p.is_dir():
        raise ValueError(f"{str(p)!r} is a directory, not a file" + _dir_hint(p))
    if not p.is_file():
        raise ValueError(f"no such file: {str(p)!r}")
    origin = str(p) if origin is None else origin
    _check_size(origin, p.stat().st_size, max_bytes)
    return decode_text(p.read_bytes(), origin, max_bytes)


def _dir_hint(p: Path) -> str:
    config = p / "config.json"
    return f": pass {str(config)!r}" if config.is_file() else ""


# --- parsing ----------------------------------------------------------------------------------


def check_nesting(text: str, origin: str, kind: str, max_depth: int = MAX_NESTING) -> None:
    """A ValueError naming the file when its brackets nest deeper than `max_depth` (strings
    are skipped; a malformed file is left to the parser to describe)."""
    if text.count("[") + text.count("{") <= max_depth:
        return  # the common case: too few brackets to nest that deep
    depth = 0
    for m in _BRACKETS.finditer(text):
        c = m.group()
        if c in "[{":
            depth += 1
            if depth > max_depth:
                line = text.count("\n", 0, m.start()) + 1
                raise ValueError(
                    f"{origin}: {kind} nested more than {max_depth} levels deep (line {line}): "
                    f"a config file nests a few levels"
                )
        elif c in "]}":
            depth = max(0, depth - 1)


# a JSON/TOML string (skipped whole), or one bracket
_BRACKETS = re.compile(r'"(?:[^"\\\n]|\\.)*"' + r"|'[^'\n]*'|[\[\]{}]")


def parse_toml(text: str, origin: str, max_bytes: int = MAX_FILE_BYTES) -> dict:
    _check_size(origin, len(text.encode("utf-8")), max_bytes)
    check_nesting(text, origin, "TOML")
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ValueError(f"{origin}: malformed TOML: {e}") from None
    except RecursionError:  # pragma: no cover - check_nesting stops it first
        raise ValueError(f"{origin}: TOML nested too deeply") from None


def parse_json_object(text: str, origin: str, max_bytes: int = MAX_FILE_BYTES) -> dict:
    """A JSON object (dict) from `text`; errors name the origin and the position."""
    _check_size(origin, len(text.encode("utf-8")), max_bytes)
    check_nesting(text, origin, "JSON")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"{origin}: malformed JSON: {e}") from None
    except RecursionError:  # pragma: no cover - check_nesting stops it first
        raise ValueError(f"{origin}: JSON nested too deeply") from None
    if not isinstance(data, dict):
        raise ValueError(f"{origin}: expected a JSON object: got {type(data).__name__}")
    return data


def validate(cls: type[M], data: object, origin: str, what: str) -> M:
    """`cls.model_validate(data)`; errors name the origin, the field and the value."""
    if not isinstance(data, dict):
        raise ValueError(f"{origin}: expected a table of {what} fields: got {type(data).__name__}")
    try:
        return cls.model_validate(data)
    except ValidationError as e:
        raise ValueError(f"{origin}: {format_error(e)}") from None


# --- shipped presets: presets/<folder>/<name>.toml --------------------------------------------


def preset_files(folder: str) -> dict[str, object]:
    """name -> file of every preset in presets/<folder>/ (importlib.resources: works zipped)."""
    files = (resources.files("presets") / folder).iterdir()
    return {p.name.removesuffix(".toml"): p for p in files if p.name.endswith(".toml")}


def closest_names(name: str, names: list[str], n: int = 3) -> list[str]:
    """Up to `n` names like `name`, for a miss; exact lookup never guesses by substring."""
    return difflib.get_close_matches(str(name).lower(), names, n=n, cutoff=0.4)


def load_named(path, name: str, folder: str, parse: Callable[[str, str], M]) -> M:
    """`parse(text, origin)` of a preset file, whose 'name' must equal its file name."""
    origin = f"presets/{folder}/{path.name}"
    obj = parse(path.read_text(encoding="utf-8"), origin)
    if obj.name != name:
        raise ValueError(f"{origin}: 'name' must equal the file name {name!r}: got {obj.name!r}")
    return obj
