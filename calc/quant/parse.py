"""config.json `quantization_config` -> QuantConfig, for the methods kvcalc knows.

Every key that changes what is stored is read (bits, group size, symmetry, activation order,
block size, scale format, static activation scales, skipped modules, KV-cache scales) or refused
by name when kvcalc cannot count it (a Marlin-repacked GPTQ checkpoint, AWQ without zero points,
fp8 embeddings via `modules_to_convert` ...). Keys that change no stored byte (damp_percent,
calibration settings, kernel backends, compute dtypes) are ignored. A `quant_method` kvcalc does
not know is refused by name, never guessed.

>>> q = parse_quantization_config({"quant_method": "gptq", "bits": 4, "group_size": 128,
...                                "desc_act": True, "sym": True}, dtype="fp16")
>>> q.scheme.layout, q.scheme.group_size, q.scheme.act_order
('gptq', 128, True)
"""

from __future__ import annotations

from pydantic import ValidationError

from calc.errors import format_error
from calc.quant.config import (
    METHODS,
    TORCH_NAMES,
    KVCacheScheme,
    QuantConfig,
    QuantScheme,
    dtype_name,
)
from calc.quant.fields import DEFAULT_SKIP, Fields
from calc.quant.parse_ct import parse_compressed_tensors


def parse_quantization_config(
    qc: object, *, dtype: str = "bf16", origin: str = "quantization_config"
) -> QuantConfig:
    """The QuantConfig of a config.json `quantization_config` (or an hf_quant_config.json).

    `dtype` is the checkpoint's base dtype (config.json `torch_dtype` / `dtype`): what every
    unquantized tensor is stored in.
    """
    if not isinstance(qc, dict):
        raise ValueError(f"{origin}: must be a JSON object: got {type(qc).__name__}")
    nested = "quantization" in qc and "quant_method" not in qc  # ModelOpt's hf_quant_config.json
    if nested:
        qc = {"quant_method": "modelopt", **qc["quantization"]}
    f = Fields(qc, origin)
    method = qc.get("quant_method")
    method = method.lower() if isinstance(method, str) else method
    if method not in METHODS:
        raise f.fail("quant_method", f"must be one of {', '.join(METHODS)}", method)
    dtype = dtype_name(dtype, "torch_dtype")
    try:
        if method == "compressed-tensors":
            return parse_compressed_tensors(f, dtype)
        q = _PARSERS[method](f, dtype)
    except ValidationError as e:
        raise ValueError(f"{origin}: {format_error(e)}") from None
    if nested and q.kv_cache is not None:  # the engines read the nested key by its own rules
        q = q.model_copy(update={"kv_cache": q.kv_cache.model_copy(update={"declared": "nested"})})
    return q


def _gptq(f: Fields, dtype: str) -> QuantConfig:
    fmt = f.get("checkpoint_format", "format", default="gptq")[1]
    if fmt not in ("gptq", "gptq_v2"):
        # Marlin / BitBLAS checkpoints are repacked (AutoGPTQ _utils.py drops g_idx, reorders)
        raise f.fail("checkpoint_format", "must be 'gptq' or 'gptq_v2' (repacked formats differ)")
    only = f.data.get("modules_in_block_to_quantize")
    if only is not None:
        if not isinstance(only, list) or not all(isinstance(x, list) for x in only):
            raise f.fail("modules_in_block_to_quantize", "must be a list of lists of module names")
        only = tuple(name for group in only for name in group)
    scheme = QuantScheme(
        layout="gptq",
        bits=f.int("bits", "w_bit", default=4, choices=(2, 3, 4, 8)),
        group_size=f.group("group_size", default=128),
        symmetric=f.bool("sym", default=True),
        act_order=f.bool("desc_act", default=False),
        scale_dtype="fp16" if dtype == "fp32" else dtype,  # QuantLinear weight_dtype
        bias_always=_autogptq_wrote(f),
    )
    return QuantConfig(
        method="gptq",
        schemes=(scheme,),
        only_modules=only,
        quantize_lm_head=f.bool("lm_head", default=False),
        dtype=dtype,
    )


# Keys only transformers' GPTQConfig (optimum's GPTQQuantizer) writes into quantization_config.
_OPTIMUM_KEYS = frozenset(
    ("dataset", "model_seqlen", "block_name_to_quantize", "module_name_preceding_first_block",
     "use_exllama", "exllama_config", "cache_block_outputs", "use_cuda_fp16", "max_input_length",
     "tokenizer", "batch_size", "pad_token_id", "backend")
)  # fmt: skip


