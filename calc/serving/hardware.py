"""Accelerators: one frozen, validated description per GPU, loaded from presets/hardware/*.toml.

Figures are stored as the datasheet publishes them and converted here, in code:
- memory: `memory_size` in `memory_unit`. Vendors print "80GB", but the parts hold binary
  gigabytes (an A100 80GB shows 81920 MiB = 80 GiB in nvidia-smi), so presets say "GiB" where
  the device's own total shows it. `driver_total_mib` is nvidia-smi's "Total" where a public log
  shows it (a little below the nominal size: the driver keeps some; GDDR cards with ECC on keep
  1/16 more). `cuda_total_gib` is what CUDA reports as the device total to a process
  (torch.cuda.mem_get_info()[1]: vLLM logs it as total_gpu_memory, torch's out-of-memory error
  as "total capacity"), lower again by the memory the driver reserves (nvidia-smi -q lists it
  as "Reserved"): an H100 80GB HBM3 shows 81559 MiB = 79.65 GiB in nvidia-smi and 79.19 GiB to
  CUDA. Plans use the first of CUDA's total, nvidia-smi's, the nominal size that is known;
  SGLang's default rules use nvidia-smi's (`driver_total_bytes`), as SGLang reads it.
- peak TFLOP/s per dtype: the published figure. NVIDIA's datasheets often print tensor-core
  rates "with sparsity" (2:4 structured sparsity doubles the math rate); such dtypes are listed
  in `peak_tflops_sparse` and halved here, because dense inference cannot use sparsity.
- bandwidths: decimal GB/s as published (1 GB/s = 10^9 B/s). Interconnect figures are usually
  both directions added ("NVLink 900GB/s" = 450 GB/s each way); `interconnect_bidirectional`
  says so and `interconnect_bytes_per_s` is one direction, what a ring all-reduce step uses.

>>> h = load_hardware("h100-sxm")
>>> h.peak_flops_per_s("bf16") / 1e12   # datasheet: 1,979 TFLOPS "with sparsity"
989.5
>>> h.memory_bytes == 80 * 2**30
True
"""

from __future__ import annotations

import datetime as _dt
import functools
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from calc import datafiles

# Datatypes a datasheet may list a peak for. tf32 is a tensor-core input format (fp32 range,
# 10-bit mantissa), not a storage dtype, so it is not in calc.dtypes.
PEAK_DTYPES: tuple[str, ...] = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4")
_PEAK_ALIASES = {"fp8_e4m3": "fp8", "fp8_e5m2": "fp8", "float8_e4m3fn": "fp8", "bfloat16": "bf16"}
SPARSITY_SPEEDUP = 2  # 2:4 structured sparsity: half the products are skipped (A100 whitepaper)

PeakDtype = Literal["fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4"]


