"""ModelSpec -> Hugging Face config dict: the transformers model with the spec's shapes.

`to_hf_config(spec)` picks a model_type transformers implements (the spec's family first) whose
modules have exactly the spec's parameter and KV-cache shapes, and fills in its config keys:
`AutoModelForCausalLM.from_config(AutoConfig.for_model(**d))` then builds it. Used to build
reference models in tests and in validation; `calc.hf.from_hf_config` reads the dict back.

But: the rotary fields (rope_scaling, partial_rotary_factor, rope_local_base_freq: the cos/sin
table an engine keeps, no shape) are not written; it refuses what no supported type expresses (PaLM: parallel block with a gated MLP and
bias-less LayerNorm; learned positions without GPT-2's biases; ...), naming each type's reason.
"""

from __future__ import annotations

from calc.spec import ModelSpec


class _Unfit(Exception):
    """This model_type cannot express the spec; the message says why."""


def _need(ok: bool, reason: str) -> None:
    if not ok:
        raise _Unfit(reason)


def to_hf_config(spec: ModelSpec, model_type: str | None = None) -> dict:
    """A transformers config dict (`AutoConfig.for_model(**d)`) with the spec's shapes.

    Tries `model_type` if given, else the spec's family and then every supported type in
    turn; raises ValueError with each type's reason when none fits.

    >>> from calc.presets import load_preset
    >>> d = to_hf_config(load_preset("llama-2-70b"))
    >>> d["model_type"], d["num_key_value_heads"]
    ('llama', 8)
    """
    modern = modern_features(spec)
    if modern:
        raise ValueError(
            f"transformers has no model_type for {spec.name!r} among the exported 2023 families "
            f"({', '.join(_EXPORTERS)}): it has {modern}; build it from its own config.json"
        )
    if model_type is not None:
        if model_type not in _EXPORTERS:
            supported = ", ".join(_EXPORTERS)
            raise ValueError(f"'model_type' must be one of {supported}: got {model_type!r}")
        order = [model_type]
    else:
        order = sorted(_EXPORTERS, key=lambda mt: mt != spec.family)  # family first, stable
    reasons: dict[str, list[str]] = {}  # reason -> the types it rules out
    for mt in order:
        try:
            return _EXPORTERS[mt](spec)
        except _Unfit as unfit:
            e = unfit
            reasons.setdefault(str(e), []).append(mt)
    if model_type is not None:
        raise ValueError(f"{spec.name!r} cannot be transformers model_type {model_type!r}: {e}")
    why = "; ".join(f"{', '.join(mts)}: {reason}" for reason, mts in reasons.items())
    raise ValueError(f"transformers has no model_type for {spec.name!r} ({why})")


# fields the 2023 families' exporters below do not express
_MODERN_FIELDS = (
    "kv_lora_rank", "attention_chunk_size", "linear_num_key_heads", "moe_intermediate_size",
    "shared_expert_intermediate_size", "router_bias", "e_score_correction_bias", "qk_norm",
    "attention_sinks", "attn_output_gate", "fused_qkv", "fused_gate_up",
    "num_nextn_predict_layers", "mlp_layer_types", "mlp_layer_pattern", "o_groups",
)  # fmt: skip


def modern_features(spec: ModelSpec) -> str:
    given = spec.model_dump(exclude_defaults=True)
    found = [f for f in _MODERN_FIELDS if f in given]
    return ", ".join(f"{f}={given[f]!r}" for f in found)


def _base(spec: ModelSpec, mt: str) -> dict:
    return {
        "model_type": mt,
        "_name_or_path": spec.name,
        "num_hidden_layers": spec.num_hidden_layers,
        "hidden_size": spec.hidden_size,
        "num_attention_heads": spec.num_attention_heads,
        "intermediate_size": spec.intermediate_size,
        "vocab_size": spec.vocab_size,
        "max_position_embeddings": spec.max_position_embeddings,
        "tie_word_embeddings": spec.tie_word_embeddings,
    }


def _layer_types(spec: ModelSpec) -> list[str]:
    return ["sliding_attention" if s else "full_attention" for s in spec.layer_is_sliding]


