"""calc.weight_bytes: the bytes a checkpoint stores, per component and part.

Every weight matrix (calc.linears) is either quantized, and stored as its scheme's layout says
(calc/quant/layout.py: packed weights, scales, zero points, g_idx, bookkeeping, activation
scales, bias), or kept in the base dtype with everything else (embeddings, norms, biases of
unquantized matrices, sinks, convs). Which matrices a method quantizes:
- the config's own lists decide first (`modules_to_not_convert`, `ignore`, `exclude_modules`,
  `llm_int8_skip_modules`; GPTQ's `modules_in_block_to_quantize`, `lm_head`), matched on the
  module's full checkpoint name, layer by layer (Qwen3-MoE-FP8 lists every layer's router);
- GPTQ quantizes the decoder blocks' projections (AutoGPTQ/GPTQModel `layer_modules`: not the
  router, not the LM head unless `lm_head: true`); AutoAWQ every nn.Linear of the blocks; MXFP4
  only the routed experts (transformers' Mxfp4 quantizer); ModelOpt leaves routers out (its
  default disabled quantizers "*router*", "*mlp.gate.*"); bitsandbytes, fp8 and
  compressed-tensors convert every nn.Linear, so a router counts only where the model built it
  as one (ROUTER_IS_LINEAR: the transformers 4.x classes those checkpoints were written with).
Stored KV-cache scales (ModelOpt k_scale / v_scale, compressed-tensors kv_cache_scheme) are
`kv_scales`. Labels: "<component>" holds base-dtype bytes, "<component>:<part>" quantized parts.

A checkpoint also stores what param_count leaves out, and some values in fp32 rather than the
base dtype (calc/quant/stored.py): its multi-token-prediction layers whenever
`num_nextn_predict_layers` > 0 (DeepSeek-V3/R1 and GLM-4.5 as layers L, L + 1, ..., each with
its own copy of embed_tokens and shared_head.head; eh_proj is never quantized), DeepSeek-V3 /
GLM-4.5's fp32 `e_score_correction_bias` buffers (label "router:e_score_correction_bias") and
DeepSeek-V3.2's fp32 norms ("norm:fp32"). tests/test_quant_checkpoints_fp8.py and
tests/test_hub_counts.py check them against the Hub's per-dtype counts. DeepSeek-V4 (fp4
experts, fp32 hyper-connections, int64 tid2eid) has its own layout: calc/quant/weights_v4.py.
A multimodal checkpoint's vision tower and projector (spec.vision, calc/vision.py) are the
"vision" component, in the base dtype; a quantization config that would convert them is refused.
But: KV-cache scales are counted for the decoder layers only (no checkpoint with both stored KV
scales and an MTP layer has been checked); bitsandbytes double quantization is exact only up to
the JSON length of each matrix's nested_offset float (see layout.BNB_NESTED_OFFSET_CHARS).
"""

from __future__ import annotations

import re
from collections import defaultdict

from calc.linears import Linear, _attention, _mlp, mtp_layer_linears
from calc.params import COMPONENTS, param_breakdown
from calc.quant.config import QuantConfig, QuantScheme, dtype_bytes, dtype_name
from calc.quant.kv import checkpoint_kv_scale_bytes
from calc.quant.layout import PARTS, linear_bytes
from calc.quant.match import scheme_for
from calc.quant.stored import (
    E_SCORE_BIAS_BYTES,
    FP32_BYTES,
    checkpoint_extras,
    checkpoint_spec,
    fp32_components,
    vision_values,
)
from calc.quant.weights_v4 import refuse_fp4_experts, v4_weight_bytes_breakdown
from calc.spec import ModelSpec

