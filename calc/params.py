"""Parameter counts, per labelled component; every total is the sum of its breakdown.

Conventions (each matches `sum(p.numel() for p in model.parameters())` of the Hugging Face model
built from the same config):
- tied input/output embeddings are counted once, under "embed" ("lm_head" is then 0);
- biases are counted with the weight they belong to ("attn/q" holds q_proj.weight + q_proj.bias);
- "norm" holds every norm: the blocks', the final one, q/k norms, MLA's latent norms and the
  linear-attention output norm (weight, and bias for LayerNorm);
- a MoE layer's routed experts are "mlp", its shared experts (and their gate) "mlp/shared", its
  router (and router bias) "router"; DeepSeek's e_score_correction_bias is a buffer, not counted;
- "attn/linear" is a Gated-DeltaNet layer (projections, conv, dt_bias, A_log) or a Mamba-2
  mixer (in_proj, out_proj, conv1d weight and bias, dt_bias, A_log, D; its gated RMSNorm over
  heads x head_dim is under "norm");
  "attn/sinks" gpt-oss's per-head sink logits; "attn/indexer" DeepSeek-V3.2's lightning indexer
  (wq_b, wk, weights_proj and its k_norm LayerNorm; DeepSeek-V4's CSA indexer, its compressor
  included); "attn/compressor" DeepSeek-V4's compressors (projections, position bias, norm);
  "hc" its hyper-connections (calc/linears_v4.py); "mtp" DeepSeek's next-token-prediction layers,
  0 unless `include_mtp` (the papers' totals and transformers leave them out).
Every weight matrix is listed once, by `linear_layers` (module names as transformers has them);
the counts and the FLOP-relevant `matmul_params` are sums over that list.

>>> from calc.spec import ModelSpec
>>> s = ModelSpec(name="t", num_hidden_layers=1, hidden_size=4, num_attention_heads=2,
...               intermediate_size=8, vocab_size=10, tie_word_embeddings=True)
>>> param_breakdown(s)["mlp"]   # gated MLP: gate + up + down = 3 * 4 * 8
96
"""

from __future__ import annotations

from calc.layout import NO_KV_TYPES
from calc.linears import Linear, linear_layers, mtp_layer_linears
from calc.spec import ModelSpec

__all__ = [
    "COMPONENTS",
    "Linear",
    "active_param_count",
    "expert_params",
    "linear_layers",
    "matmul_params",
    "non_embedding_param_count",
    "norm_params",
    "layer_breakdown",
    "param_breakdown",
    "param_count",
]

COMPONENTS: tuple[str, ...] = (
    "embed",
    "pos_embed",
    "attn/q",
    "attn/kv",
    "attn/o",
    "attn/linear",
    "attn/sinks",
    "attn/indexer",
    "attn/compressor",
    "mlp",
    "mlp/shared",
    "router",
    "norm",
    "hc",
    "mtp",
    "lm_head",
)


def norm_params(spec: ModelSpec, width: int | None = None) -> int:
    """Parameters of one norm over `width` (default: the hidden size)."""
    w = spec.hidden_size if width is None else width
    return 2 * w if spec.norm_kind == "layernorm" else w  # weight (+ bias for LayerNorm)


def expert_params(spec: ModelSpec) -> int:
    """One routed expert (one MLP for a dense model), weights and biases."""
    from calc.linears import _ffn

    f, bias = spec.expert_intermediate_size, spec.expert_bias if spec.is_moe else spec.mlp_bias
    return sum(x.numel for x in _ffn(spec, "mlp", "", f, 1, bias, False))


def _extras(spec: ModelSpec) -> dict[str, int]:
    """Parameters outside the weight matrices: tables, norms, sinks, conv and decay vectors."""
    h = spec.hidden_size
    out = dict.fromkeys(COMPONENTS, 0)
    out["embed"] = spec.vocab_size * h  # token embedding table
    if spec.position_embedding == "learned":
        out["pos_embed"] = spec.max_position_embeddings * h  # GPT-2 wpe
    counts = spec.attention_counts
    softmax = spec.num_hidden_layers - sum(counts.get(k, 0) for k in NO_KV_TYPES)
    norms = spec.num_hidden_layers * spec.norms_per_block * norm_params(spec)
    norms += norm_params(spec) if spec.final_norm else 0
    H, G, d = spec.num_attention_heads, spec.n_kv_heads, spec.head_dim
    if spec.qk_norm == "head":  # RMSNorm(head_dim) on q and on k (Qwen3, Gemma 3)
        norms += softmax * 2 * d
    elif spec.qk_norm == "full":  # over all heads: H*d for q, G*d for k (OLMo 2, Cohere)
        norms += softmax * (H + G) * d
    if spec.is_mla:  # q_a_layernorm, kv_a_layernorm (RMSNorm over the latent ranks)
        norms += softmax * ((spec.q_lora_rank or 0) + spec.kv_lora_rank)
    if spec.attention_sinks:
        out["attn/sinks"] = softmax * H
    # the lightning indexer's k_norm: nn.LayerNorm(index_head_dim), weight and bias
    out["attn/indexer"] = counts.get("indexed_attention", 0) * 2 * (spec.index_head_dim or 0)
    n_lin = counts.get("linear_attention", 0)
    if n_lin:
        nv, k = spec.linear_num_value_heads, spec.linear_conv_kernel_dim
        from calc.layers import Linear as LinearKind

        conv = LinearKind.conv_dim(spec) * k  # depthwise conv1d weight, no bias
        out["attn/linear"] += n_lin * (conv + 2 * nv)  # + dt_bias and A_log, one per value head
        norms += n_lin * spec.linear_value_head_dim  # gated RMSNorm over one value head
    n_mamba = counts.get("mamba", 0)
    if n_mamba:
        from calc.layers_ssm import Mamba2

        c, k = Mamba2.conv_dim(spec), spec.conv_kernel
        conv = c * k + (c if spec.use_conv_bias else 0)  # depthwise conv1d weight (+ bias)
        out["attn/linear"] += n_mamba * (conv + 3 * spec.mamba_num_heads)  # dt_bias, A_log, D
        norms += n_mamba * spec.mamba_num_heads * spec.mamba_head_dim  # gated RMSNorm weight
    out["norm"] = norms
    if spec.is_v4:  # DeepSeek-V4's norms, compressors, indexer, hyper-connections
        from calc.linears_v4 import v4_vectors

        for key, value in v4_vectors(spec).items():
            out[key] += value
    return out


