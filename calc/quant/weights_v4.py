"""DeepSeek-V4's stored bytes: every tensor of its checkpoint, by label (calc.weight_bytes).

The published checkpoint (deepseek-ai/DeepSeek-V4-Flash; V4-Pro the same way) keeps DeepSeek's
own tensor names (layers.{i}.attn.wq_a, ffn.experts.{e}.w1, hc_attn_fn, mtp.0.*) in six dtypes:
- F8_E4M3 with one F8_E8M0 scale per 128 x 128 block (quantization_config, scale_fmt ue8m0):
  wq_a, wq_b, wkv, wo_a, wo_b, the indexer's wq_b, the shared expert's w1 / w2 / w3 and the MTP
  block's e_proj / h_proj;
- the routed experts with expert_dtype "fp4": I8, two e2m1 values a byte, (out, in / 2), and one
  F8_E8M0 scale per 32 inputs, (out, in / 32) (transformers integrations/finegrained_fp8.py
  FP8Experts: weight_k_div 2, sf_gran_k 32; vLLM deepseek_v4.py DeepseekV4MegaMoEExperts);
  with "fp8" they are blocks like the rest;
- BF16 (the base dtype): embed, head, every norm, the router's weight, the compressors' and the
  indexer's wkv / wgate and the indexer's weights_proj (transformers modeling_deepseek_v4.py
  _keep_in_fp32_modules: "these projections ship in BF16 with no companion scale_inv");
- F32: the hyper-connections (hc_{attn,ffn}_{fn,base,scale}, hc_head_*), attn_sink, the
  compressors' position biases (ape) and the scored routers' bias;
- I64: tid2eid (vocab x top-k) of the first num_hash_layers layers (hash routing, no bias).
The MTP blocks (num_nextn_predict_layers, named mtp.{k}.*) are window-only blocks (vLLM builds
them with compress_ratio 1) with their own e_proj, h_proj, enorm, hnorm, norm and hc_head; they
share the embedding and head. Checked against the Flash index (tests/test_quant_weights_v4.py).

Labels: "<component>" in the base dtype, "<component>:packed" / ":scales" for the quantized
matrices, "<component>:fp32" and "router:tid2eid" (int64); the MTP blocks' tensors are "mtp...".
"""

from __future__ import annotations

from collections import defaultdict

from calc.linears import Linear, _mlp
from calc.linears_v4 import v4_attention, v4_head_vectors, v4_hyper_connections, v4_layer_vectors
from calc.params import COMPONENTS
from calc.quant.config import QuantConfig, QuantScheme, dtype_bytes
from calc.quant.layout import linear_bytes
from calc.spec import ModelSpec

FP4_EXPERTS = QuantScheme(layout="mxfp4", bits=4, group_size=32, scale_dtype="e8m0")
FP32, TID2EID = 4, 8  # bytes a value: the fp32 tensors, tid2eid (int64)
# matrices the checkpoint keeps in the base dtype (no scale): transformers' list, by module
IN_BASE_DTYPE = ("compressor.kv_proj", "compressor.gate_proj", "indexer.kv_proj",
                 "indexer.gate_proj", "scorer.weights_proj", "mlp.gate")  # fmt: skip


def check_v4_quantization(q: QuantConfig | None) -> None:
    """What the V4 layout reads of a quantization config; anything else is refused by name."""
    if q is None:
        return
    if q.method != "fp8":
        raise ValueError(
            f"'quant_method' must be fp8 for DeepSeek-V4's stored bytes (its checkpoint's fp8 "
            f"blocks and fp4 experts; re-quantized variants are not modelled): got {q.method!r}"
        )
    if set(q.ignore) - {"lm_head"}:
        raise ValueError(
            "'modules_to_not_convert' must be empty for DeepSeek-V4's stored bytes (which "
            f"matrices are fp8 is fixed by its checkpoint): got {list(q.ignore)}"
        )
    if q.scheme.input_scale:
        raise ValueError(
            "'activation_scheme' must be dynamic for DeepSeek-V4's stored bytes: got static"
        )


def refuse_fp4_experts(q: QuantConfig) -> None:
    """The fp4 expert packing is read for DeepSeek-V4 only (calc.quant.weights)."""
    if q.expert_dtype != "fp8":
        raise ValueError(
            f"'expert_dtype' must be fp8 outside DeepSeek-V4 (whose layout is "
            f"calc/quant/weights_v4.py): got {q.expert_dtype!r}"
        )