def _autogptq_wrote(f: Fields) -> bool:
    """Whether AutoGPTQ wrote the checkpoint, so every quantized linear stores a (zero) bias.

    Every AutoGPTQ release (to 0.7.1, the last) built each QuantLinear with bias=True
    (auto_gptq/modeling/_utils.py make_quant; AutoGPTQ#601, fixed by #602 on 2024-03-25 in no
    release). optimum's GPTQQuantizer and GPTQModel pass `layer.bias is not None`
    (optimum/gptq/quantizer.py _replace_by_quant_layers) and say so: both write
    `meta.quantizer` ("optimum:x", "gptqmodel:x"), and older optimum its own keys (_OPTIMUM_KEYS).
    AutoGPTQ's quantize_config.json has neither.
    """
    meta = f.data.get("meta")
    if meta is not None and not isinstance(meta, dict):
        raise f.fail("meta", "must be a JSON object")
    quantizer = (meta or {}).get("quantizer")
    if quantizer is not None:
        names = [quantizer] if isinstance(quantizer, str) else quantizer
        if not isinstance(names, list) or not all(isinstance(x, str) for x in names):
            raise f.fail("meta", "'quantizer' must be a string or a list of strings", quantizer)
        return not any(x.split(":")[0].strip().lower() in ("gptqmodel", "optimum") for x in names)
    return not (_OPTIMUM_KEYS & f.data.keys())


def _awq(f: Fields, dtype: str) -> QuantConfig:
    version = f.choice("version", ("gemm", "gemv"), "gemm")
    if not f.bool("zero_point", default=True):
        raise f.fail("zero_point", "must be true: AutoAWQ's layouts store zero points")
    scheme = QuantScheme(
        layout=f"awq-{version}",
        bits=f.int("bits", "w_bit", default=4, choices=(4,)),  # AutoAWQ WQLinear: 4 bits only
        group_size=f.group("group_size", "q_group_size", default=128),
        symmetric=False,
        scale_dtype="fp16",
    )
    ignore = f.names("modules_to_not_convert")  # AutoAWQ: substring `key in name`
    return QuantConfig(
        method="awq", schemes=(scheme,), ignore=ignore, ignore_style="substring", dtype=dtype
    )


def _bnb(f: Fields, dtype: str) -> QuantConfig:
    four = f.bool("load_in_4bit", "_load_in_4bit", default=False)
    eight = f.bool("load_in_8bit", "_load_in_8bit", default=False)
    if four == eight:
        raise f.fail("load_in_4bit", "must be true for exactly one of load_in_4bit / load_in_8bit")
    if four:
        if dtype not in TORCH_NAMES:  # _ops.py quantize_4bit: "only supports 16/32-bit floats"
            raise f.fail("torch_dtype", "must be float16, bfloat16 or float32 for 4-bit", dtype)
        storage = f.get("bnb_4bit_quant_storage", default="uint8")
        scheme = QuantScheme(
            layout="bnb-4bit",
            bits=4,
            group_size=64,
            quant_type=f.choice("bnb_4bit_quant_type", ("nf4", "fp4"), "fp4"),
            double_quant=f.bool("bnb_4bit_use_double_quant", default=False),
            storage_dtype=dtype_name(storage[1], storage[0]),
            scale_dtype="fp32",
        )
    else:
        if f.bool("llm_int8_has_fp16_weight", default=False):
            raise f.fail("llm_int8_has_fp16_weight", "must be false: fp16 weights are not int8")
        scheme = QuantScheme(layout="bnb-8bit", bits=8, strategy="channel", scale_dtype="fp32")
    skip = f.skips("llm_int8_skip_modules")
    return QuantConfig(method="bitsandbytes", schemes=(scheme,), ignore=skip, dtype=dtype)


def _fp8(f: Fields, dtype: str) -> QuantConfig:
    if f.names("modules_to_convert"):
        raise f.fail("modules_to_convert", "must be empty: fp8 embeddings are not counted")
    experts = f.choice("expert_dtype", ("fp8", "fp4"), "fp8")
    if f.data.get("kv_cache_quant_algo") is not None:  # SGLang 0.5.18+ Fp8Config reads it
        raise f.fail(
            "kv_cache_quant_algo",
            "is not modelled with quant_method fp8 (SGLang 0.5.18+ stores an fp8 KV cache from "
            "it, vLLM a bf16 one; drop it and give --kv-cache-dtype)",
        )
    block = f.data.get("weight_block_size")
    if block is not None and not (
        isinstance(block, list | tuple)
        and len(block) == 2
        and all(isinstance(b, int) and not isinstance(b, bool) and b > 0 for b in block)
    ):
        raise f.fail("weight_block_size", "must be two positive integers or null")
    static = f.choice("activation_scheme", ("dynamic", "static"), "dynamic") == "static"
    fmt = f.choice("scale_fmt", ("float", "ue8m0"), "float")
    scheme = QuantScheme(
        layout="fp8",
        bits=8,
        strategy="block" if block else "tensor",
        block_size=tuple(block) if block else None,
        scale_dtype="e8m0" if fmt == "ue8m0" else "fp32",
        input_scale="tensor" if static else None,
    )
    ignore = f.skips("modules_to_not_convert", "ignored_layers")
    return QuantConfig(
        method="fp8", schemes=(scheme,), ignore=ignore, dtype=dtype, expert_dtype=experts
    )