# Families whose transformers 4.x MoE block built the router as nn.Linear (MixtralSparseMoeBlock
# .gate, Qwen2MoeSparseMoeBlock.gate and .shared_expert_gate, Qwen3MoeSparseMoeBlock.gate,
# Llama4Router(nn.Linear), PhimoeTopKRouter(nn.Linear)); DeepSeek's MoEGate, gpt-oss's and
# GLM-4.5's routers hold a bare weight Parameter.
ROUTER_IS_LINEAR = frozenset({"mixtral", "qwen2_moe", "qwen3_moe", "llama4", "phimoe"})
# decoder-block prefix of module names in checkpoints, by family (default "model.layers.")
LAYER_PREFIX = {"falcon": "transformer.h.", "gpt2": "transformer.h."}
# calc.linears names modules generically; checkpoints (and the quantizers that matched their
# skip lists against them) use the family's own names, some of them fused.
RENAMES = {
    "mixtral": {  # MixtralSparseMoeBlock: block_sparse_moe.gate, experts.{e}.w1 / w3 / w2
        "mlp.gate": "block_sparse_moe.gate",
        "mlp.experts.gate_proj": "block_sparse_moe.experts.0.w1",
        "mlp.experts.up_proj": "block_sparse_moe.experts.0.w3",
        "mlp.experts.down_proj": "block_sparse_moe.experts.0.w2",
    },
    "gpt_oss": {  # GptOssMLP: router; experts stored fused, gate_up_proj (E, 2I, ...)
        "mlp.gate": "mlp.router",
        "mlp.experts.gate_proj": "mlp.experts.gate_up_proj",
        "mlp.experts.up_proj": "mlp.experts.gate_up_proj",
        "mlp.experts.down_proj": "mlp.experts.down_proj",
    },
    "qwen2_moe": {"mlp.shared_experts.": "mlp.shared_expert."},
    "falcon": {  # FalconAttention / FalconMLP: one fused query_key_value matrix
        "self_attn.q_proj": "self_attention.query_key_value",
        "self_attn.k_proj": "self_attention.query_key_value",
        "self_attn.v_proj": "self_attention.query_key_value",
        "self_attn.o_proj": "self_attention.dense",
        "mlp.up_proj": "mlp.dense_h_to_4h",
        "mlp.down_proj": "mlp.dense_4h_to_h",
    },
}


def stored_name(spec: ModelSpec, module: str) -> str:
    """The module's name inside a block of this family's checkpoints (expert 0 for experts)."""
    table = RENAMES.get(spec.family, {})
    if module in table:
        return table[module]
    for old, new in table.items():
        if old.endswith(".") and module.startswith(old):
            module = new + module.removeprefix(old)
    if module.startswith("mlp.experts."):  # one Linear per expert: experts.{e}.gate_proj
        module = "mlp.experts.0." + module.removeprefix("mlp.experts.")
    return module


Parts = tuple[tuple[str, int], ...]  # (component, parameters of one matrix) fused into one


def _merged(spec: ModelSpec, linears: list[Linear]) -> list[tuple[Linear, Parts]]:
    """Each stored matrix once, under its checkpoint name: fused parts (Phi-3's qkv_proj,
    Falcon's query_key_value, gpt-oss's gate_up_proj) summed back into the one matrix whose
    group / block scales a checkpoint stores (a 128-row block can straddle two parts), with the
    parameters each part brings to its own component."""
    out: dict[str, Linear] = {}
    parts: dict[str, list[tuple[str, int]]] = {}
    for x in linears:
        name = stored_name(spec, x.module)
        if name in out:
            y = out[name]
            out[name] = y._replace(
                out_features=y.out_features + x.out_features, bias=y.bias or x.bias
            )
        else:
            out[name] = x._replace(module=name)
            parts[name] = []
        parts[name].append((x.component, x.numel))
    return [(x, tuple(parts[name])) for name, x in out.items()]


def take(left: dict[str, int], x: Linear, parts: Parts, copies: int) -> None:
    """Take `copies` of matrix x from the parameters left per component, each fused part from
    its own component (a bias only one part had is counted on the first)."""
    for component, n in parts:
        left[component] -= copies * n
    left[x.component] -= copies * (x.numel - sum(n for _, n in parts))


