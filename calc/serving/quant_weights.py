"""Weights per rank of a quantized model as vLLM loads it: a quantized checkpoint's stored bytes,
or a bf16 / fp16 checkpoint quantized at load time (`--quantization fp8`).

Quantized checkpoint (spec.quantization set, calc.from_hf_config reads `quantization_config`):
each GPU holds its shard of the checkpoint's tensors, scales sharded with their matrices
(calc.quant.sharding.stored_bytes_per_gpu), plus what calc.serving.sharding adds for every
model: the vocabulary padded to 64 rows before the split (a base-dtype embedding / LM head),
the rotary cos/sin cache in the model dtype, a tied table's second copy on the last pipeline
rank. Pipeline ranks: the decoder layers' bytes are split by layer count, which is exact when
every layer stores the same tensors (one layer kind, no layer-specific skip list, no MTP); other
models are refused with pp > 1.
vLLM, a checkpoint whose quantized layers all have a written-out vLLM path (compressed-tensors
W8A8 int8 / fp8 channel, GPTQ through Machete on Hopper: calc.serving.quant_tensors): what vLLM
allocates for each layer (fp32 scales, GPTQ's g_idx, Machete's prepack), through torch's caching
allocator as for unquantized weights (calc.serving.allocator). Other schemes count the stored
bytes: vLLM's repacks (Marlin for GPTQ / AWQ on other GPUs) and its padding are not modelled there
(MXFP4's Marlin and Triton layouts are: calc.serving.mxfp4).

Runtime fp8 (vllm/model_executor/layers/quantization/fp8.py, Fp8LinearMethod /
Fp8MoEMethod with is_checkpoint_fp8_serialized False): every LinearBase of the decoder layers
(qkv_proj, o_proj, gate_up_proj, down_proj, MLA / GDN projections, shared experts) and the
FusedMoE experts are quantized after loading by ops.scaled_fp8_quant(weight, scale=None): an
fp8 weight (1 byte a value) and one fp32 per-tensor scale per module (per expert for
FusedMoE: w13_weight_scale and w2_weight_scale, shape (E,)). The embedding and LM head
(VocabParallelEmbedding / ParallelLMHead are not LinearBase), norms, sinks, convs, biases and
the routers (built with quant_config=None, e.g. qwen3_moe.py / gpt_oss.py `gate`) stay in the
model dtype. Scales of fused modules: one per module (qkv_proj, gate_up_proj), as the online
path quantizes the fused weight as one tensor.
"""

from __future__ import annotations

import functools
from math import ceil

from calc.dtypes import canonical_dtype
from calc.linears import _attention, _mlp
from calc.params import norm_params
from calc.quant.config import dtype_bytes
from calc.quant.sharding import stored_bytes_per_gpu
from calc.quant.weights import _layer_specific
from calc.serving.mxfp4 import vllm_mxfp4_layer_extra
from calc.serving.quant_tensors import vllm_checkpoint_rank_bytes
from calc.serving.shard_layers import (
    QUANTIZABLE,
    SPLIT_VECTORS,
    _matrix,
    attention_tp,
    check_engine_parallel,
    layer_rank_params,
    vocab_tp,
)
from calc.serving.sharding import (
    mla_kv_b_copy_bytes,
    mla_layers_per_rank,
    padded_vocab,
    pp_layer_split,
    rotary_cache_bytes,
    vision_rank_bytes,
)
from calc.sharding import QUANTIZED_DTYPES
from calc.spec import ModelSpec

RUNTIME_METHODS = ("fp8",)  # vLLM --quantization methods kvcalc models on an unquantized model
FP8_SCALE_BYTES = 4  # fp32 per-tensor scale
NOT_QUANTIZED = frozenset({"gate", "shared_expert_gate"})  # routers: quant_config=None


