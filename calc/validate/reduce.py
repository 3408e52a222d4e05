"""Smaller copies of a spec that a real device can run, keeping what each check measures.

- `check_depth`: layers for the device checks: 2, or the shortest prefix of the stack that holds
  every (attention type, MLP type) the model has (Gemma 2: one sliding and one global layer;
  Qwen3-Next: 3 linear + 1 full; DeepSeek-V3: its dense layers and one MoE layer);
- `at_depth`: the first `layers` layers, explicit per-layer types cut to match.
- `kv_spec`: that depth at the full attention geometry (H query heads, G KV heads, head_dim:
  all the KV cache depends on), with vocab, MLP and hidden widths halved until the model fits
  `max_params` (or reach 64: Llama 3.1 405B's W_q and W_o alone are then 2 x 64 x 16384 per
  layer, 5.0M parameters over two layers). A layer's KV cache is 2 x G x head_dim x tokens x
  bytes, whatever h is.
- `attention_spec`: one attention layer of 4 query heads (MHA: 4 KV heads, GQA: 2, MQA: 1) at
  the full head_dim, hidden = 4 x head_dim: the score matrix grows as H x n^2, so fewer heads
  let a CPU reach the sequence lengths where n^2 dominates.

>>> from calc.presets import load_preset
>>> s = attention_spec(load_preset("llama-2-70b"))
>>> (s.num_attention_heads, s.n_kv_heads, s.head_dim, s.attention_kind)
(4, 2, 128, 'GQA')
"""

from __future__ import annotations

from calc.params import param_count
from calc.spec import ModelSpec

MIN_WIDTH = 64  # hidden and intermediate never shrink below this
MAX_VOCAB = 4096  # the vocabulary adds nothing to the cache; keep the LM head small


def check_depth(spec: ModelSpec) -> int:
    """Layers for the reduced models: 2, or the shortest prefix holding every layer kind."""
    kinds, seen = set(spec.layer_kinds), set()
    depth = spec.sliding_window_pattern or 2
    for i, kind in enumerate(spec.layer_kinds):
        seen.add(kind)
        if seen == kinds:
            depth = max(depth, i + 1)
            break
    return min(depth, spec.num_hidden_layers)


def at_depth(spec: ModelSpec, layers: int) -> ModelSpec:
    """The first `layers` layers of the model (what kvcalc is evaluated on for a reduced run);
    explicit `layer_types` / `mlp_layer_types` are cut to them, periodic patterns repeat."""
    changes: dict = {"num_hidden_layers": layers}
    if spec.layer_types is not None:
        changes["layer_types"] = list(spec.attention_types[:layers])
    if spec.mlp_layer_types is not None:
        changes["mlp_layer_types"] = list(spec.mlp_types[:layers])
    return spec.replace(**changes)


def kv_spec(spec: ModelSpec, max_params: int, layers: int | None = None) -> ModelSpec:
    """`layers` layers, full attention geometry; vocab/MLP/hidden shrunk to <= max_params."""
    L = layers or check_depth(spec)
    base = at_depth(spec, L)
    h, f = spec.hidden_size, spec.intermediate_size
    fe, fs = spec.moe_intermediate_size, spec.shared_expert_intermediate_size
    V = min(spec.vocab_size, MAX_VOCAB)
    while True:
        out = base.replace(
            hidden_size=h,
            head_dim=spec.head_dim,  # explicit: h no longer has to be H x head_dim
            intermediate_size=f,
            moe_intermediate_size=fe,
            shared_expert_intermediate_size=fs,
            vocab_size=V,
        )
        if param_count(out) <= max_params or (h <= MIN_WIDTH and f <= MIN_WIDTH):
            return out
        h, f = max(MIN_WIDTH, h // 2), max(MIN_WIDTH, f // 2)
        fe, fs = (w if w is None or w <= MIN_WIDTH else max(MIN_WIDTH, w // 2) for w in (fe, fs))


def attention_spec(spec: ModelSpec, max_heads: int | None = 4) -> ModelSpec:
    """One layer with at most `max_heads` query heads, keeping the MHA/GQA/MQA kind.

    `max_heads=None` keeps the model's own heads (a GPU with room for them).
    """
    H, G, d = spec.num_attention_heads, spec.n_kv_heads, spec.head_dim
    if max_heads is not None and H > max_heads:
        kind = spec.attention_kind
        H = max_heads
        G = H if kind == "MHA" else 1 if kind == "MQA" else max(1, H // 2)
    return ModelSpec(
        name=f"{spec.name}-attention",
        num_hidden_layers=1,
        hidden_size=H * d,  # W_o's output is then the size of the attention output
        num_attention_heads=H,
        num_key_value_heads=G,
        head_dim=d,
        intermediate_size=MIN_WIDTH,
        vocab_size=MIN_WIDTH,
        qkv_bias=spec.qkv_bias,
        attn_out_bias=spec.attn_out_bias,
    )