def _mxfp4(f: Fields, dtype: str) -> QuantConfig:
    scheme = QuantScheme(layout="mxfp4", bits=4, group_size=32, scale_dtype="e8m0")
    ignore = f.skips("modules_to_not_convert")
    return QuantConfig(method="mxfp4", schemes=(scheme,), ignore=ignore, dtype=dtype)


def _modelopt(f: Fields, dtype: str) -> QuantConfig:
    algo = f.choice("quant_algo", ("fp8", "nvfp4"), None)
    if algo == "nvfp4":
        group = f.int("group_size", default=16, choices=(16,))
        scheme = QuantScheme(
            layout="modelopt-nvfp4", bits=4, group_size=group, scale_dtype="fp8_e4m3"
        )
    else:
        scheme = QuantScheme(layout="modelopt-fp8", bits=8, strategy="tensor", scale_dtype="fp32")
    return QuantConfig(
        method="modelopt",
        schemes=(scheme,),
        ignore=f.names("exclude_modules", "ignore"),
        ignore_style="fnmatch",  # vLLM modelopt.py is_layer_excluded: fnmatch wildcards
        dtype=dtype,
        kv_cache=_modelopt_kv(f),
    )


def _modelopt_kv(f: Fields) -> KVCacheScheme | None:
    """ModelOpt's quantized KV cache: older exports say kv_cache_quant_algo "FP8" (or "NVFP4"),
    newer ones a compressed-tensors-like kv_cache_scheme {"dynamic": false, "num_bits": 8 (or 4),
    "type": "float"}; both store one fp32 k_scale and v_scale a layer (vLLM modelopt.py
    ModelOptKVCacheMethod: "scaling factors from FP8 or NVFP4 checkpoints"). The scheme wins
    where both are given, as both engines read it first (calc.serving.kv_auto)."""
    algo = f.choice("kv_cache_quant_algo", ("fp8", "nvfp4", None), None)
    key, scheme = f.get("kv_cache_scheme")
    if scheme is not None:
        if not isinstance(scheme, dict):
            raise f.fail(key, "must be a JSON object (num_bits, type, dynamic)")
        bits = scheme.get("num_bits")
        if scheme.get("type") != "float" or bits not in (8, 4):
            raise f.fail(key, "must be an 8- or 4-bit float scheme (fp8 / nvfp4 KV caches)")
        dynamic = scheme.get("dynamic")
        if dynamic is not None and not isinstance(dynamic, bool):
            raise f.fail(f"{key}.dynamic", "must be true or false", dynamic)
        declared = "kv_cache_scheme"
        return KVCacheScheme(layout="modelopt", bits=bits, declared=declared, dynamic=dynamic)
    if algo:
        bits = 4 if algo == "nvfp4" else 8
        return KVCacheScheme(layout="modelopt", bits=bits, declared="kv_cache_quant_algo")
    return None


def _fbgemm_fp8(f: Fields, dtype: str) -> QuantConfig:
    """Meta's FBGEMM fp8 (meta-llama/Llama-3.1-405B-Instruct-FP8): per-output-channel fp8.

    transformers integrations/fbgemm_fp8.py FbgemmFp8Linear and vLLM quantization/
    fbgemm_fp8.py (vllm-project/vllm@04843c7c2924) FBGEMMFp8LinearMethod.create_weights:
    weight float8_e4m3fn (out, in), weight_scale float32 (out, 1), and one float32
    input_scale_ub scalar (from `activation_scale_ub`). `modules_to_not_convert` lists full
    module names vLLM keeps in the model dtype (is_layer_skipped: `prefix in ignored_layers`,
    an exact match); the embedding and LM head are never LinearBase, so never fp8.
    """
    key, ub = f.get("activation_scale_ub")
    if ub is not None and (isinstance(ub, bool) or not isinstance(ub, int | float) or ub <= 0):
        raise f.fail(key, "must be a positive number")
    scheme = QuantScheme(
        layout="fp8", bits=8, strategy="channel", scale_dtype="fp32", input_scale="tensor"
    )
    ignore = f.names("modules_to_not_convert") + DEFAULT_SKIP
    return QuantConfig(
        method="fbgemm_fp8", schemes=(scheme,), ignore=ignore, ignore_style="fnmatch", dtype=dtype
    )


_PARSERS = {
    "gptq": _gptq,
    "awq": _awq,
    "bitsandbytes": _bnb,
    "fp8": _fp8,
    "mxfp4": _mxfp4,
    "modelopt": _modelopt,
    "fbgemm_fp8": _fbgemm_fp8,
}