class HardwareSpec(BaseModel):
    """One accelerator: memory, HBM bandwidth, dense peak math rates, interconnect."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # --- metadata -----------------------------------------------------------------------------
    name: str = Field(min_length=1)
    display_name: str | None = None
    vendor: str = "custom"
    source: tuple[str, ...] = ()  # datasheet URL(s), then the logs the driver totals come from
    retrieved: _dt.date | None = None
    notes: str | None = None

    # --- memory -------------------------------------------------------------------------------
    memory_published: str | None = None  # verbatim: "80GB HBM3"
    memory_size: float = Field(gt=0)
    memory_unit: Literal["GB", "GiB"]  # what `memory_size` means in bytes (see module docstring)
    driver_total_mib: int | None = Field(default=None, gt=0)  # nvidia-smi "Total", if published
    cuda_total_gib: float | None = Field(default=None, gt=0)  # CUDA's total, as a log prints it
    hbm_bandwidth_gb_per_s: float = Field(gt=0)  # decimal GB/s, as published

    # --- compute units (what start-up buffers are sized by) ---------------------------------
    multiprocessors: int | None = Field(default=None, gt=0)  # SMs (NVIDIA), as published
    compute_capability: str | None = Field(default=None, pattern=r"^\d+\.\d+$")  # "9.0"
    gfx_arch: str | None = Field(default=None, pattern=r"^gfx[0-9a-f]+$")  # AMD's LLVM target

    # --- math ---------------------------------------------------------------------------------
    peak_tflops: dict[PeakDtype, float]  # as published; int8 is TOPS
    peak_tflops_sparse: tuple[PeakDtype, ...] = ()  # entries published "with sparsity"

    # --- interconnect -------------------------------------------------------------------------
    interconnect: str = "PCIe"
    interconnect_gb_per_s: float = Field(gt=0)  # as published
    interconnect_bidirectional: bool = True  # the published figure adds both directions

    @model_validator(mode="after")
    def _check(self) -> HardwareSpec:
        if not self.peak_tflops:
            raise ValueError("'peak_tflops' must list at least one dtype: got an empty table")
        for dtype, tflops in self.peak_tflops.items():
            if not tflops > 0:
                raise ValueError(f"'peak_tflops.{dtype}' must be > 0: got {tflops!r}")
        if self.cuda_total_gib is not None and self.cuda_total_gib > self.cuda_total_most_gib:
            raise ValueError(
                f"'cuda_total_gib' must not exceed nvidia-smi's total "
                f"({self.driver_total_bytes / 2**30:.2f} GiB): got {self.cuda_total_gib!r}"
            )
        missing = [d for d in self.peak_tflops_sparse if d not in self.peak_tflops]
        if missing:
            raise ValueError(
                f"'peak_tflops_sparse' must name dtypes in peak_tflops "
                f"({', '.join(self.peak_tflops)}): got {', '.join(missing)}"
            )
        return self

    def __hash__(self) -> int:  # frozen, so a cache key; the peak table is a dict
        return hash(
            tuple(
                (k, tuple(sorted(v.items())) if isinstance(v, dict) else v)
                for k, v in self.__dict__.items()
            )
        )

    # --- derived ------------------------------------------------------------------------------
    @property
    def label(self) -> str:
        return self.display_name or self.name

    @property
    def memory_bytes(self) -> int:
        """Nominal capacity: memory_size x (10^9 for GB, 2^30 for GiB)."""
        return round(self.memory_size * (2**30 if self.memory_unit == "GiB" else 10**9))

    @property
    def driver_total_bytes(self) -> int:
        """nvidia-smi's total when published, else the nominal size."""
        if self.driver_total_mib is not None:
            return self.driver_total_mib * 2**20
        return self.memory_bytes

    @property
    def cuda_total_most_gib(self) -> float:
        """The most CUDA's total can be: the driver's, in GiB as a log prints it (2 decimals)."""
        return round(self.driver_total_bytes / 2**30, 2)

    @property
    def total_memory_bytes(self) -> int:
        """What a process can see: CUDA's total when published, else `driver_total_bytes`."""
        if self.cuda_total_gib is not None:
            return round(self.cuda_total_gib * 2**30)
        return self.driver_total_bytes

    @property
    def total_memory_source(self) -> str:
        if self.cuda_total_gib is not None:
            return "CUDA total"
        return "nvidia-smi total" if self.driver_total_mib is not None else "nominal"

    @property
    def hbm_bandwidth_bytes_per_s(self) -> float:
        return self.hbm_bandwidth_gb_per_s * 1e9

    @property
    def interconnect_bytes_per_s(self) -> float:
        """One direction, per GPU."""
        both = self.interconnect_gb_per_s * 1e9
        return both / 2 if self.interconnect_bidirectional else both

    def has_peak(self, dtype: str) -> bool:
        return _peak_key(dtype) in self.peak_tflops

    def peak_flops_per_s(self, dtype: str) -> float:
        """Dense peak FLOP/s (OP/s for int8) for matmuls in `dtype`."""
        key = _peak_key(dtype)
        if key not in self.peak_tflops:
            hint = ""
            if key == "bf16" and "fp16" in self.peak_tflops:  # Turing / Volta: no bf16 units
                hint = " (pass --weights fp16, as vLLM's --dtype half on such GPUs)"
            raise ValueError(
                f"'{self.name}' publishes no {key} peak: published "
                f"{', '.join(self.peak_tflops)}{hint}"
            )
        tflops = self.peak_tflops[key]
        if key in self.peak_tflops_sparse:
            tflops /= SPARSITY_SPEEDUP  # datasheet figure is "with sparsity"
        return tflops * 1e12

    def ridge_flops_per_byte(self, dtype: str) -> float:
        """Arithmetic intensity above which a kernel is compute-bound (roofline ridge point)."""
        return self.peak_flops_per_s(dtype) / self.hbm_bandwidth_bytes_per_s


