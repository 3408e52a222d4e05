"""Fields: a quantization_config dict whose getters name the key, the rule and the bad value in
every error (read by calc/quant/parse.py and parse_ct.py)."""

from __future__ import annotations

from typing import Any

DEFAULT_SKIP = ("lm_head",)  # transformers' default skip list when a config gives none


class Fields:
    """A quantization_config dict whose getters name the key and the bad value."""

    def __init__(self, data: dict, origin: str):
        self.data, self.origin = data, origin

    def fail(self, key: str, rule: str, value: Any = None) -> ValueError:
        value = self.data.get(key) if value is None else value
        return ValueError(f"{self.origin}: '{key}' {rule}: got {value!r}")

    def get(self, *keys: str, default: Any = None) -> tuple[str, Any]:
        for key in keys:
            if key in self.data and self.data[key] is not None:
                return key, self.data[key]
        return keys[0], default

    def bool(self, *keys: str, default: bool) -> bool:
        key, value = self.get(*keys, default=default)
        if not isinstance(value, bool):
            raise self.fail(key, "must be true or false", value)
        return value

    def int(self, *keys: str, default: Any = None, choices: tuple | None = None) -> Any:
        key, value = self.get(*keys, default=default)
        if value is None:
            return None
        if not isinstance(value, int) or isinstance(value, bool):
            raise self.fail(key, "must be an integer", value)
        if choices is not None and value not in choices:
            raise self.fail(key, f"must be one of {', '.join(map(str, choices))}", value)
        return value

    def group(self, *keys: str, default: int | None = 128) -> int | None:
        """A group size: a positive integer, or -1 / None for one group per row."""
        key, value = self.get(*keys, default=default)
        if value is None or value == -1:
            return None
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise self.fail(key, "must be a positive integer or -1 (one group per row)", value)
        return value

    def names(self, *keys: str) -> tuple[str, ...]:
        key, value = self.get(*keys, default=[])
        if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
            raise self.fail(key, "must be a list of module names", value)
        return tuple(value)

    def skips(self, *keys: str) -> tuple[str, ...]:
        """A skip list; absent or null: transformers' default, the output embedding
        (quantizers/base.py get_modules_to_not_convert -> get_keys_to_not_convert)."""
        if all(self.data.get(k) is None for k in keys):
            return DEFAULT_SKIP
        return self.names(*keys)

    def choice(self, key: str, choices: tuple, default: Any) -> Any:
        _, value = self.get(key, default=default)
        if isinstance(value, str):
            value = value.lower()
        if value not in choices:
            raise self.fail(key, f"must be one of {', '.join(map(str, choices))}", value)
        return value
