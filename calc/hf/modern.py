"""config.json -> spec fields for today's families, as transformers 5.x builds them.

qwen3, qwen3_moe, qwen2_moe, qwen3_next, qwen3_5_text, qwen3_5_moe_text, deepseek_v2,
deepseek_v3 (DeepSeek-V3/R1, Kimi K2), deepseek_v32 (DeepSeek-V3.2: MLA with the lightning
indexer, every layer "indexed_attention"), gpt_oss, gemma3_text, llama4_text, glm4, glm4_moe, phi3,
olmo2, olmo3, starcoder2, granite, cohere, exaone4, smollm3; minimax_m2, glm4_moe_lite (GLM-4.7-Flash)
and glm_moe_dsa (GLM-5) with calc/hf/glm_minimax.py. Each `Family` row states what the
model type's modeling code builds (bias flags, norms, q/k norms, MLP kind) and the defaults of
its config class for keys a config.json leaves out (`configuration_<type>.py`).
Per-layer layouts follow each config class's `__post_init__` (layer_types, max_window_layers,
sliding_window_pattern, full_attention_interval, no_rope_layers; first_k_dense_replace,
decoder_sparse_step, mlp_only_layers, interleave_moe_layer_step); an explicit `layer_types` /
`mlp_layer_types` in the file wins.
"""

from __future__ import annotations

from calc.hf.classic import _pattern
from calc.hf.families import (
    ATTENTION_NAMES,
    DEEPSEEK_MLA_DEFAULTS,
    FAMILIES,
    INDEX_DEFAULTS,
    LINEAR_DEFAULTS,
    MLA_DEFAULTS,
    MLA_TYPES,
    MODERN_TYPES,
    Family,
)
from calc.hf.glm_minimax import glm_dsa_check, glm_mlp_types, minimax_m2_fields
from calc.hf.reader import _REQUIRED, _Config
from calc.layout import compact

__all__ = ["FAMILIES", "MODERN_TYPES", "Family", "modern_fields"]