def check_runtime_method(spec: ModelSpec, method: str | None) -> str | None:
    """The runtime method to apply (None for none), or a ValueError naming what is refused."""
    if method is None:
        return None
    q = spec.quantization
    if q is not None:  # vLLM: the checkpoint's method must match --quantization
        if method != q.method:
            raise ValueError(
                f"Quantization method specified in the model config ({q.method}) does not "
                f"match the quantization method specified in the `quantization` argument "
                f"({method})"
            )
        return None  # the checkpoint's own bytes
    if method not in RUNTIME_METHODS:
        raise ValueError(
            f"'quantization' must be one of {', '.join(RUNTIME_METHODS)} on an unquantized "
            f"checkpoint (the runtime quantization kvcalc models): got {method!r}"
        )
    return method


def _fp8_layer_bytes(spec: ModelSpec, layer: int, tp: int, ep: int, base: int) -> int:
    """One decoder layer on one rank with vLLM's online fp8: weights 1 byte, biases, vectors
    and routers in the base dtype, one fp32 scale per module (per local expert for experts)."""
    kind, mlp = spec.layer_kinds[layer]
    linears = _attention(spec, kind, 1, "") + _mlp(spec, mlp, 1, "")
    total = 0
    modules = set()
    for lin in linears:
        name = lin.module.rsplit(".", 1)[-1]
        both = _matrix(spec, lin, tp, ep)
        bias = _matrix(spec, lin._replace(in_features=0), tp, ep) if lin.bias else 0
        if name in NOT_QUANTIZED or lin.component not in QUANTIZABLE:
            total += both * base
            continue
        total += (both - bias) + bias * base
        if lin.routed:
            local = lin.count // ep if ep > 1 else lin.count
            modules.add(("experts", "w2" if name == "down_proj" else "w13", local))
        else:  # vLLM fuses q/k/v and gate/up into one module with one scale
            fused = {"q_proj": "qkv", "k_proj": "qkv", "v_proj": "qkv"}
            fused.update(gate_proj="gate_up", up_proj="gate_up")
            prefix = lin.module.rsplit(".", 1)[0]
            modules.add((prefix, fused.get(name, name), 1))
    total += sum(n for *_, n in modules) * FP8_SCALE_BYTES
    vectors = layer_rank_params(spec, layer, tp, ep)
    total += sum(n for k, n in vectors.items() if k.endswith(":vectors")) * base
    return total


def fp8_layer_bytes(spec: ModelSpec, tp: int, ep: int, base: int) -> tuple[int, ...]:
    """Bytes of each decoder layer on one rank under runtime fp8."""
    memo: dict = {}
    out = []
    for i, k in enumerate(spec.layer_kinds):
        if k not in memo:
            memo[k] = _fp8_layer_bytes(spec, i, tp, ep, base)
        out.append(memo[k])
    return tuple(out)


