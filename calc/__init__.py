"""kvcalc: exact parameter counts, attention cost, KV-cache bytes and capacity plans.

Pure functions of a frozen `ModelSpec`. Imports neither torch nor pandas (both are loaded
lazily, by `calc.validate` and by `to_frame()` / `sweep()`).

>>> import calc
>>> spec = calc.load_preset("llama-2-70b")
>>> calc.kv_cache_bytes(spec, 4096, dtype="bf16")   # 2 * 80 layers * 8 KV heads * 128 * 4096 * 2 B
1342177280
"""

from calc.attention import (
    attention_flops_decode,
    attention_flops_prefill,
    attention_pairs,
    forward_flops_decode,
    forward_flops_prefill,
    fused_attention_bytes,
    score_matrix_bytes,
    training_flops_per_token,
)
from calc.capacity import MemoryPlan, memory_plan
from calc.dtypes import DTYPES, canonical_dtype, nbytes
from calc.errors import format_error
from calc.fit import FitResult, FitTable, fewest_gpus, fit_table
from calc.hardware import HardwareSpec, list_hardware, load_hardware, resolve_hardware
from calc.kvcache import (
    kv_bytes_per_token,
    kv_bytes_per_token_per_layer,
    kv_cache_bytes,
    kv_cache_group_bytes,
    kv_cache_layer_bytes,
    state_bytes_per_sequence,
)
from calc.layout import LayerGroup
from calc.params import (
    COMPONENTS,
    Linear,
    active_param_count,
    layer_breakdown,
    linear_layers,
    matmul_params,
    non_embedding_param_count,
    param_breakdown,
    param_count,
)

# eager, not lazy: the submodules calc.plan and calc.roofline would otherwise shadow the functions
from calc.plan import Plan, plan
from calc.presets import list_presets, load_preset, resolve_model
from calc.reports import attention_cost, compare_attention, kv_cache, params_report
from calc.results import (
    AttentionComparison,
    AttentionReport,
    AttentionVariant,
    KVCacheReport,
    ParamReport,
)
from calc.roofline import PhaseCost, Roofline, roofline
from calc.spec import ModelSpec
from calc.sweep import sweep

__version__ = "0.1.0"

# Less central parts load on first use (PEP 562), so `import calc` stays fast:
# name -> module that defines it.
_LAZY = {
    **dict.fromkeys(["from_hf_config", "to_hf_config"], "calc.hf"),
    **dict.fromkeys(["ErrataReport", "Erratum", "check_errata"], "calc.errata"),
    **dict.fromkeys(["fmt_bytes", "fmt_flops", "fmt_params"], "calc.units"),
    "sweep_plans": "calc.plan_sweep",
    # issue 11: what a (quantized) checkpoint stores
    **dict.fromkeys(["weight_bytes", "weight_bytes_breakdown"], "calc.quant.weights"),
}


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'calc' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    *_LAZY,
    "FitResult",
    "FitTable",
    "HardwareSpec",
    "MemoryPlan",
    "PhaseCost",
    "Plan",
    "Roofline",
    "fewest_gpus",
    "fit_table",
    "list_hardware",
    "load_hardware",
    "memory_plan",
    "plan",
    "resolve_hardware",
    "roofline",
    "COMPONENTS",
    "DTYPES",
    "AttentionComparison",
    "AttentionReport",
    "AttentionVariant",
    "KVCacheReport",
    "ModelSpec",
    "ParamReport",
    "active_param_count",
    "attention_cost",
    "attention_flops_decode",
    "attention_flops_prefill",
    "attention_pairs",
    "canonical_dtype",
    "compare_attention",
    "format_error",
    "forward_flops_decode",
    "forward_flops_prefill",
    "fused_attention_bytes",
    "kv_bytes_per_token",
    "kv_bytes_per_token_per_layer",
    "kv_cache",
    "kv_cache_bytes",
    "kv_cache_layer_bytes",
    "kv_cache_group_bytes",
    "state_bytes_per_sequence",
    "LayerGroup",
    "Linear",
    "layer_breakdown",
    "linear_layers",
    "list_presets",
    "load_preset",
    "matmul_params",
    "nbytes",
    "non_embedding_param_count",
    "param_breakdown",
    "param_count",
    "params_report",
    "resolve_model",
    "score_matrix_bytes",
    "sweep",
    "training_flops_per_token",
]
