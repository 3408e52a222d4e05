"""A whole decoder built from a `ModelSpec`: the module whose parameters and FLOPs are measured.

Covers every architecture among the presets:
- sequential pre-norm blocks with a gated MLP (LLaMA, Mistral, Qwen2 with q/k/v biases, Gemma
  with its explicit head_dim and tied embeddings), and Gemma 2's four "sandwich" norms;
- GPT: learned positions, LayerNorm with bias, a 2-matrix GELU MLP, biases everywhere;
- parallel attention + MLP (PaLM, Falcon 7B with one norm, Falcon 40B/180B with two);
- mixture of experts (`mlp.MoE`): a router (with a bias: gpt-oss) and `num_local_experts`
  MLPs, top-k per token, shared experts and their gate (Qwen2-MoE, DeepSeek), on the layers
  `spec.mlp_types` marks sparse (DeepSeek's first dense layers stay dense);
- per layer, `spec.attention_types`: full and sliding (a ring of `window` slots) and chunked
  (Llama 4) GQA with q/k norms, sinks and an output gate (`attention.GQAAttention`), MLA
  (`mla.MLAAttention`, latent cache), MLA with DeepSeek-V3.2's lightning indexer
  (`indexer.IndexedMLAAttention`, latent + indexer key cache, top-k sparse attention) and
  Gated-DeltaNet linear attention (`deltanet.GatedDeltaNet`, a constant state), Mamba-2 mixers
  (`mamba2.Mamba2Mixer`, a constant conv + SSM state) and "none": no mixer (Nemotron-H's MLP /
  MoE blocks, no cache); `spec.mlp_types` "none": no MLP (Nemotron-H's mixer-only blocks).

Parameter names map onto `calc.params.COMPONENTS` through `component_of` (W_q -> "attn/q",
W_k/W_v -> "attn/kv", ...), so `numel` per component can be compared with `param_breakdown`.
But: no RoPE/ALiBi, no Gemma embedding scaling or (1 + w) norms, no logit soft-capping: none of
them has a parameter or a matmul, so none changes what is measured. No multi-token-prediction
modules (`include_mtp` is refused).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from calc.spec import ModelSpec
from calc.validate.attention import GQAAttention, KVCache
from calc.validate.deltanet import GatedDeltaNet
from calc.validate.indexer import IndexedMLAAttention
from calc.validate.mamba2 import Mamba2Mixer, NoState
from calc.validate.mla import MLAAttention
from calc.validate.mlp import MLP, MoE

# --- parts ------------------------------------------------------------------------------------


def make_norm(spec: ModelSpec) -> nn.Module:
    h = spec.hidden_size
    if spec.norm_kind == "rmsnorm":
        return nn.RMSNorm(h)  # weight only
    return nn.LayerNorm(h, bias=spec.norm_kind == "layernorm")  # weight (+ bias)


def make_attention(spec: ModelSpec, kind: str) -> nn.Module | None:
    """One layer's attention module for a layer type of `spec.attention_types` (None: "none")."""
    if kind == "none":  # a mixer-less block
        return None
    if kind == "mamba":
        return Mamba2Mixer(spec)
    if kind == "linear_attention":
        return GatedDeltaNet(spec)
    if kind == "indexed_attention":  # DeepSeek-V3.2: MLA + the lightning indexer
        return IndexedMLAAttention(spec)
    if spec.is_mla:
        if kind == "chunked_attention":
            raise ValueError("'spec' must not combine MLA with chunked attention layers")
        return MLAAttention(spec, window=spec.sliding_window if kind != "full_attention" else None)
    return GQAAttention.from_spec(spec, kind=kind)


# --- block ------------------------------------------------------------------------------------


class Block(nn.Module):
    """One decoder layer; norm names end in "_norm" (they count under "norm")."""

    def __init__(self, spec: ModelSpec, layer: int) -> None:
        super().__init__()
        self.parallel = spec.block_kind == "parallel"
        self.norms = spec.norms_per_block
        self.attn = make_attention(spec, spec.attention_types[layer])
        mlp = spec.mlp_types[layer]
        self.mlp = MoE(spec) if mlp == "sparse" else MLP(spec) if mlp == "dense" else None
        self.input_norm = make_norm(spec)  # before attention (and the MLP when alone)
        if self.norms >= 2:
            self.mlp_norm = make_norm(spec)  # before the MLP (Falcon 40B: ln_mlp)
        if self.norms == 4:  # Gemma 2: each sublayer's output is normed before the residual
            self.post_attn_norm = make_norm(spec)
            self.post_mlp_norm = make_norm(spec)

    def forward(self, x, cache=None, *, path="materialized", causal=True) -> torch.Tensor:
        if self.attn is None:  # no mixer ("none"): the block is its MLP
            if cache is not None:
                cache.length += x.shape[1]
            m = self.mlp(self.mlp_norm(x) if self.norms >= 2 else self.input_norm(x))
            return x + (self.post_mlp_norm(m) if self.norms == 4 else m)
        a_in = self.input_norm(x)
        if self.parallel:  # PaLM / Falcon: x + attn(norm(x)) + mlp(norm'(x))
            m_in = self.mlp_norm(x) if self.norms == 2 else a_in
            a = self.attn(a_in, cache, path=path, causal=causal)
            return x + a + (self.mlp(m_in) if self.mlp is not None else 0)
        a = self.attn(a_in, cache, path=path, causal=causal)
        x = x + (self.post_attn_norm(a) if self.norms == 4 else a)
        if self.mlp is None:  # no MLP (Nemotron-H's Mamba and attention blocks)
            return x
        m = self.mlp(self.mlp_norm(x) if self.norms >= 2 else self.input_norm(x))
        return x + (self.post_mlp_norm(m) if self.norms == 4 else m)


