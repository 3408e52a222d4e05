"""config.json -> spec fields for the 2023 families: llama, mistral, mixtral, qwen2, gemma, gemma2,
falcon (new, old and the legacy RefinedWeb configs) and gpt2."""

from __future__ import annotations

from typing import NamedTuple

from calc.hf.reader import _Config
from calc.layout import compact


class _Defaults(NamedTuple):
    """Defaults of the transformers 5.x config class, for keys absent from config.json."""

    kv_heads: int | None  # None: = num_attention_heads (set in __post_init__)
    head_dim: int | None  # None: hidden_size // num_attention_heads
    tie: bool
    max_pos: int
    window: int | None  # sliding_window
    act: str


_LLAMA_LIKE = {  # transformers/models/<type>/configuration_<type>.py, transformers 5.x
    "llama": _Defaults(None, None, False, 2048, None, "silu"),
    "mistral": _Defaults(8, None, False, 4096 * 32, 4096, "silu"),
    "mixtral": _Defaults(8, None, False, 4096 * 32, None, "silu"),
    "qwen2": _Defaults(32, None, False, 32768, 4096, "silu"),
    "gemma": _Defaults(16, 256, True, 8192, None, "gelu_pytorch_tanh"),
    "gemma2": _Defaults(4, 256, True, 8192, 4096, "gelu_pytorch_tanh"),
}


def _llama_like(cfg: _Config, mt: str) -> dict:
    d = _LLAMA_LIKE[mt]
    attention_bias = (
        cfg.bool("attention_bias", False) if mt in ("llama", "gemma", "gemma2") else False
    )
    fields = {
        "num_hidden_layers": cfg.int("num_hidden_layers"),
        "hidden_size": cfg.int("hidden_size"),
        "num_attention_heads": cfg.int("num_attention_heads"),
        # absent: the class default; null: "= num_attention_heads" (Llama, Qwen2, Mistral and
        # Mixtral __post_init__), "hidden_size // heads" (Llama, Mistral, Mixtral head_dim);
        # Gemma's int-typed fields refuse null, as transformers' strict config does.
        "num_key_value_heads": cfg.int(
            "num_key_value_heads", default=d.kv_heads, nullable=mt not in ("gemma", "gemma2")
        ),
        "head_dim": cfg.int(
            "head_dim", default=d.head_dim, nullable=mt in ("llama", "mistral", "mixtral")
        ),
        "intermediate_size": cfg.int("intermediate_size"),
        "vocab_size": cfg.int("vocab_size"),
        "max_position_embeddings": cfg.int("max_position_embeddings", default=d.max_pos),
        "mlp_kind": "gated",  # gate_proj, up_proj, down_proj (Mixtral: per expert)
        "hidden_act": cfg.str("hidden_activation", "hidden_act", default=d.act),
        "tie_word_embeddings": cfg.bool("tie_word_embeddings", d.tie),
        # Qwen2Attention: q/k/v_proj bias=True, o_proj bias=False, whatever the config says;
        # Mistral/Mixtral/Qwen2 build every other Linear with bias=False.
        "qkv_bias": True if mt == "qwen2" else attention_bias,
        "attn_out_bias": attention_bias,
        "mlp_bias": cfg.bool("mlp_bias", False) if mt == "llama" else False,
        "norm_kind": "rmsnorm",
        "norms_per_block": 4 if mt == "gemma2" else 2,  # Gemma 2: pre/post attn, pre/post MLP
        "position_embedding": "rope",
        "block_kind": "sequential",
    }
    heads = fields["num_attention_heads"]
    if not cfg.has("num_key_value_heads") and d.kv_heads and heads % d.kv_heads:
        raise ValueError(
            f"{cfg.origin}: 'num_key_value_heads' is absent, and {mt}'s default of "
            f"{d.kv_heads} must divide num_attention_heads={heads}"
        )
    fields.update(_sliding(cfg, mt, fields["num_hidden_layers"]))
    if mt == "mixtral":
        experts = cfg.int("num_local_experts", "num_experts", default=8)
        if experts < 2:  # kvcalc reads 1 expert as a dense MLP, but Mixtral still has a router
            raise cfg.fail("num_local_experts", "must be >= 2 for mixtral")
        fields["num_local_experts"] = experts
        fields["num_experts_per_tok"] = cfg.int("num_experts_per_tok", default=2)
    return fields


