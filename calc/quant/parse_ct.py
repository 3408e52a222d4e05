"""compressed-tensors `quantization_config` (llm-compressor, RedHatAI / neuralmagic checkpoints).

`config_groups` maps a group name to {targets, weights, input_activations, output_activations,
format}; `ignore` lists modules left dense (exact names or "re:" regexes); `format` is the
global compressor (pack-quantized, int-quantized, float-quantized, naive-quantized,
nvfp4-pack-quantized, mxfp4-pack-quantized, or mixed-precision with a format per group);
`kv_cache_scheme` adds k/v scales per attention layer. QuantizationArgs defaults follow
compressed_tensors/quantization/quant_args.py: num_bits 8, type int, symmetric, strategy from
group_size (> 0 group, -1 channel, else tensor), actorder true == "group" (stores weight_g_idx).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from calc.quant.config import KVCacheScheme, QuantConfig, QuantScheme, dtype_name

if TYPE_CHECKING:
    from calc.quant.fields import Fields

FORMATS = {  # compressor name -> layout of a quantized weight
    "pack-quantized": "ct-pack",
    "int-quantized": "ct-int",
    "float-quantized": "ct-float",
    "naive-quantized": None,  # int or float by the weights' type
    "nvfp4-pack-quantized": "ct-nvfp4",
    "mxfp4-pack-quantized": "ct-mxfp4",
}
STRATEGIES = ("tensor", "channel", "group", "block", "tensor_group", "token")


def _args(f: Fields, where: str, a: Any) -> dict:
    """Normalised QuantizationArgs: num_bits, type, symmetric, strategy, group_size, block,
    dynamic, actorder, scale_dtype."""
    if not isinstance(a, dict):
        raise f.fail(where, "must be a QuantizationArgs object", a)
    out = {
        "num_bits": a.get("num_bits", 8),
        "type": a.get("type", "int"),
        "symmetric": a.get("symmetric", True),
        "group_size": a.get("group_size"),
        "dynamic": a.get("dynamic", False),
    }
    if not isinstance(out["num_bits"], int) or not 1 <= out["num_bits"] <= 8:
        raise f.fail(f"{where}.num_bits", "must be an integer from 1 to 8", out["num_bits"])
    if out["type"] not in ("int", "float"):
        raise f.fail(f"{where}.type", "must be 'int' or 'float'", out["type"])
    if not isinstance(out["symmetric"], bool):
        raise f.fail(f"{where}.symmetric", "must be true or false", out["symmetric"])
    g = out["group_size"]
    strategy = a.get("strategy")
    if strategy is None:  # QuantizationArgs.validate_model_after
        strategy = "group" if (g or 0) > 0 else "channel" if g == -1 else "tensor"
    if strategy not in STRATEGIES:
        raise f.fail(f"{where}.strategy", f"must be one of {', '.join(STRATEGIES)}", strategy)
    if strategy in ("group", "tensor_group") and not (isinstance(g, int) and g > 0):
        raise f.fail(f"{where}.group_size", f"must be a positive integer for {strategy}", g)
    block = a.get("block_structure")
    if isinstance(block, str):  # older configs: "128x128"
        block = [int(x) for x in block.lower().split("x")] if "x" in block else None
    if strategy == "block" and not (isinstance(block, list) and len(block) == 2):
        raise f.fail(f"{where}.block_structure", "must be [rows, cols] for strategy block", block)
    order = a.get("actorder")
    if order not in (None, False, True, "group", "weight", "static", "dynamic"):
        raise f.fail(f"{where}.actorder", "must be null, 'group', 'weight' or 'static'", order)
    out |= {
        "strategy": strategy,
        "block": tuple(block) if strategy == "block" else None,
        "g_idx": order in (True, "group"),  # only GROUP order keeps an index (initialize.py)
        "scale_dtype": a.get("scale_dtype"),
        "zp_dtype": a.get("zp_dtype"),
    }
    return out


def _scheme(f: Fields, name: str, group: dict, fmt: str | None, dtype: str) -> QuantScheme:
    where = f"config_groups.{name}"
    w = group.get("weights")
    if w is None:
        raise f.fail(f"{where}.weights", "must be given (activation-only schemes store nothing)")
    w = _args(f, f"{where}.weights", w)
    fmt = group.get("format") or fmt
    if fmt not in FORMATS:
        raise f.fail("format", f"must be one of {', '.join(FORMATS)}", fmt)
    layout = FORMATS[fmt] or ("ct-float" if w["type"] == "float" else "ct-int")
    if layout == "ct-pack" and w["type"] != "int":
        raise f.fail(f"{where}.weights.type", "must be 'int' for pack-quantized", w["type"])
    if layout in ("ct-nvfp4", "ct-mxfp4") and w["num_bits"] != 4:
        raise f.fail(f"{where}.weights.num_bits", f"must be 4 for {fmt}", w["num_bits"])
    if layout == "ct-float" and w["num_bits"] != 8:
        raise f.fail(f"{where}.weights.num_bits", "must be 8 for float weights", w["num_bits"])
    if w["dynamic"] not in (False, "local") or w["strategy"] == "token":
        raise f.fail(f"{where}.weights.dynamic", "must be false for stored weights", w["dynamic"])
    fp4 = layout in ("ct-nvfp4", "ct-mxfp4")
    scale = w["scale_dtype"] or dtype  # initialize_qparams: the weight's own dtype
    scale = "fp8_e4m3" if layout == "ct-nvfp4" else "e8m0" if layout == "ct-mxfp4" else scale
    zp = w["zp_dtype"] or ("int8" if w["type"] == "int" else "fp8_e4m3")
    a = group.get("input_activations")
    inp, in_sym, in_global, in_bits = None, True, False, None
    if a is not None:
        a = _args(f, f"{where}.input_activations", a)
        in_bits, in_sym = a["num_bits"], a["symmetric"]  # (dynamic: no zero point stored)
        if a["strategy"] == "tensor_group":  # NVFP4 activations: fp32 global, local dynamic
            in_global = True
        elif a["dynamic"] is False:  # static: scales stored (dynamic: computed per token)
            inp = a["strategy"]
            if inp not in ("tensor", "channel"):
                raise f.fail(f"{where}.input_activations.strategy", "must be tensor or channel")
    if group.get("output_activations") is not None:
        raise f.fail(f"{where}.output_activations", "must be null (output scales not counted)")
    targets = group.get("targets", ["Linear"])
    if not isinstance(targets, list) or not all(isinstance(t, str) for t in targets):
        raise f.fail(f"{where}.targets", "must be a list of module names or classes", targets)
    return QuantScheme(
        layout=layout,
        bits=w["num_bits"],
        strategy="group" if fp4 else w["strategy"],
        group_size=w["group_size"] if not fp4 else (16 if layout == "ct-nvfp4" else 32),
        block_size=w["block"],
        symmetric=w["symmetric"],
        act_order=w["g_idx"],
        scale_dtype=dtype_name(scale, f"{where}.weights.scale_dtype"),
        zero_dtype=dtype_name(zp, f"{where}.weights.zp_dtype"),
        quant_type=w["type"],
        input_scale=inp,
        input_symmetric=in_sym,
        input_global_scale=in_global,
        input_bits=in_bits,
        targets=tuple(targets),
    )


def _kv(f: Fields, kv: Any, dtype: str) -> KVCacheScheme | None:
    if kv is None:
        return None
    if isinstance(kv, str):  # ModelOpt-exported configs say "FP8"
        return KVCacheScheme(layout="modelopt", scale_dtype="fp32")
    a = _args(f, "kv_cache_scheme", kv)
    if a["dynamic"] is not False:
        return None  # dynamic KV quantization stores no scales
    strategy = {"tensor": "tensor", "attn_head": "attn_head", "channel": "channel"}.get(
        a["strategy"], "group"
    )
    return KVCacheScheme(
        bits=a["num_bits"],
        type=a["type"],
        strategy=strategy,
        group_size=a["group_size"],
        symmetric=a["symmetric"],
        scale_dtype=dtype_name(a["scale_dtype"] or dtype, "kv_cache_scheme.scale_dtype"),
    )


def parse_compressed_tensors(f: Fields, dtype: str) -> QuantConfig:
    data = f.data
    if data.get("sparsity_config"):
        raise f.fail("sparsity_config", "must be empty (sparse compressors are not counted)")
    if data.get("transform_config"):
        raise f.fail("transform_config", "must be empty (stored transforms are not counted)")
    groups = data.get("config_groups")
    if not isinstance(groups, dict) or not groups:
        raise f.fail("config_groups", "must map group names to quantization schemes", groups)
    fmt = data.get("format")
    if fmt == "mixed-precision":
        fmt = None  # each group names its own
    schemes = tuple(_scheme(f, name, g, fmt, dtype) for name, g in groups.items())
    return QuantConfig(
        method="compressed-tensors",
        schemes=schemes,
        ignore=f.names("ignore"),
        ignore_style="compressed-tensors",
        dtype=dtype,
        kv_cache=_kv(f, data.get("kv_cache_scheme"), dtype),
        format=data.get("format"),
    )