def _quantizable(q: QuantConfig, spec: ModelSpec, x: Linear) -> bool:
    """Would the method convert this matrix, before the config's own skip lists?"""
    m = q.method
    if x.module.endswith("indexer.weights_proj"):
        # transformers modeling_deepseek_v32.py: _keep_in_fp32_modules = ["indexer.weights_proj"],
        # which every quantizer adds to modules_to_not_convert; deepseek-ai/DeepSeek-V3.2's
        # F8_E4M3 count holds wq_b and wk only, its BF16 count weights_proj (test_hub_counts);
        # SGLang nsa_indexer.py: "weights_proj in the checkpoint is stored in bf16"; vLLM builds
        # it with quant_config=None (vllm 0.11.0 sdist, model_executor/models/deepseek_v2.py)
        return False
    if x.module.endswith("eh_proj"):
        # DeepSeek / GLM's MTP projection is a plain torch nn.Linear where engines load it
        # (vLLM deepseek_mtp.py, glm4_moe_mtp.py; SGLang deepseek_nextn.py), never quantized:
        # DeepSeek-V3/R1's F8_E4M3 count is exactly their other matrices (test_quant_checkpoints_fp8)
        return False
    if x.component == "lm_head":
        return q.quantize_lm_head if m == "gptq" else m not in ("awq", "mxfp4")
    if m == "mxfp4":
        return x.routed
    if x.component == "router" or x.module.endswith(("mlp.gate", "shared_expert_gate")):
        # (an MTP layer's router is labelled "mtp" but named mlp.gate)
        return m not in ("gptq", "modelopt") and spec.family in ROUTER_IS_LINEAR
    if m == "gptq" and q.only_modules is not None:
        return re.sub(r"\.\d+\.", ".", x.module) in {
            re.sub(r"\.\d+\.", ".", n) for n in q.only_modules
        }
    return True


def _layer_specific(q: QuantConfig) -> bool:
    return any(any(c.isdigit() for c in p) for p in q.ignore)


def _entries(spec: ModelSpec, q: QuantConfig):
    """(linear, scheme or None, copies, fused parts) for every stored matrix of the model."""
    L, prefix = spec.num_hidden_layers, LAYER_PREFIX.get(spec.family, "model.layers.")
    where: dict[tuple[str, str], list[int]] = defaultdict(list)
    for i, kind in enumerate(spec.layer_kinds):
        where[kind].append(i)
    blocks = [
        (_merged(spec, _attention(spec, a, 1, "") + _mlp(spec, mlp, 1, "")), idx)
        for (a, mlp), idx in where.items()
    ]
    if spec.include_mtp:  # DeepSeek stores its MTP modules as layers L, L + 1, ...
        mtp = [x._replace(module=x.module.removeprefix("mtp.")) for x in mtp_layer_linears(spec)]
        blocks.append((_merged(spec, mtp), list(range(L, L + spec.num_nextn_predict_layers))))
    per_layer = _layer_specific(q)
    for linears, idx in blocks:
        for x, parts in linears:
            if not _quantizable(q, spec, x):
                yield x, None, x.count * len(idx), parts
                continue
            tally: dict[QuantScheme | None, int] = defaultdict(int)
            for i in idx if per_layer else idx[:1]:
                tally[scheme_for(q, f"{prefix}{i}.{x.module}")] += 1
            if not per_layer:
                tally = {s: len(idx) for s in tally}
            for s, layers in tally.items():
                yield x, s, x.count * layers, parts
    if not spec.tie_word_embeddings:
        head = Linear("lm_head", "lm_head", spec.hidden_size, spec.vocab_size, 1)
        scheme = scheme_for(q, "lm_head") if _quantizable(q, spec, head) else None
        yield head, scheme, 1, (("lm_head", head.numel),)


