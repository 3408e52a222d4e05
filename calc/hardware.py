"""Accelerator presets: moved to calc.serving.hardware; this module re-exports it unchanged."""

from calc.serving.hardware import (  # noqa: F401
    PEAK_DTYPES,
    SPARSITY_SPEEDUP,
    HardwareSpec,
    PeakDtype,
    closest_hardware,
    hardware_from_dict,
    hardware_from_toml_text,
    list_hardware,
    load_hardware,
    resolve_hardware,
)

__all__ = [
    "PEAK_DTYPES",
    "SPARSITY_SPEEDUP",
    "HardwareSpec",
    "PeakDtype",
    "closest_hardware",
    "hardware_from_dict",
    "hardware_from_toml_text",
    "list_hardware",
    "load_hardware",
    "resolve_hardware",
]