# --- decoder ----------------------------------------------------------------------------------


class Decoder(nn.Module):
    """Token ids [B, n] -> logits [B, n, V], with an optional `KVCache` for decoding."""

    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        if spec.include_mtp:
            raise ValueError("'include_mtp' must be False: the reference decoder has no MTP layers")
        self.spec = spec
        self.embed = nn.Embedding(spec.vocab_size, spec.hidden_size)
        if spec.position_embedding == "learned":  # GPT's wpe
            self.pos_embed = nn.Embedding(spec.max_position_embeddings, spec.hidden_size)
        self.blocks = nn.ModuleList(Block(spec, i) for i in range(spec.num_hidden_layers))
        if spec.final_norm:
            self.final_norm = make_norm(spec)
        if not spec.tie_word_embeddings:
            self.lm_head = nn.Linear(spec.hidden_size, spec.vocab_size, bias=False)

    def new_cache(self, batch: int, max_tokens: int, dtype=None, device=None) -> KVCache:
        w = self.embed.weight
        dtype, device = dtype or w.dtype, device or w.device
        return KVCache(
            [
                NoState() if b.attn is None else b.attn.new_cache(batch, max_tokens, dtype, device)
                for b in self.blocks
            ]
        )

    def forward(self, tokens, cache: KVCache | None = None, *, path="materialized", causal=True):
        B, n = tokens.shape
        x = self.embed(tokens)  # [B, n, h]
        if hasattr(self, "pos_embed"):
            start = cache.length if cache is not None else 0
            x = x + self.pos_embed(torch.arange(start, start + n, device=tokens.device))
        for i, block in enumerate(self.blocks):
            layer_cache = cache.layers[i] if cache is not None else None
            x = block(x, layer_cache, path=path, causal=causal)
        if hasattr(self, "final_norm"):
            x = self.final_norm(x)
        head = self.lm_head.weight if hasattr(self, "lm_head") else self.embed.weight  # tied
        return F.linear(x, head)  # [B, n, V]: every position, as kvcalc counts the LM head


def build_decoder(spec: ModelSpec, device="cpu", dtype=None, seed: int | None = 0) -> Decoder:
    """The decoder on `device` ("meta" allocates nothing: any size builds in milliseconds)."""
    if seed is not None and str(device) != "meta":
        torch.manual_seed(seed)
    default = torch.get_default_dtype()
    try:  # build in `dtype` directly: a bf16 model never exists in fp32 first (2x the memory)
        torch.set_default_dtype(dtype or default)
        with torch.device(device):
            model = Decoder(spec)
    finally:
        torch.set_default_dtype(default)
    return model.eval()


# --- parameters by component ------------------------------------------------------------------

_LEAF_COMPONENT = {  # the module owning a parameter -> its component
    "embed": "embed",
    "pos_embed": "pos_embed",
    "W_q": "attn/q",
    "q_proj": "attn/q",
    "q_a_proj": "attn/q",
    "q_b_proj": "attn/q",
    "W_k": "attn/kv",
    "W_v": "attn/kv",
    "kv_a_proj_with_mqa": "attn/kv",
    "kv_b_proj": "attn/kv",
    "W_o": "attn/o",
    "o_proj": "attn/o",
    "in_proj_qkvz": "attn/linear",
    "in_proj": "attn/linear",  # Mamba-2: z, x, B, C, dt
    "in_proj_ba": "attn/linear",
    "conv1d": "attn/linear",
    "out_proj": "attn/linear",
    "router": "router",
    "shared_expert_gate": "mlp/shared",
    "lm_head": "lm_head",
}
_PARAM_COMPONENT = {  # bare parameters of an attention / mixer module
    "sinks": "attn/sinks",
    "dt_bias": "attn/linear",
    "A_log": "attn/linear",
    "D": "attn/linear",  # Mamba-2's skip, one per head
}


def component_of(param_name: str) -> str:
    """'blocks.3.attn.W_k.bias' -> 'attn/kv'; raises on a name no component claims."""
    parts = param_name.split(".")
    owner = parts[-2] if len(parts) >= 2 else ""
    if parts[-1] in _PARAM_COMPONENT:  # a bare parameter of an attention module
        return _PARAM_COMPONENT[parts[-1]]
    if owner in _LEAF_COMPONENT:
        return _LEAF_COMPONENT[owner]
    if "indexer" in parts:  # V3.2's wq_b, wk, weights_proj and its k_norm (weight and bias)
        return "attn/indexer"
    if owner.endswith("norm"):  # block, q/k, MLA latent norms; DeltaNet's / Mamba-2's gated norm
        return "norm"
    if "shared_experts" in parts:
        return "mlp/shared"
    if "mlp" in parts:  # MLP(...) or MoE experts (the router is caught above)
        return "mlp"
    raise KeyError(f"no component for parameter {param_name!r}")


def numel_by_component(model: nn.Module) -> dict[str, int]:
    """Sum of numel per component; tied weights appear once in `named_parameters()`."""
    from calc.params import COMPONENTS

    out = dict.fromkeys(COMPONENTS, 0)
    for name, p in model.named_parameters():
        out[component_of(name)] += p.numel()
    return out
