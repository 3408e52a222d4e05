"""Model presets: one TOML file per model under presets/models/, looked up by exact name
(ignoring case: "Llama-3-70B" is llama-3-70b).

Each file holds `ModelSpec` fields (HF config.json names) plus `source` URLs and the
`retrieved` date. A miss lists the closest names; it never guesses by substring.

>>> load_preset("llama-2-70b").num_key_value_heads
8
"""

from __future__ import annotations

import functools
from pathlib import Path

from calc import datafiles
from calc.spec import ModelSpec


@functools.cache
def _preset_files() -> dict[str, object]:
    return datafiles.preset_files("models")


def list_presets() -> list[str]:
    """Names of every shipped model preset, sorted."""
    return sorted(_preset_files())


def closest_presets(name: str, n: int = 3) -> list[str]:
    return datafiles.closest_names(name, list_presets(), n)


def preset_name(name: str) -> str | None:
    """The shipped preset called `name`, ignoring case, or None."""
    files = _preset_files()
    if name in files:
        return name
    folded = str(name).strip().casefold()
    return next((n for n in files if n.casefold() == folded), None)


@functools.cache
def load_preset(name: str) -> ModelSpec:
    """The preset called exactly `name`, ignoring case (e.g. "llama-3-70b")."""
    found = preset_name(name)
    if found is None:
        close = closest_presets(name)
        hint = f"; closest: {', '.join(close)}" if close else "; see `kvcalc presets`"
        raise ValueError(f"unknown preset {name!r}{hint}")
    if found != name:
        return load_preset(found)  # one cached spec per preset
    return datafiles.load_named(_preset_files()[name], name, "models", spec_from_toml_text)


def spec_from_toml_text(text: str, origin: str = "<toml>") -> ModelSpec:
    """Parse a spec from TOML text; errors name the origin, the field and the value."""
    return _validate(datafiles.parse_toml(text, origin), origin)


def _validate(data: object, origin: str) -> ModelSpec:
    if isinstance(data, dict) and "quantization_config" in data:
        # the published checkpoint's config.json quantization_config, verbatim (gpt-oss: MXFP4
        # experts; DeepSeek-V3: fp8 blocks): read as calc.hf reads a config.json
        from calc.quant import parse_quantization_config

        data = dict(data)
        qc = data.pop("quantization_config")
        dtype = data.get("checkpoint_dtype") or "bf16"
        data["quantization"] = parse_quantization_config(
            qc, dtype=dtype, origin=f"{origin}: quantization_config"
        )
    return datafiles.validate(ModelSpec, data, origin, "spec")


def resolve_model(
    model: str | Path | ModelSpec | dict, *, origin: str | None = None, name: str | None = None
) -> ModelSpec:
    """A preset name, a path to a config.json (HF) or .toml (spec), a dict, or a spec.

    A dict's errors name `origin` (an uploaded file's name; default "<dict>"); `name` names a
    spec built from a Hugging Face config dict (calc.hf.from_hf_config)."""
    if isinstance(model, ModelSpec):
        return model
    if isinstance(model, dict):
        from calc.hf import from_hf_config

        if "model_type" in model:
            return from_hf_config(model, name=name, origin=origin)
        return _validate(model, origin or "<dict>")
    text = str(model)
    found = preset_name(text)
    if found is not None:
        return load_preset(found)
    path = Path(text)
    if path.is_dir():
        datafiles.read_text(path)  # raises: "'x' is a directory, not a file: pass 'x/config.json'"
    if text.endswith((".json", ".toml")) or path.is_file():
        if text.endswith(".toml"):
            return spec_from_toml_text(datafiles.read_text(text), origin=text)
        from calc.hf import from_hf_config

        return from_hf_config(text)
    if "/" in text or "\\" in text:  # a path, not a name: say so rather than "unknown preset"
        raise ValueError(f"no such file: {text!r} (MODEL is a preset name or a file)")
    return load_preset(text)  # raises with the closest names
