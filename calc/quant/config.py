"""What a quantized checkpoint stores, as one frozen value: `QuantConfig` and its `QuantScheme`s.

A `QuantScheme` says how ONE linear weight is written to disk: the library layout that writes it
(GPTQ's qweight/qzeros/scales/g_idx, AWQ's, bitsandbytes', compressed-tensors' ...), the bits,
the scale granularity (per tensor, channel, group or 2-D block), the scale dtype, whether zero
points and activation-order indices are stored, and which static activation scales sit beside
it. `QuantConfig` holds the schemes, which modules stay in the base dtype, the base dtype itself
(the config's torch_dtype: embeddings, norms, biases and every unquantized matrix) and the KV-cache
scales the checkpoint carries. calc/quant/parse.py builds one from a config.json's
`quantization_config`; calc/quant/layout.py turns a scheme and a matrix shape into bytes.

>>> s = QuantScheme(layout="gptq", bits=4, group_size=128, scale_dtype="fp16")
>>> s.strategy, s.symmetric
('group', True)
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Method = Literal[
    "gptq", "awq", "bitsandbytes", "fp8", "compressed-tensors", "mxfp4", "modelopt", "fbgemm_fp8"
]
METHODS: tuple[str, ...] = (
    "gptq",
    "awq",
    "bitsandbytes",
    "fp8",
    "compressed-tensors",
    "mxfp4",
    "modelopt",
    "fbgemm_fp8",
)

# The tensors one quantized linear leaves in the checkpoint, by the code that writes them
# (each layout's shapes are cited at its formula in calc/quant/layout.py).
Layout = Literal[
    "gptq",  # AutoGPTQ / GPTQModel QuantLinear: qweight, qzeros, scales, g_idx
    "awq-gemm",  # AutoAWQ WQLinear_GEMM: qweight, qzeros, scales
    "awq-gemv",  # AutoAWQ WQLinear_GEMV: same names, padded GEMV shapes
    "bnb-4bit",  # bitsandbytes Params4bit: packed weight, absmax, quant_map, quant_state
    "bnb-8bit",  # bitsandbytes Int8Params: int8 weight, SCB, weight_format
    "fp8",  # transformers FP8Linear / AutoFP8: fp8 weight, weight_scale(_inv), input scale
    "ct-pack",  # compressed-tensors pack-quantized: weight_packed, weight_scale, weight_shape
    "ct-int",  # compressed-tensors int-quantized / naive: int8 weight, weight_scale
    "ct-float",  # compressed-tensors float-quantized: fp8 weight, weight_scale
    "ct-nvfp4",  # compressed-tensors nvfp4-pack-quantized: weight_packed, fp8 scales, global
    "ct-mxfp4",  # compressed-tensors mxfp4-pack-quantized: weight_packed, e8m0 scales
    "mxfp4",  # gpt-oss experts: {proj}_blocks, {proj}_scales
    "modelopt-fp8",  # NVIDIA ModelOpt FP8: fp8 weight, weight_scale, input_scale
    "modelopt-nvfp4",  # ModelOpt NVFP4: packed weight, fp8 weight_scale, weight_scale_2, input
]
Strategy = Literal["tensor", "channel", "group", "block", "tensor_group"]

# Bytes per element of the tensors these layouts write (scales, zero points, indices).
DTYPE_BYTES: dict[str, int] = {
    "fp32": 4,
    "fp16": 2,
    "bf16": 2,
    "fp8_e4m3": 1,
    "e8m0": 1,  # MX / UE8M0 exponent-only scales
    "int8": 1,
    "uint8": 1,
    "int32": 4,
    "int64": 8,
}
_DTYPE_NAMES = {  # torch / config spellings -> the names above
    "float32": "fp32",
    "float": "fp32",
    "float16": "fp16",
    "half": "fp16",
    "bfloat16": "bf16",
    "float8_e4m3fn": "fp8_e4m3",
    "fp8": "fp8_e4m3",
    "float8_e8m0fnu": "e8m0",
    "ue8m0": "e8m0",
}
# bitsandbytes writes the weight's torch dtype into its quant_state JSON (`str(dtype)`)
TORCH_NAMES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}


def dtype_name(value: object, field: str) -> str:
    """'torch.bfloat16' / 'bfloat16' / 'bf16' -> 'bf16'; a ValueError naming `field` otherwise."""
    if isinstance(value, str):
        name = value.strip().lower().removeprefix("torch.")
        name = _DTYPE_NAMES.get(name, name)
        if name in DTYPE_BYTES:
            return name
    raise ValueError(f"'{field}' must be a dtype, one of {', '.join(DTYPE_BYTES)}: got {value!r}")


def dtype_bytes(name: str) -> int:
    return DTYPE_BYTES[name]


class QuantScheme(BaseModel):
    """How one quantized linear weight is stored (see calc/quant/layout.py for the bytes)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    layout: Layout
    bits: int = Field(gt=0, le=8)
    strategy: Strategy = "group"
    group_size: int | None = Field(default=None, gt=0)  # None: the whole row (per channel)
    block_size: tuple[int, int] | None = None  # (rows, cols) of one 2-D scale block
    symmetric: bool = True  # False: zero points are stored
    act_order: bool = False  # activation-order index (g_idx) stored beside the weight
    bias_always: bool = False  # AutoGPTQ: a (zero) bias on every quantized linear
    scale_dtype: str = "fp16"
    zero_dtype: str = "int8"  # compressed-tensors' unpacked zero points (QuantizationArgs dtype)
    quant_type: str | None = None  # bitsandbytes "nf4" / "fp4"; "int" / "float" elsewhere
    double_quant: bool = False  # bitsandbytes: absmax itself quantized (nested_* tensors)
    storage_dtype: str = "uint8"  # bitsandbytes 4-bit container (bnb_4bit_quant_storage)
    input_scale: Strategy | None = None  # static activation scales stored per linear
    input_symmetric: bool = True  # False: an input zero point is stored too
    input_global_scale: bool = False  # NVFP4 activations: one fp32 global input scale
    # bits of quantized activations (compressed-tensors input_activations.num_bits, static or
    # dynamic); None: weight-only. Engines pick their kernels by it (vLLM: W8A8 vs WNA16).
    input_bits: int | None = Field(default=None, gt=0, le=16)
    targets: tuple[str, ...] = ("Linear",)  # compressed-tensors: modules this scheme covers

    @model_validator(mode="after")
    def _check(self) -> QuantScheme:
        for field in ("scale_dtype", "zero_dtype", "storage_dtype"):
            dtype_name(getattr(self, field), field)
        if self.strategy == "block" and self.block_size is None:
            raise ValueError("'block_size' is needed with strategy 'block': got None")
        if self.strategy in ("group", "tensor_group") and self.group_size is None:
            if self.layout not in ("gptq", "awq-gemm", "awq-gemv"):  # None there: whole row
                raise ValueError(f"'group_size' is needed with strategy {self.strategy!r}")
        if self.block_size is not None and min(self.block_size) <= 0:
            raise ValueError(f"'block_size' must be two positive integers: got {self.block_size}")
        return self