def _breakdown(spec: ModelSpec, q: QuantConfig | None, dtype: str) -> dict[str, int]:
    kv_layers = sum(1 for t in spec.attention_types if t != "linear_attention")
    spec = checkpoint_spec(spec)
    params = param_breakdown(spec)
    base = dtype_bytes(dtype)
    tables, buffers = checkpoint_extras(spec)
    params["mtp"] += tables
    fp32 = fp32_components(spec)
    vision = vision_values(spec) * base
    if q is None:
        result = {c: n * base for c, n in params.items() if c in COMPONENTS}
        return _with_vision(_fp32_values(result, fp32, buffers, base), vision)
    refuse_fp4_experts(q)  # transformers FP8Experts' fp4 packing: read for V4 only
    out: dict[str, int] = {}
    left = dict(params)
    for x, s, copies, parts in _entries(spec, q):
        if s is None or copies == 0:
            continue
        b = linear_bytes(
            s, x.out_features, x.in_features, bias=x.bias, dtype=dtype, module=x.module
        )
        take(left, x, parts, copies)
        for part, n in zip(PARTS, b, strict=True):
            if n:
                key = f"{x.component}:{part}"
                out[key] = out.get(key, 0) + copies * n
    result = {c: left[c] * base for c in COMPONENTS if c in left}
    result.update(
        sorted(
            out.items(),
            key=lambda kv: (
                COMPONENTS.index(kv[0].split(":")[0]),
                PARTS.index(kv[0].split(":")[1]),
            ),
        )
    )
    result = _fp32_values(result, fp32, buffers, base)
    if q.kv_cache is not None:
        result["kv_scales"] = checkpoint_kv_scale_bytes(
            q.kv_cache, layers=kv_layers, kv_heads=spec.n_kv_heads, head_dim=spec.head_dim
        )
    return _with_vision(result, vision)


def _with_vision(result: dict[str, int], vision: int) -> dict[str, int]:
    """Adds the vision encoder's bytes (calc/quant/stored.py vision_values) as "vision"."""
    if vision:
        result["vision"] = vision
    return result


def _fp32_values(
    result: dict[str, int], fp32: dict[str, int], buffers: int, base: int
) -> dict[str, int]:
    """Moves the values a checkpoint keeps in fp32 out of their components' base-dtype bytes into
    "router:fp32" / "norm:fp32"; adds the e_score_correction_bias buffers."""
    for c, n in fp32.items():
        result[c] -= n * base
        key = "router:fp32" if c == "router" else "norm:fp32"
        result[key] = result.get(key, 0) + n * FP32_BYTES
    if buffers:
        result["router:e_score_correction_bias"] = buffers * E_SCORE_BIAS_BYTES
    return result


def stored_dtype(spec: ModelSpec) -> str:
    """The base dtype a checkpoint stores: the quantization config's, else config.json's
    torch_dtype (spec.checkpoint_dtype), else bf16."""
    q = spec.quantization
    return q.dtype if q else (spec.checkpoint_dtype or "bf16")


def weight_bytes_breakdown(spec: ModelSpec, dtype: str | None = None) -> dict[str, int]:
    """Stored bytes by label: "<component>" in the base dtype, "<component>:<part>" for the
    quantized matrices' packed weights, scales, zeros, g_idx, meta, act_scales and bias,
    "kv_scales", and "vision" (a multimodal checkpoint's vision tower and projector, which
    calc.param_breakdown, the language model's, leaves out); DeepSeek-V4's: weights_v4.py.
    `dtype`: the base dtype (default: the quantization config's, else torch_dtype, else bf16)."""
    q = spec.quantization
    d = dtype_name(dtype if dtype is not None else stored_dtype(spec), "dtype")
    key = ("weight_bytes", d)
    memo = spec.memo
    if key not in memo:
        memo[key] = v4_weight_bytes_breakdown(spec, d) if spec.is_v4 else _breakdown(spec, q, d)
    return dict(memo[key])


def weight_bytes(spec: ModelSpec, dtype: str | None = None) -> int:
    """Bytes of every tensor the checkpoint stores (a safetensors index's `total_size`).

    That includes a model's MTP layers whenever `num_nextn_predict_layers` > 0 (with the copies
    of the embedding and head each stores), fp32 buffers such as e_score_correction_bias and a
    multimodal checkpoint's vision encoder (spec.vision), though calc.param_count leaves them out
    (MTP layers only with `include_mtp`; the vision encoder always: it counts the language
    model)."""
    d = dtype_name(dtype if dtype is not None else stored_dtype(spec), "dtype")
    key = ("weight_bytes_total", d)
    memo = spec.memo
    if key not in memo:
        memo[key] = sum(weight_bytes_breakdown(spec, d).values())
    return memo[key]