def _export_llama_like(spec: ModelSpec, mt: str) -> dict:
    _need(spec.mlp_kind == "gated", f"needs a gated MLP: got {spec.mlp_kind}")
    _need(spec.norm_kind == "rmsnorm", f"needs RMSNorm: got {spec.norm_kind}")
    _need(spec.block_kind == "sequential", f"needs a sequential block: got {spec.block_kind}")
    _need(spec.position_embedding == "rope", f"needs RoPE: got {spec.position_embedding}")
    _need(spec.final_norm, "needs a final norm")
    norms = 4 if mt == "gemma2" else 2
    _need(
        spec.norms_per_block == norms, f"needs {norms} norms per block: got {spec.norms_per_block}"
    )
    _need(spec.is_moe == (mt == "mixtral"), "mixtral alone is MoE")
    if mt == "qwen2":  # q/k/v biased, o_proj and MLP not
        ok = spec.qkv_bias and not spec.attn_out_bias and not spec.mlp_bias
        _need(ok, "needs q/k/v biases only")
    elif mt in ("mistral", "mixtral"):
        _need(not (spec.qkv_bias or spec.attn_out_bias or spec.mlp_bias), "has no biases")
    else:  # attention_bias covers q, k, v and o together
        _need(spec.qkv_bias == spec.attn_out_bias, "needs q/k/v and o biases alike")
        _need(mt == "llama" or not spec.mlp_bias, "has no MLP biases")
    if mt in ("llama", "gemma"):
        _need(spec.sliding_window is None, "has no sliding window")
    if mt in ("mistral", "mixtral"):
        _need(spec.sliding_window_pattern is None, "slides on every layer or none")
    if mt in ("llama", "gemma2"):  # their validate_architecture(), even with head_dim given
        _need(spec.hidden_size % spec.num_attention_heads == 0, "needs hidden_size % heads == 0")
    d = _base(spec, mt)
    d["num_key_value_heads"] = spec.n_kv_heads
    d["head_dim"] = spec.head_dim
    d["hidden_activation" if mt == "gemma2" else "hidden_act"] = spec.hidden_act
    if mt in ("llama", "gemma", "gemma2"):
        d["attention_bias"] = spec.qkv_bias
    if mt == "llama":
        d["mlp_bias"] = spec.mlp_bias
    if mt in ("mistral", "mixtral"):
        d["sliding_window"] = spec.sliding_window
    if mt == "mixtral":
        d["num_local_experts"] = spec.num_local_experts
        d["num_experts_per_tok"] = spec.num_experts_per_tok
    if mt == "qwen2":
        d["use_sliding_window"] = spec.sliding_window is not None
        d["sliding_window"] = spec.sliding_window
        d["layer_types"] = _layer_types(spec)
    if mt == "gemma2":  # Gemma2Model builds a sliding mask even when every layer is full
        d["sliding_window"] = spec.sliding_window or spec.max_position_embeddings
        d["layer_types"] = _layer_types(spec)
    return d


def _export_falcon(spec: ModelSpec) -> dict:
    H, G = spec.num_attention_heads, spec.n_kv_heads
    _need(spec.mlp_kind == "standard", f"needs a standard (2-matrix) MLP: got {spec.mlp_kind}")
    _need(spec.norm_kind == "layernorm", f"needs LayerNorm with bias: got {spec.norm_kind}")
    _need(spec.position_embedding != "learned", "has no learned positions")
    _need(spec.final_norm and not spec.is_moe and spec.sliding_window is None, "dense, no window")
    biases = {spec.qkv_bias, spec.attn_out_bias, spec.mlp_bias}
    _need(len(biases) == 1, "one 'bias' flag covers every Linear")
    _need(spec.head_dim * H == spec.hidden_size, "head_dim is hidden_size // heads")
    shape = (spec.block_kind, spec.norms_per_block)
    old = G in (1, H) and shape in (("sequential", 2), ("parallel", 1))
    _need(old or shape in (("parallel", 1), ("parallel", 2)), f"no Falcon block is {shape}")
    d = _base(spec, "falcon")
    del d["intermediate_size"]
    d.update(
        ffn_hidden_size=spec.intermediate_size,
        bias=spec.qkv_bias,
        alibi=spec.position_embedding == "alibi",
        activation=spec.hidden_act,
        new_decoder_architecture=not old,
        multi_query=old and G == 1,
        parallel_attn=spec.block_kind == "parallel",
        num_kv_heads=G,
        num_ln_in_parallel_attn=None if old else spec.norms_per_block,
    )
    return d


def _export_gpt2(spec: ModelSpec) -> dict:
    _need(
        spec.position_embedding == "learned",
        f"needs learned positions: got {spec.position_embedding}",
    )
    ok = (spec.mlp_kind, spec.norm_kind, spec.block_kind, spec.norms_per_block) == (
        "standard",
        "layernorm",
        "sequential",
        2,
    )
    _need(ok, "needs a sequential block of LayerNorm + GELU MLP")
    _need(spec.qkv_bias and spec.attn_out_bias and spec.mlp_bias, "biases everywhere")
    _need(
        spec.attention_kind == "MHA"
        and spec.head_dim * spec.num_attention_heads == spec.hidden_size,
        "MHA",
    )
    _need(spec.final_norm and not spec.is_moe and spec.sliding_window is None, "dense, no window")
    return {
        "model_type": "gpt2",
        "_name_or_path": spec.name,
        "n_layer": spec.num_hidden_layers,
        "n_embd": spec.hidden_size,
        "n_head": spec.num_attention_heads,
        "n_inner": spec.intermediate_size,
        "n_positions": spec.max_position_embeddings,
        "vocab_size": spec.vocab_size,
        "activation_function": spec.hidden_act,
        "tie_word_embeddings": spec.tie_word_embeddings,
    }


_EXPORTERS = {  # preference order when the family does not name a type
    "llama": lambda s: _export_llama_like(s, "llama"),
    "qwen2": lambda s: _export_llama_like(s, "qwen2"),
    "mistral": lambda s: _export_llama_like(s, "mistral"),
    "mixtral": lambda s: _export_llama_like(s, "mixtral"),
    "gemma2": lambda s: _export_llama_like(s, "gemma2"),
    "gemma": lambda s: _export_llama_like(s, "gemma"),
    "falcon": _export_falcon,
    "gpt2": _export_gpt2,
}