def modern_fields(cfg: _Config, mt: str) -> dict:
    f = FAMILIES[mt]
    L, h = cfg.int("num_hidden_layers"), cfg.int("hidden_size")
    H = cfg.int("num_attention_heads")
    kv = cfg.int("num_key_value_heads", default=f.kv_heads, nullable=True)
    head_dim = cfg.int("head_dim", default=f.head_dim, nullable=True)
    fields = {
        "num_hidden_layers": L,
        "hidden_size": h,
        "num_attention_heads": H,
        "num_key_value_heads": kv,
        "head_dim": head_dim,
        # MoE-only configs (Qwen3.5-MoE) name no dense width: no layer uses it
        "intermediate_size": cfg.int(
            "intermediate_size",
            default=1536  # MiniMaxM2Config: each expert's width
            if mt == "minimax_m2"
            else cfg.data.get("moe_intermediate_size")
            if f.moe == "all"
            else _REQUIRED,
        ),
        "vocab_size": cfg.int("vocab_size", default=f.vocab),
        "max_position_embeddings": cfg.int("max_position_embeddings", default=f.max_pos),
        "hidden_act": cfg.str(
            "hidden_activation", "hidden_act", "activation_function", default="silu"
        ),
        "tie_word_embeddings": cfg.bool("tie_word_embeddings", f.tie),
        "norms_per_block": f.norms,
    }
    fields.update(_biases(cfg, mt, f))
    fields.update(_norms(cfg, mt, f))
    fields.update(_layout(cfg, mt, f, L))
    fields.update(_moe(cfg, mt, f, L))
    if mt in MLA_TYPES:
        fields.update(_mla(cfg, mt))
        fields["num_key_value_heads"] = None  # MLA expands the latent to every head
    if mt in ("qwen3_next", "qwen3_5_text", "qwen3_5_moe_text"):
        fields["attn_output_gate"] = True  # q_proj emits the query and its sigmoid gate
        for key, default in LINEAR_DEFAULTS.items():
            fields[key] = cfg.int(key, default=default)
        fields["mamba_ssm_cache_dtype"] = _gdn_ssm_dtype(cfg)
    if mt == "gpt_oss":
        fields["attention_sinks"] = True
    if mt == "phi3":
        fields["fused_qkv"] = fields["fused_gate_up"] = True
    if mt in ("deepseek_v32", "glm_moe_dsa"):
        for key, default in INDEX_DEFAULTS.items():
            if mt == "glm_moe_dsa" and key == "index_n_heads":
                default = 32  # GlmMoeDsaConfig
            fields[key] = cfg.int(key, default=default)
    if mt == "glm_moe_dsa":
        glm_dsa_check(cfg, L)
    if mt == "minimax_m2":
        fields.update(minimax_m2_fields(cfg, fields["head_dim"] or h // H))
    if mt in ("deepseek_v3", "deepseek_v32", "glm4_moe"):
        fields["num_nextn_predict_layers"] = cfg.int("num_nextn_predict_layers", default=1, low=0)
    if mt in ("glm4_moe_lite", "glm_moe_dsa"):  # no such key in their config classes
        fields["num_nextn_predict_layers"] = cfg.int("num_nextn_predict_layers", default=0, low=0)
    if mt in ("qwen3_next", "qwen3_5_text", "qwen3_5_moe_text"):
        fields["num_nextn_predict_layers"] = _qwen_mtp_layers(cfg)
    return fields


SSM_DTYPES = ("float32", "bfloat16", "float16")  # SGLang's mamba2_state_dtype dtype_map


def _gdn_ssm_dtype(cfg: _Config) -> str | None:
    """config.json `mamba_ssm_dtype`, the Gated DeltaNet recurrent state's dtype: SGLang reads it
    for Qwen3-Next and Qwen3.5 from 0.5.9 (calc/serving/sglang_hybrid.py), vLLM for Qwen3.5 only
    (calc/serving/vllm_mamba.py). Another value SGLang would drop with a warning and vLLM's
    STR_DTYPE_TO_TORCH_DTYPE would not know: refused."""
    value = cfg.data.get("mamba_ssm_dtype")
    if value is not None and value not in SSM_DTYPES:
        raise cfg.fail("mamba_ssm_dtype", f"must be one of {', '.join(SSM_DTYPES)}")
    return value


def _qwen_mtp_layers(cfg: _Config) -> int:
    """Qwen3-Next / 3.5 MTP layers (vLLM qwen3_5_mtp.py; transformers skips mtp.*), sharing the
    model's embedding and LM head; absent: none (Qwen3-Coder-Next stores none)."""
    n = cfg.int("mtp_num_hidden_layers", default=0, low=0)
    if n and cfg.bool("mtp_use_dedicated_embeddings", False):
        raise cfg.fail("mtp_use_dedicated_embeddings", "must be false (shared tables)")
    return n


def _biases(cfg: _Config, mt: str, f: Family) -> dict:
    if f.bias == "use_bias":  # Starcoder2: every Linear and both LayerNorms
        b = cfg.bool("use_bias", True)
        return {"qkv_bias": b, "attn_out_bias": b, "mlp_bias": b, "mlp_kind": "standard",
                "norm_kind": "layernorm"}  # fmt: skip
    if f.bias == "qkv!":  # Qwen2-MoE: q/k/v always carry a bias, o_proj never
        return {"qkv_bias": True, "attn_out_bias": False}
    b = cfg.bool("attention_bias", mt == "gpt_oss") if f.bias else False
    if mt == "gpt_oss":  # experts (gate_up / down) and the router always carry biases
        return {"qkv_bias": b, "attn_out_bias": b, "expert_bias": True, "router_bias": True}
    return {
        "qkv_bias": b,
        "attn_out_bias": b and "o" in f.bias,
        "mlp_bias": cfg.bool("mlp_bias", False)
        if mt in ("granite", "smollm3", "deepseek_v2")
        else False,
    }


def _norms(cfg: _Config, mt: str, f: Family) -> dict:
    out = {"norm_kind": "rmsnorm"}
    if mt == "cohere":  # CohereLayerNorm: weight only; attention and MLP in parallel
        out.update(norm_kind="layernorm_nobias", block_kind="parallel")
        out["qk_norm"] = "full" if cfg.bool("use_qk_norm", False) else "none"
    elif f.qk_norm == "flag":
        out["qk_norm"] = "head" if cfg.bool("use_qk_norm", False) else "none"
    else:
        out["qk_norm"] = f.qk_norm
    if mt == "starcoder2":
        out["norm_kind"] = "layernorm"
    return out


def _layout(cfg: _Config, mt: str, f: Family, L: int) -> dict:
    """Which layers slide, chunk or are linear, as the config class derives it."""
    window = cfg.int("sliding_window", default=f.window, nullable=True)
    types = cfg.data.get("layer_types")
    if f.layout == "max_window" and not cfg.bool("use_sliding_window", False):
        window = None  # Qwen3Config.__post_init__ drops the window
    if types is None:
        types = _default_types(cfg, f, L, window)
    if not (
        isinstance(types, list)
        and len(types) == L
        and all(t in ATTENTION_NAMES or t == "attention" for t in types)
    ):
        raise cfg.fail(
            "layer_types",
            f"must name one of {', '.join(ATTENTION_NAMES)} for each of the {L} layers",
        )
    if set(types) <= {"full_attention", "sliding_attention", "attention"}:
        return _pattern(cfg, "layer_types", types, window, L)
    out: dict = {"sliding_window": window, **compact(types, "layer_types", "layer_pattern")}
    if "chunked_attention" in types:
        out["attention_chunk_size"] = cfg.int("attention_chunk_size", default=8192)
    return out


def _default_types(cfg: _Config, f: Family, L: int, window: int | None) -> list[str]:
    if f.layout == "max_window":  # layers i >= max_window_layers slide (when a window is set)
        first = cfg.int("max_window_layers", default=28, low=0)
        return [
            "sliding_attention" if window and i >= first else "full_attention" for i in range(L)
        ]
    if f.layout == "window":  # Phi-3, Starcoder2: every layer slides when a window is given
        return ["sliding_attention" if window else "full_attention"] * L
    if f.layout == "alternate":  # gpt-oss: even layers slide
        return ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(L)]
    if f.layout in ("every6", "every4"):
        n = cfg.int("sliding_window_pattern", default=6 if f.layout == "every6" else 4)
        return ["sliding_attention" if (i + 1) % n else "full_attention" for i in range(L)]
    if f.layout == "interval":  # Qwen3-Next: every full_attention_interval-th layer is full
        n = cfg.int("full_attention_interval", default=4)
        return ["linear_attention" if (i + 1) % n else "full_attention" for i in range(L)]
    if f.layout == "nope":  # Llama 4: RoPE layers attend in chunks, NoPE layers globally
        nope = cfg.data.get("no_rope_layers")
        if nope is None:
            n = cfg.int("no_rope_layer_interval", default=4)
            nope = [int((i + 1) % n != 0) for i in range(L)]
        if not (isinstance(nope, list) and len(nope) == L):
            raise cfg.fail("no_rope_layers", f"must list 0 or 1 for each of the {L} layers")
        chunked = cfg.data.get("attention_chunk_size", 8192) is not None
        return ["chunked_attention" if x and chunked else "full_attention" for x in nope]
    if f.layout == "indexed":  # DeepseekV32Config.__post_init__: every layer is DSA
        return ["indexed_attention"] * L
    return ["full_attention"] * L


def _moe(cfg: _Config, mt: str, f: Family, L: int) -> dict:
    if not f.moe:
        return {}
    keys = ("num_local_experts", "num_experts", "n_routed_experts")
    E = cfg.int(*keys)
    out = {
        "num_local_experts": E,
        "num_experts_per_tok": cfg.int("num_experts_per_tok"),
        "moe_intermediate_size": cfg.int("moe_intermediate_size", default=None, nullable=True),
    }
    if mt in ("gpt_oss", "minimax_m2"):
        out["moe_intermediate_size"] = None  # each expert is intermediate_size wide
    if mt == "llama4_text":  # experts and the shared expert are intermediate_size wide; dense
        out["moe_intermediate_size"] = cfg.int("intermediate_size")  # MLPs intermediate_size_mlp
        out["intermediate_size"] = cfg.int("intermediate_size_mlp", default=16384)
        out["shared_expert_intermediate_size"] = out["moe_intermediate_size"]
    elif mt in ("qwen2_moe", "qwen3_next", "qwen3_5_moe_text"):  # one gated shared expert
        out["shared_expert_intermediate_size"] = cfg.int(
            "shared_expert_intermediate_size", default=None, nullable=True
        )
        out["shared_expert_gate"] = out["shared_expert_intermediate_size"] is not None
    elif f.moe == "deepseek":
        n = cfg.int(
            "n_shared_experts", default=1 if mt != "deepseek_v2" else 2, nullable=True, low=0
        )
        width = out["moe_intermediate_size"] or cfg.int("intermediate_size")
        out["shared_expert_intermediate_size"] = n * width if n else None
        out["e_score_correction_bias"] = mt in (
            "deepseek_v3",
            "deepseek_v32",
            "glm4_moe",
            "glm4_moe_lite",
            "glm_moe_dsa",
        )  # an fp32 buffer
    mlp = cfg.data.get("mlp_layer_types")
    if mlp is None:
        glm = mt in ("glm4_moe_lite", "glm_moe_dsa")
        mlp = glm_mlp_types(cfg, mt, L) if glm else _mlp_types(cfg, f, L)
    if not (isinstance(mlp, list) and len(mlp) == L and set(mlp) <= {"dense", "sparse"}):
        raise cfg.fail("mlp_layer_types", f"must name dense or sparse for each of the {L} layers")
    out.update(compact(mlp, "mlp_layer_types", "mlp_layer_pattern", default="sparse"))
    return out


def _mlp_types(cfg: _Config, f: Family, L: int) -> list[str]:
    if f.moe == "all":
        return ["sparse"] * L
    if f.moe == "deepseek":  # dense before first_k_dense_replace, then every moe_layer_freq-th
        k = cfg.int("first_k_dense_replace", default=0, low=0)
        freq = cfg.int("moe_layer_freq", default=1)
        return ["sparse" if i >= k and i % freq == 0 else "dense" for i in range(L)]
    if f.moe == "llama4":  # moe_layers, else every interleave_moe_layer_step-th layer
        layers = cfg.data.get("moe_layers")
        if layers is None:
            step = cfg.int("interleave_moe_layer_step", default=1)
            layers = list(range(step - 1, L, step))
        return ["sparse" if i in set(layers) else "dense" for i in range(L)]
    step = cfg.int("decoder_sparse_step", default=1)  # qwen: mlp_only_layers stay dense
    only = cfg.data.get("mlp_only_layers") or []
    return ["sparse" if i not in only and (i + 1) % step == 0 else "dense" for i in range(L)]


def _mla(cfg: _Config, mt: str) -> dict:
    q, kv, nope, rope, v = MLA_DEFAULTS.get(mt, DEEPSEEK_MLA_DEFAULTS)
    return {
        "q_lora_rank": cfg.int("q_lora_rank", default=q, nullable=True),
        "kv_lora_rank": cfg.int("kv_lora_rank", default=kv),
        "qk_nope_head_dim": cfg.int("qk_nope_head_dim", default=nope),
        "qk_rope_head_dim": cfg.int("qk_rope_head_dim", default=rope),
        "v_head_dim": cfg.int("v_head_dim", default=v),
        "head_dim": None,
    }
