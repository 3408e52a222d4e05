"""Sharding: which parameters, and how many bytes of weights, the most loaded GPU holds.

Tensor parallelism as Megatron-LM splits it (and vLLM's parallel linear layers do):
- attention: query heads split tp-ways. KV heads split tp-ways; when tp > G (KV heads) each GPU
  holds one KV head, so each head is replicated tp / G times (vLLM QKVParallelLinear). tp must
  divide the query heads, and divide or be a multiple of G.
- MLP, every expert: the intermediate width split tp-ways (column-parallel gate/up, row-parallel
  down); the down projection's bias is replicated.
- embedding and untied LM head: vocab-parallel, ceil(V / tp) rows per GPU (vLLM pads V to a
  multiple of 64 first: < 64 rows, ignored).
- norms, the MoE router, learned positions and the attention-output bias: replicated.
Pipeline parallelism: gpus = tp x pp; each stage holds ceil(L / pp) layers, the first stage
also the embedding, the last the LM head (its own copy of a tied one) and the final norm; the
heaviest stage is reported.

Weight dtypes: fp32 / bf16 / fp16 store everything at that width. fp8 / int8 / int4 quantize the
linear layers (attention and MLP matrices, their biases counted at the same width) and keep the
embedding, LM head, norms and router at 16 bits, as GPTQ / AWQ / fp8 checkpoints do. int4 is
group-wise: per `group_size` weights one `scale_bytes` scale (fp16: 2 B), plus a zero point of
`zero_point_bits` (0: symmetric, as Marlin-served GPTQ; 4: asymmetric AWQ / GPTQ qzeros).
fp8 / int8 per-tensor or per-channel scales (4 B per matrix or per row) are not counted.

But: no expert parallelism, no sequence parallelism. What the rest of a GPU's memory holds
(activations, KV cache, reserve) is calc.capacity.

>>> from calc.presets import load_preset
>>> weight_params_per_gpu(load_preset("llama-2-70b"), tp=8)["attn/kv"]   # 80 x 1 x 2 x 128 x 8192
167772160
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from math import ceil
from types import MappingProxyType

from calc.dtypes import canonical_dtype, dtype_bits
from calc.errors import check_count
from calc.params import expert_params, norm_params, param_breakdown
from calc.spec import ModelSpec

DEFAULT_GROUP_SIZE = 128  # GPTQ / AWQ default quantization group
DEFAULT_SCALE_BYTES = 2  # one fp16 scale per group

QUANTIZED_DTYPES = ("fp8", "fp8_e4m3", "fp8_e5m2", "int8", "int4")
LINEAR_COMPONENTS = ("attn/q", "attn/kv", "attn/o", "mlp")
UNQUANTIZED_DTYPE = "bf16"  # embedding, LM head, norms and router of a quantized checkpoint


# --- parallel layout --------------------------------------------------------------------------


def check_parallel(spec: ModelSpec, tp: int, pp: int = 1) -> tuple[int, int]:
    """tp and pp as ints for the generic planner, or a ValueError naming the rule that fails
    (a model it does not plan, then the split)."""
    tp, pp = check_count("tp", tp), check_count("pp", pp)
    check_plannable(spec)
    return check_split(spec, tp, pp)


def check_split(spec: ModelSpec, tp: int, pp: int = 1) -> tuple[int, int]:
    """tp and pp as ints, or a ValueError: the head and layer rules of any split, the engines'
    too (vLLM and SGLang refuse a tp that does not divide the query heads)."""
    tp, pp = check_count("tp", tp), check_count("pp", pp)
    H, G, L = spec.num_attention_heads, spec.n_kv_heads, spec.num_hidden_layers
    if H % tp:
        raise ValueError(f"'tp' must divide num_attention_heads={H}: got {tp}")
    if G % tp and tp % G:
        raise ValueError(f"'tp' must divide or be a multiple of num_key_value_heads={G}: got {tp}")
    if pp > L:
        raise ValueError(f"'pp' must be at most num_hidden_layers={L}: got {pp}")
    return tp, pp


def check_plannable(spec: ModelSpec) -> None:
    """The memory planner models uniform layers of full or sliding GQA attention and one MLP
    kind; anything else is refused by name rather than planned wrong."""
    why = unplannable(spec)
    if why:
        raise ValueError(
            f"'model' {spec.name!r} has {why}, which this generic memory planner does not model: "
            "plan it as the engine does with --engine vllm or --engine sglang "
            "(calc.serving.engine_plan); kvcalc kv / attention show its cache and FLOPs"
        )


def unplannable(spec: ModelSpec) -> str | None:
    """What in `spec` the generic planner does not model ("MLA attention", ...), or None."""
    kinds = set(spec.attention_counts) - {"full_attention", "sliding_attention"}
    return (
        "MLA attention" if spec.is_mla
        else f"{sorted(kinds)[0]} layers" if kinds
        else "shared experts" if spec.shared_expert_intermediate_size
        else "dense and MoE layers mixed" if spec.is_moe and spec.n_moe_layers != spec.num_hidden_layers
        else "attention sinks or gates" if spec.attention_sinks or spec.attn_output_gate
        else "router biases" if spec.router_bias
        else None
    )  # fmt: skip


def kv_heads_per_gpu(spec: ModelSpec, tp: int) -> int:
    """G / tp, or 1 when tp > G (each KV head then lives on tp / G GPUs)."""
    return max(1, spec.n_kv_heads // tp)


def kv_replication(spec: ModelSpec, tp: int) -> int:
    """Copies of each KV head across the tensor-parallel group."""
    return max(1, tp // spec.n_kv_heads)


# --- weights on the most loaded GPU -----------------------------------------------------------


@functools.lru_cache(maxsize=4096)
def weight_params_per_gpu(spec: ModelSpec, tp: int = 1, pp: int = 1) -> Mapping[str, int]:
    """Parameters on the most loaded GPU, per component of calc.params.param_breakdown.

    Cached, so the mapping is read-only: a caller that changed it would change every later
    answer for the same arguments (copy it with dict(...) to edit)."""
    tp, pp = check_parallel(spec, tp, pp)
    L, h, V = spec.num_hidden_layers, spec.hidden_size, spec.vocab_size
    total = param_breakdown(spec)
    final_norm = norm_params(spec) if spec.final_norm else 0
    o_bias = h if spec.attn_out_bias else 0  # row-parallel bias: every GPU keeps it
    down_bias = h if (spec.expert_bias if spec.is_moe else spec.mlp_bias) else 0
    split_expert = expert_params(spec) - down_bias
    layer = {  # one layer, on one GPU
        "attn/q": total["attn/q"] // L // tp,  # H * d columns (+ bias), H % tp == 0
        "attn/kv": total["attn/kv"] // L // spec.n_kv_heads * kv_heads_per_gpu(spec, tp),
        "attn/o": (total["attn/o"] // L - o_bias) // tp + o_bias,
        "mlp": spec.num_local_experts * (ceil(split_expert / tp) + down_bias),
        "router": total["router"] // L,
        "norm": (total["norm"] - final_norm) // L,
    }
    n_layers = ceil(L / pp)  # the heaviest stage
    out = dict.fromkeys(total, 0)
    for key, n in layer.items():
        out[key] = n_layers * n
    rows = ceil(V / tp)  # vocab-parallel
    embed = rows * h + total["pos_embed"]  # first stage; learned positions are replicated
    head = (rows * h if (pp > 1 or not spec.tie_word_embeddings) else 0) + final_norm  # last
    if pp == 1:
        out["embed"], out["pos_embed"] = rows * h, total["pos_embed"]
        out["lm_head"] = rows * h if not spec.tie_word_embeddings else 0
        out["norm"] += final_norm
    elif embed >= head:
        out["embed"], out["pos_embed"] = rows * h, total["pos_embed"]
    else:
        out["lm_head"] = rows * h
        out["norm"] += final_norm
    return MappingProxyType(out)


def quantized_bytes(
    n_params: int,
    dtype: str,
    group_size: int = DEFAULT_GROUP_SIZE,
    scale_bytes: int = DEFAULT_SCALE_BYTES,
    zero_point_bits: int = 0,
) -> int:
    """Bytes for `n_params` weights stored in `dtype` (int4: plus group scales and zeros).

    >>> quantized_bytes(4096 * 4096, "int4")   # 8 MiB of nibbles + 131072 groups x 2 B
    8650752
    """
    bits = dtype_bits(dtype)
    data = -(-n_params * bits // 8)
    if canonical_dtype(dtype) != "int4" or n_params == 0:
        return data
    groups = -(-n_params // group_size)
    return data + -(-groups * (8 * scale_bytes + zero_point_bits) // 8)


@functools.lru_cache(maxsize=4096)
def weight_bytes_per_gpu(
    spec: ModelSpec,
    tp: int = 1,
    pp: int = 1,
    weight_dtype: str = "bf16",
    group_size: int = DEFAULT_GROUP_SIZE,
    scale_bytes: int = DEFAULT_SCALE_BYTES,
    zero_point_bits: int = 0,
) -> Mapping[str, int]:
    """Bytes per component on the most loaded GPU (see the module docstring for dtypes); a
    read-only mapping, as weight_params_per_gpu's."""
    wd = canonical_dtype(weight_dtype)
    group_size = check_count("group_size", group_size)
    scale_bytes = check_count("scale_bytes", scale_bytes, allow_zero=True)
    if zero_point_bits not in (0, 4, 8):
        raise ValueError(f"'zero_point_bits' must be 0, 4 or 8: got {zero_point_bits!r}")
    quantized = wd in QUANTIZED_DTYPES
    out = {}
    for key, n in weight_params_per_gpu(spec, tp, pp).items():
        if quantized and key in LINEAR_COMPONENTS:
            out[key] = quantized_bytes(n, wd, group_size, scale_bytes, zero_point_bits)
        else:
            out[key] = quantized_bytes(n, UNQUANTIZED_DTYPE if quantized else wd)
    return MappingProxyType(out)