def _checkpoint_layers(
    spec: ModelSpec, tp: int, ep: int, split, dtype: str, groups=None
) -> tuple[int, ...]:
    """Decoder-layer bytes of each pipeline rank for a quantized checkpoint, its unquantized
    tensors in `dtype`: its stored bytes on one GPU less the embedding, position table, LM head
    and final norm. `groups`: SGLang's other TP groups (calc.serving.sglang_parallel)."""
    from calc.serving.sglang_parallel import split_stored_bytes

    per = split_stored_bytes(spec, tp, ep, dtype, groups)
    final = norm_params(spec) * dtype_bytes(dtype) if spec.final_norm else 0
    outside = ("embed", "pos_embed", "lm_head")
    layers = sum(v for k, v in per.items() if k.split(":")[0] not in outside) - final
    L = spec.num_hidden_layers
    for i in range(L):  # sinks / GDN vectors: vLLM splits them by head
        whole, mine = layer_rank_params(spec, i, 1, 1), layer_rank_params(spec, i, tp, ep, groups)
        for c in SPLIT_VECTORS:
            k = f"{c}:vectors"
            layers -= (whole.get(k, 0) - mine.get(k, 0)) * dtype_bytes(dtype)
    if len(split) == 1:
        return (layers,)
    shapes = {tuple(sorted(layer_rank_params(spec, i, 1, 1).items())) for i in range(L)}
    uniform = len(shapes) == 1 and not spec.include_mtp  # every layer the same tensors
    if not uniform or _layer_specific(spec.quantization):
        raise ValueError(
            "pipeline parallelism with a quantized checkpoint whose layers store different "
            "tensors (mixed layer kinds, MTP, or a layer-specific skip list) is not modelled: "
            "use pp=1"
        )
    return tuple(layers // L * n for n in split)


def _head(spec: ModelSpec, tp: int, ep: int, rows: int, base: int) -> int:
    """The untied LM head on one rank: a quantized head as stored, else the padded table."""
    if spec.quantization is not None:
        per = stored_bytes_per_gpu(spec, tp, ep)
        if any(k.startswith("lm_head:") for k in per):
            return sum(v for k, v in per.items() if k.split(":")[0] == "lm_head")
    return rows * spec.hidden_size * base


@functools.lru_cache(maxsize=1024)
def quantized_rank_bytes(
    spec: ModelSpec,
    tp: int = 1,
    pp: int = 1,
    ep: int = 1,
    partition: tuple[int, ...] | None = None,
    runtime: str | None = None,
    base_dtype: str = "bf16",
    engine: str = "vllm",
    vllm_version: tuple[int, ...] | None = None,
    gpu: str = "",
    split=None,
) -> tuple[int, ...]:
    """Weight bytes on each pipeline rank: spec.quantization's checkpoint (its unquantized tensors
    in `base_dtype`, the engine's --dtype), or `runtime` ("fp8") applied to an unquantized model
    stored in `base_dtype` (the engine picks the rope dtype).
    With `vllm_version`, a checkpoint whose quantized layers vLLM's path is written out for
    (calc.serving.quant_tensors) counts what vLLM allocates on `gpu`, as torch's caching
    allocator counts it; others their stored bytes. `split`: SGLang's other TP groups."""
    tp, pp = check_engine_parallel(spec, tp, pp)
    q = spec.quantization
    if q is None and runtime is None:
        raise ValueError("quantized_rank_bytes needs spec.quantization or a runtime method")
    if ep > 1 and spec.is_moe and spec.num_local_experts % ep:
        raise ValueError(
            f"'expert parallel size' (tp x dp = {ep}) must divide num_local_experts="
            f"{spec.num_local_experts}"
        )
    base = dtype_bytes(base_dtype)  # engine_plan passes the checkpoint's torch_dtype for "auto"
    h = spec.hidden_size
    layout = pp_layer_split(spec.num_hidden_layers, pp, partition)
    if q is not None:
        layers = _checkpoint_layers(spec, tp, ep, layout, base_dtype, split)
    else:
        each = fp8_layer_bytes(spec, tp, ep, base)
        layers, start = [], 0
        for n in layout:
            layers.append(sum(each[start : start + n]))
            start += n
    embed_tp, head_tp = vocab_tp(tp, split)
    table = ceil(padded_vocab(spec.vocab_size) / embed_tp) * h * base
    rows = ceil(padded_vocab(spec.vocab_size) / head_tp)  # the LM head's
    pos = spec.max_position_embeddings * h * base if spec.position_embedding == "learned" else 0
    rope = rotary_cache_bytes(spec, 4 if base == 4 else 2, engine)  # the model dtype
    final = norm_params(spec) * base if spec.final_norm else 0
    vision = vision_rank_bytes(spec, tp, base, "quantization" if q is None else "")
    kv_b = mla_kv_b_copy_bytes(spec, attention_tp(tp, split), 4 if base == 4 else 2)
    kv_b = kv_b if _kv_b_quantized(spec) else 0
    mla = mla_layers_per_rank(spec, pp, partition)
    if q is not None and runtime is None and engine == "vllm" and vllm_version is not None:
        head = 0
        if not spec.tie_word_embeddings:
            head = _head(spec, head_tp, ep, rows, base)
        elif pp > 1:
            head = table
        ends = ((table, pos), (final, head))
        got = vllm_checkpoint_rank_bytes(
            spec, tp, ep, layout, base, ends, rope, vllm_version, gpu, vision
        )
        if got is not None:
            return got
    out = []
    for r, b in enumerate(layers):
        b += rope + vision + mla[r] * kv_b
        if r == 0:
            b += table + pos
        if r == pp - 1:
            b += final
            if not spec.tie_word_embeddings:
                b += _head(spec, head_tp, ep, rows, base)
            elif pp > 1:
                b += table
        out.append(b)
    return tuple(out)


def _kv_b_quantized(spec: ModelSpec) -> bool:
    """Whether MLA's kv_b_proj is quantized: always under a runtime method (every linear), else
    as the checkpoint's config decides (calc.quant.weights._quantizable)."""
    if not spec.is_mla:
        return False
    q = spec.quantization
    if q is None:
        return True  # runtime quantization
    from calc.linears import _attention
    from calc.quant.weights import _quantizable

    kind = next(k for k, _ in spec.layer_kinds if k != "linear_attention")
    kv_b = [x for x in _attention(spec, kind, 1, "") if x.module.endswith("kv_b_proj")]
    return bool(kv_b) and _quantizable(q, spec, kv_b[0])


def plan_weights(
    spec: ModelSpec, config, weight_dtype, tp: int, pp: int, ep: int, part, gpu="", split=None
):
    """(weight bytes of each pipeline rank, the model dtype) for engine_plan: the checkpoint's
    quantization, the engine's runtime `quantization`, or calc.serving.sharding's whole-model
    `weight_dtype` (int4 / fp8 on an unquantized checkpoint; refused beside the other two). With a
    quantized checkpoint `weight_dtype` is the engine's --dtype for its unquantized tensors; None
    takes the checkpoint's torch_dtype (vLLM's "auto").
    vLLM's mxfp4 experts as its backend for `gpu` pads them (calc.serving.mxfp4). `split`:
    SGLang's other TP groups (calc.serving.sglang_parallel), None for vLLM."""
    from calc.serving.sharding import rank_weight_bytes
    from calc.serving.vllm_offload import vllm_offload_bytes

    wd = canonical_dtype(weight_dtype or "bf16")
    engine = config.engine
    runtime = check_runtime_method(spec, getattr(config, "quantization", None))
    if spec.quantization is None and runtime is None:
        version = config.version_tuple  # allocator-counted (vLLM allocated, SGLang reserved)
        offload = vllm_offload_bytes(config)  # --cpu-offload-gb (calc.serving.vllm_offload)
        return rank_weight_bytes(
            spec, tp, pp, wd, ep, part, engine=engine, vllm_version=version, split=split,
            offload=offload,
        ), wd  # fmt: skip
    if wd in QUANTIZED_DTYPES:
        raise ValueError(
            f"'weight_dtype' {wd} quantizes an unquantized checkpoint as a whole: drop it for "
            "a quantized checkpoint or with 'quantization'"
        )
    if spec.quantization is not None and weight_dtype is None:  # vLLM's --dtype auto: the
        wd = canonical_dtype(spec.quantization.dtype)  # checkpoint's (activations, rope, KV)
    version = config.version_tuple if engine == "vllm" else None
    out = quantized_rank_bytes(spec, tp, pp, ep, part, runtime, wd, engine, version, gpu, split)
    if engine == "vllm" and spec.quantization is not None and spec.quantization.method == "mxfp4":
        extra = vllm_mxfp4_layer_extra(spec, tp, ep, config.version_tuple, gpu)
        kinds, start = spec.mlp_types, 0
        moe = []
        for n in pp_layer_split(spec.num_hidden_layers, pp, part):
            moe.append(sum(k == "sparse" for k in kinds[start : start + n]))
            start += n
        out = tuple(b + extra * m for b, m in zip(out, moe, strict=True))
    return out, wd