def _sliding(cfg: _Config, mt: str, n_layers: int) -> dict:
    """sliding_window / sliding_window_pattern as transformers reads them for this model type."""
    if mt in ("llama", "gemma"):
        return {}
    if mt == "qwen2" and not cfg.bool("use_sliding_window", False):
        return {"sliding_window": None}  # Qwen2Config.__post_init__ drops the window
    window = cfg.int("sliding_window", default=_LLAMA_LIKE[mt].window, nullable=True)
    if window is None:
        return {"sliding_window": None}
    if cfg.data.get("layer_types") is not None:  # honoured by the cache (and Mistral's mask)
        types, key = cfg.data["layer_types"], "layer_types"
    elif mt in ("mistral", "mixtral"):
        return {"sliding_window": window}  # every layer slides
    elif mt == "qwen2":  # Qwen2Config: layers i >= max_window_layers slide
        first = cfg.int("max_window_layers", default=28, low=0)
        types = ["sliding_attention" if i >= first else "full_attention" for i in range(n_layers)]
        key = "max_window_layers"
    else:  # Gemma2Config: even layers (0, 2, ...) slide, odd layers are global
        types = ["sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(n_layers)]
        key = "layer_types"
    return _pattern(cfg, key, types, window, n_layers)


def _pattern(cfg: _Config, key: str, types: object, window: int | None, n_layers: int) -> dict:
    """Spec fields for a per-layer list of full / sliding attention: the compact forms (all,
    none, every N-th global) where they fit, else the runs themselves."""
    full_names = ("full_attention", "attention")  # "attention": transformers' legacy name
    ok = isinstance(types, list) and len(types) == n_layers
    ok = ok and all(t in full_names or t == "sliding_attention" for t in types)
    if not ok:
        raise cfg.fail(
            "layer_types",
            f"must list 'full_attention' or 'sliding_attention' for each of the {n_layers} layers",
        )
    sliding = [t == "sliding_attention" for t in types]
    if not any(sliding):
        return {"sliding_window": None}
    if window is None:
        raise cfg.fail("sliding_window", "must be set when layer_types has sliding_attention")
    if all(sliding):
        return {"sliding_window": window}
    for n in range(2, n_layers + 1):  # every n-th layer (1-based) global: spec.layer_is_sliding
        if sliding == [(i + 1) % n != 0 for i in range(n_layers)]:
            return {"sliding_window": window, "sliding_window_pattern": n}
    names = ["sliding_attention" if x else "full_attention" for x in sliding]
    return {"sliding_window": window, **compact(names, "layer_types", "layer_pattern")}


def _falcon(cfg: _Config, legacy: bool) -> dict:
    heads = cfg.int("num_attention_heads", "n_head")
    hidden = cfg.int("hidden_size", "n_embed")
    # transformers' falcon/convert_custom_code_checkpoint.py: a legacy config with n_head_kv is
    # the new (Falcon-40B) decoder; without it, the old (Falcon-7B) one.
    new = cfg.bool("new_decoder_architecture", legacy and cfg.has("n_head_kv"))
    kv_heads = cfg.int("num_kv_heads", "n_head_kv", default=None, nullable=True)
    multi_query = cfg.bool("multi_query", True)
    parallel = cfg.bool("parallel_attn", True)
    n_ln = cfg.int("num_ln_in_parallel_attn", default=None, nullable=True)
    if cfg.data.get("head_dim") not in (None, hidden // heads):  # FalconConfig.head_dim: property
        raise cfg.fail("head_dim", "is fixed to hidden_size // num_attention_heads for falcon")
    if new:  # FalconAttention: qkv rows (2 * num_kv_heads + heads) * head_dim
        if not parallel:
            raise cfg.fail("parallel_attn", "must be true with new_decoder_architecture")
        if n_ln not in (None, 1, 2):
            raise cfg.fail("num_ln_in_parallel_attn", "must be 1 or 2")
        groups, block, norms = kv_heads or heads, "parallel", n_ln or 2  # ln_attn + ln_mlp
    else:  # qkv rows: hidden + 2 * head_dim (multi_query) or 3 * hidden
        if not multi_query and kv_heads not in (None, heads):
            raise cfg.fail("num_kv_heads", "must equal num_attention_heads without multi_query")
        if parallel and n_ln not in (None, 1):
            raise cfg.fail("num_ln_in_parallel_attn", "must be 1 without new_decoder_architecture")
        groups = 1 if multi_query else heads
        block, norms = ("parallel", 1) if parallel else ("sequential", 2)
    bias = cfg.bool("bias", False)  # every Linear in the block
    ffn = cfg.int("ffn_hidden_size", default=None, nullable=True)
    return {
        "num_hidden_layers": cfg.int("num_hidden_layers", "n_layer"),
        "hidden_size": hidden,
        "num_attention_heads": heads,
        "num_key_value_heads": groups,
        "intermediate_size": ffn or 4 * hidden,  # FalconConfig: ffn_hidden_size = 4 x hidden
        "vocab_size": cfg.int("vocab_size"),
        "max_position_embeddings": cfg.int("max_position_embeddings", default=2048),
        "mlp_kind": "standard",  # dense_h_to_4h, dense_4h_to_h
        "hidden_act": cfg.str("activation", default="gelu"),
        "tie_word_embeddings": cfg.bool("tie_word_embeddings", True),
        "qkv_bias": bias,
        "attn_out_bias": bias,
        "mlp_bias": bias,
        "norm_kind": "layernorm",
        "norms_per_block": norms,
        "position_embedding": "alibi" if cfg.bool("alibi", False) else "rope",
        "block_kind": block,
    }


def _gpt2(cfg: _Config) -> dict:
    hidden = cfg.int("n_embd", "hidden_size")
    if cfg.bool("add_cross_attention", False):
        raise cfg.fail("add_cross_attention", "must be false (encoder-decoders are not modelled)")
    n_inner = cfg.int("n_inner", default=None, nullable=True)
    return {
        "num_hidden_layers": cfg.int("n_layer", "num_hidden_layers"),
        "hidden_size": hidden,
        "num_attention_heads": cfg.int("n_head", "num_attention_heads"),
        "intermediate_size": n_inner or 4 * hidden,  # GPT2Block: n_inner None -> 4 x n_embd
        "vocab_size": cfg.int("vocab_size"),
        "max_position_embeddings": cfg.int("n_positions", "max_position_embeddings", default=1024),
        "mlp_kind": "standard",  # c_fc, c_proj
        "hidden_act": cfg.str("activation_function", default="gelu_new"),
        "tie_word_embeddings": cfg.bool("tie_word_embeddings", True),
        "qkv_bias": True,  # Conv1D layers all carry a bias
        "attn_out_bias": True,
        "mlp_bias": True,
        "norm_kind": "layernorm",
        "norms_per_block": 2,  # ln_1, ln_2
        "position_embedding": "learned",  # wpe: n_positions x n_embd
        "block_kind": "sequential",
    }