class KVCacheScheme(BaseModel):
    """Scales a checkpoint stores for a quantized KV cache (k_scale / v_scale per layer)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    bits: int = Field(default=8, gt=0, le=8)
    type: Literal["float", "int"] = "float"
    strategy: Literal["tensor", "attn_head", "channel", "group"] = "tensor"
    group_size: int | None = Field(default=None, gt=0)
    symmetric: bool = True
    scale_dtype: str = "fp32"
    layout: Literal["modelopt", "compressed-tensors"] = "compressed-tensors"
    # ModelOpt: where the config declares it (a flat kv_cache_quant_algo string, a
    # kv_cache_scheme, or hf_quant_config.json's quantization.kv_cache_quant_algo), and the
    # scheme's `dynamic` (None: absent): the engines read them by release (calc.serving.kv_auto)
    declared: Literal["kv_cache_quant_algo", "kv_cache_scheme", "nested"] | None = None
    dynamic: bool | None = None


class QuantConfig(BaseModel):
    """A checkpoint's quantization: schemes, what stays unquantized, base dtype, KV scales."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    method: Method
    schemes: tuple[QuantScheme, ...] = Field(min_length=1)
    # modules written in the base dtype; matched the way `ignore_style`'s library matches them
    ignore: tuple[str, ...] = ()
    ignore_style: Literal["transformers", "substring", "fnmatch", "compressed-tensors"] = (
        "transformers"
    )
    only_modules: tuple[str, ...] | None = None  # GPTQ modules_in_block_to_quantize
    quantize_lm_head: bool = False  # GPTQ "lm_head": true
    dtype: str = "bf16"  # unquantized tensors (config.json torch_dtype)
    kv_cache: KVCacheScheme | None = None
    format: str | None = None  # compressed-tensors' global format, for reports
    # fp8's MoE experts: "fp4" packs two e2m1 values a byte with one ue8m0 scale per 32 inputs
    # (transformers FineGrainedFP8Config.expert_dtype; DeepSeek-V4: calc/quant/weights_v4.py)
    expert_dtype: Literal["fp8", "fp4"] = "fp8"

    @model_validator(mode="after")
    def _check(self) -> QuantConfig:
        dtype_name(self.dtype, "dtype")
        return self

    @property
    def scheme(self) -> QuantScheme:
        """The first (for all but compressed-tensors, the only) scheme."""
        return self.schemes[0]

    @property
    def label(self) -> str:
        s = self.scheme
        size = f" g{s.group_size}" if s.group_size else ""
        return f"{self.method} {s.layout} w{s.bits}{size}"