def _mtp_extras(spec: ModelSpec) -> int:
    """One MTP module besides its matrices: its block's norms (q/k norms, MLA's latent norms),
    enorm, hnorm and the shared head's norm (DeepSeek-V3 report §2.2; its checkpoint's layer 61;
    GLM-4.5's layer 92 is a Glm4MoeDecoderLayer, q_norm / k_norm with use_qk_norm)."""
    block = spec.norms_per_block * norm_params(spec)
    d = spec.head_dim
    if spec.qk_norm == "head":
        block += 2 * d
    elif spec.qk_norm == "full":
        block += (spec.num_attention_heads + spec.n_kv_heads) * d
    if spec.is_mla:
        block += (spec.q_lora_rank or 0) + spec.kv_lora_rank
    if spec.attention_types[-1] == "indexed_attention":  # its indexer's k_norm
        block += 2 * spec.index_head_dim
    return block + 3 * norm_params(spec)  # + enorm, hnorm, shared_head.norm


def param_breakdown(spec: ModelSpec) -> dict[str, int]:
    """Parameters per component over the whole language model, in `COMPONENTS` order (a
    multimodal checkpoint's vision encoder, spec.vision, is not in it: calc.weight_bytes counts
    it)."""
    memo = spec.memo
    if "breakdown" not in memo:
        out = _extras(spec)
        for lin in linear_layers(spec):
            out[lin.component] += lin.count * lin.numel
        if spec.include_mtp:
            mtp = sum(lin.count * lin.numel for lin in mtp_layer_linears(spec))
            out["mtp"] = spec.num_nextn_predict_layers * (mtp + _mtp_extras(spec))
        memo["breakdown"] = out
    return dict(memo["breakdown"])


def layer_breakdown(spec: ModelSpec, layer: int = 0) -> dict[str, int]:
    """One decoder block (the one at index `layer`), by component: its matrices and biases,
    its norms (block, q/k, latent) and per-layer vectors (sinks, conv, decay)."""
    from calc.linears import _attention, _mlp

    L = spec.num_hidden_layers
    if isinstance(layer, bool) or not isinstance(layer, int) or not -L <= layer < L:
        raise ValueError(f"'layer' must be a layer index < {L}: got {layer!r}")
    kind, mlp = spec.layer_kinds[layer]
    one = spec.replace(
        num_hidden_layers=1, layer_types=[kind], layer_pattern=None, mlp_layer_types=[mlp],
        mlp_layer_pattern=None, sliding_window_pattern=None, tie_word_embeddings=True,
        position_embedding="rope", final_norm=False, include_mtp=False,
    )  # fmt: skip
    out = _extras(one)
    out["embed"] = 0
    block = _attention(one, kind, 1, "") + _mlp(one, mlp, 1, "")
    if one.is_v4:  # the block's two hyper-connections (final_norm off: no HyperHead)
        from calc.linears_v4 import v4_hyper_connections

        block += v4_hyper_connections(one)
    for lin in block:
        out[lin.component] += lin.count * lin.numel  # routed experts: E matrices per layer
    return {k: v for k, v in out.items() if k not in ("embed", "pos_embed", "lm_head", "mtp")}


def param_count(spec: ModelSpec) -> int:
    """Total parameters of the language model, tied weights counted once (a multimodal
    checkpoint's vision encoder is left out: calc/vision.py vision_params counts it)."""
    return sum(param_breakdown(spec).values())


def active_param_count(spec: ModelSpec) -> int:
    """Parameters a token passes through: a MoE layer uses `num_experts_per_tok` of its routed
    experts (shared experts, the router and everything else always)."""
    idle = sum((lin.count - lin.active_count(spec)) * lin.numel for lin in linear_layers(spec))
    return param_count(spec) - idle


def non_embedding_param_count(spec: ModelSpec) -> int:
    """Total less the token and position tables (an untied LM head is kept, as Kaplan et al.)."""
    b = param_breakdown(spec)
    return sum(b.values()) - b["embed"] - b["pos_embed"]


def matmul_params(spec: ModelSpec, active: bool = True) -> int:
    """Weights that multiply an activation once per token: the FLOP-relevant count.

    Every matrix of `linear_layers` (no biases, norms or embedding lookups: adds, not
    multiply-adds), the LM head even when tied (it is still a V x h matmul); with `active`, a MoE
    layer counts only the routed experts a token goes to. MTP layers are not run per token.
    """
    key = ("matmul", active)
    memo = spec.memo
    if key not in memo:
        total = 0
        for lin in linear_layers(spec):
            n = lin.active_count(spec) if active else lin.count
            total += n * lin.in_features * lin.out_features
        if spec.tie_word_embeddings:
            total += spec.vocab_size * spec.hidden_size
        memo[key] = total
    return memo[key]
