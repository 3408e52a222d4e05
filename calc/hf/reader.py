"""A config.json dict whose getters name the file, the key and the bad value."""

from __future__ import annotations

from typing import Any

_REQUIRED = object()


class _Config:
    """A config.json dict whose getters name the file, the key and the bad value."""

    def __init__(self, data: dict, origin: str, model_type: str):
        self.data, self.origin, self.model_type = data, origin, model_type

    def has(self, key: str) -> bool:
        return key in self.data

    def _get(self, keys: tuple[str, ...], default: Any) -> tuple[str | None, Any]:
        """(key found, its value), or (None, default) when every alias is absent."""
        for key in keys:  # the HF name first, then older aliases (n_head, n_layer, ...)
            if key in self.data:
                return key, self.data[key]
        if default is _REQUIRED:
            raise ValueError(
                f"{self.origin}: missing required key '{keys[0]}' for model_type "
                f"{self.model_type!r}"
            )
        return None, default

    def int(
        self, *keys: str, default: Any = _REQUIRED, nullable: bool = False, low: int = 1
    ) -> int | None:
        key, value = self._get(keys, default)
        if key is None or (value is None and nullable):
            return value
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            what = "a positive integer" if low == 1 else f"an integer >= {low}"
            raise ValueError(f"{self.origin}: '{key}' must be {what}: got {value!r}")
        return value

    def bool(self, key: str, default: bool) -> bool:
        found, value = self._get((key,), default)
        if found is not None and not isinstance(value, bool):
            raise ValueError(f"{self.origin}: '{key}' must be true or false: got {value!r}")
        return value

    def str(self, *keys: str, default: str) -> str:
        key, value = self._get(keys, default)
        return value if isinstance(value, str) else default  # informational only

    def fail(self, key: str, message: str) -> ValueError:
        return ValueError(f"{self.origin}: '{key}' {message}: got {self.data.get(key)!r}")