def _peak_key(dtype: str) -> str:
    d = str(dtype).strip().lower()
    d = _PEAK_ALIASES.get(d, d)
    if d not in PEAK_DTYPES:
        raise ValueError(f"'dtype' must be one of {', '.join(PEAK_DTYPES)}: got {dtype!r}")
    return d


# --- presets ----------------------------------------------------------------------------------


@functools.cache
def _hardware_files() -> dict[str, object]:
    return datafiles.preset_files("hardware")


def list_hardware() -> list[str]:
    """Names of every shipped hardware preset, sorted."""
    return sorted(_hardware_files())


def closest_hardware(name: str, n: int = 3) -> list[str]:
    return datafiles.closest_names(name, list_hardware(), n)


@functools.cache
def load_hardware(name: str) -> HardwareSpec:
    """The preset called exactly `name` (e.g. "h100-sxm"); a miss lists the closest names."""
    files = _hardware_files()
    if name not in files:
        close = closest_hardware(name)
        hint = f"; closest: {', '.join(close)}" if close else ""
        raise ValueError(f"unknown GPU {name!r}{hint} (presets: {', '.join(list_hardware())})")
    return datafiles.load_named(files[name], name, "hardware", hardware_from_toml_text)


def hardware_from_toml_text(text: str, origin: str = "<toml>") -> HardwareSpec:
    """Parse a hardware spec from TOML text; errors name the origin, the field and the value."""
    return hardware_from_dict(datafiles.parse_toml(text, origin), origin)


def hardware_from_dict(data: object, origin: str = "<dict>") -> HardwareSpec:
    return datafiles.validate(HardwareSpec, data, origin, "hardware")


def cuda_capability(gpu: str | Path | dict | HardwareSpec) -> tuple[int, int] | None:
    """The CUDA compute capability the GPU's preset states (`compute_capability = "9.0"` ->
    (9, 0)), the one home of it for the engines' kernel choices; None where it states none
    (AMD Instinct parts, or a user's spec without it)."""
    cc = resolve_hardware(gpu).compute_capability
    if cc is None:
        return None
    major, minor = cc.split(".")
    return int(major), int(minor)


def nvidia_capability(hw: HardwareSpec) -> tuple[int, int] | None:
    """cuda_capability of an NVIDIA part; None for other vendors, whatever their spec states."""
    return cuda_capability(hw) if hw.vendor == "NVIDIA" else None


def resolve_hardware(gpu: str | Path | dict | HardwareSpec) -> HardwareSpec:
    """A preset name, a path to a .toml in the same schema, a dict, or a spec."""
    if isinstance(gpu, HardwareSpec):
        return gpu
    if isinstance(gpu, dict):
        return hardware_from_dict(gpu)
    text = str(gpu)
    if text in _hardware_files():
        return load_hardware(text)
    if text.endswith(".toml"):
        return hardware_from_toml_text(datafiles.read_text(text), origin=text)
    return load_hardware(text)  # raises with the closest names