def _block(spec: ModelSpec, kind: str, mlp: str, hashed: bool, mtp: bool):
    """One block's tensors as (component, what, elements or Linear): what is "matrix" (a
    Linear), "base", "fp32" or "tid2eid"; an MTP block's all labelled "mtp"."""
    h = spec.hidden_size
    label = (lambda c: "mtp") if mtp else (lambda c: c)
    mats = v4_attention(spec, kind, 1, "") + _mlp(spec, mlp, 1, "")
    out = [(label(x.component), "matrix", x) for x in mats]
    hc = [x for x in v4_hyper_connections(spec) if not x.module.startswith("hc_head")]
    out += [(label(x.component), "fp32", x.numel) for x in hc]  # hc_attn_fn, hc_ffn_fn
    for component, n, wide in v4_layer_vectors(spec, kind):
        out.append((label(component), "fp32" if wide else "base", n))
    out.append((label("attn/sinks"), "fp32", spec.num_attention_heads))
    out.append((label("norm"), "base", spec.norms_per_block * h))  # attn_norm, ffn_norm
    if hashed:
        out.append((label("router"), "tid2eid", spec.vocab_size * spec.num_experts_per_tok))
    else:
        out.append((label("router"), "fp32", spec.num_local_experts))  # gate.bias
    return out


def _tensors(spec: ModelSpec):
    """(component, what, elements or Linear, copies) for every tensor of the checkpoint."""
    L, h = spec.num_hidden_layers, spec.hidden_size
    hashed = spec.num_hash_layers
    count: dict[tuple[str, str, bool], int] = defaultdict(int)
    for i, (kind, mlp) in enumerate(spec.layer_kinds):
        count[(kind, mlp, i < hashed)] += 1
    for (kind, mlp, is_hash), n in count.items():
        for component, what, x in _block(spec, kind, mlp, is_hash, False):
            yield component, what, x, n
    V = spec.vocab_size
    yield "embed", "base", V * h, 1
    yield "lm_head", "base", V * h, 1
    yield "norm", "base", h, 1
    head = [x for x in v4_hyper_connections(spec) if x.module.startswith("hc_head")]
    yield "hc", "fp32", sum(x.numel for x in head) + v4_head_vectors(spec), 1
    for k in range(spec.num_nextn_predict_layers):
        mlp = spec.mlp_types[-1]
        for component, what, x in _block(spec, "sliding_attention", mlp, L + k < hashed, True):
            yield component, what, x, 1
        for name in ("e_proj", "h_proj"):  # (h -> h each: the embedding's and the hidden's)
            yield "mtp", "matrix", Linear("mtp", f"mtp.{name}", h, h, 1), 1
        yield "mtp", "base", 3 * h, 1  # enorm, hnorm, norm
        yield "mtp", "fp32", sum(x.numel for x in head) + v4_head_vectors(spec), 1


def _scheme(q: QuantConfig | None, x: Linear) -> QuantScheme | None:
    if q is None or x.module.endswith(IN_BASE_DTYPE):
        return None
    if x.routed and q.expert_dtype == "fp4":
        return FP4_EXPERTS
    return q.scheme


def v4_weight_bytes_breakdown(spec: ModelSpec, dtype: str) -> dict[str, int]:
    """Stored bytes by label (module docstring); `dtype`: the base dtype."""
    if spec.num_hash_layers is None:
        raise ValueError(
            "'num_hash_layers' must be set for DeepSeek-V4's stored bytes (its hash-routed "
            "layers store an int64 tid2eid table instead of an fp32 bias): got None"
        )
    q = spec.quantization
    check_v4_quantization(q)
    base = dtype_bytes(dtype)
    out: dict[str, int] = defaultdict(int)
    for component, what, x, n in _tensors(spec):
        if what == "base":
            out[component] += n * x * base
        elif what == "fp32":
            out[f"{component}:fp32"] += n * x * FP32
        elif what == "tid2eid":
            out["router:tid2eid"] += n * x * TID2EID
        elif (s := _scheme(q, x)) is None:
            out[component] += n * x.count * x.numel * base
        else:
            b = linear_bytes(s, x.out_features, x.in_features, dtype=dtype, module=x.module)
            out[f"{component}:packed"] += n * x.count * b.packed
            out[f"{component}:scales"] += n * x.count * b.scales
    order = {c: i for i, c in enumerate(COMPONENTS)}
    return dict(sorted(out.items(), key=lambda kv: order[kv[0].split(":")[0]]))
