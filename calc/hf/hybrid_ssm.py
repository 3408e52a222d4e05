"""config.json -> spec fields for the Mamba-2 hybrids, as transformers 5.x builds them.

nemotron_h (NVIDIA Nemotron-H, Nemotron Nano 2, Nemotron 3): every block is one norm and one
mixer, named per layer by `layers_block_type` (alias `layer_types`; legacy
`hybrid_override_pattern`: "M" Mamba-2, "*" attention, "-" MLP, "E" MoE). A Mamba or attention
block has no MLP, an MLP / MoE block no mixer (kvcalc: mlp "none", attention "none").
NemotronHMamba2Mixer: inner width mamba_num_heads x mamba_head_dim (`expand` is not read), in_proj
and out_proj biases from `use_bias`; NemotronHAttention (JambaAttention): bias-free, no rotary;
MLPs and experts are up / down only (relu2); NemotronHMoE: DeepSeek-V3's router (an fp32
e_score_correction_bias buffer) and one shared MLP of moe_shared_expert_intermediate_size.

granitemoehybrid (IBM Granite 4.0-H): `layer_types` "mamba" / "attention" (transformers' newer
"linear_attention" / "full_attention" too); every block has two norms, its mixer and a shared
SwiGLU MLP of shared_intermediate_size, plus (num_local_experts > 0) a routed MoE of
intermediate_size experts: kvcalc's sparse MLP with a shared expert, or with no experts a dense
MLP of shared_intermediate_size. GraniteMoeHybridMambaLayer: inner mamba_expand x hidden_size =
mamba_n_heads x mamba_d_head ("auto": the quotient), biases mamba_proj_bias / mamba_conv_bias;
attention biases from attention_bias; rotary only with position_embedding_type "rope".

A key the file leaves out takes its config class's default (configuration_nemotron_h.py,
configuration_granitemoehybrid.py); a key that would change a count transformers' model does not
build (MTP layers, a latent MoE, n_shared_experts != 1, attention biases or a window in
Nemotron-H's attention) is refused by name.
"""

from __future__ import annotations

from calc.hf.reader import _Config
from calc.layout import compact

HYBRID_SSM_TYPES = ("nemotron_h", "granitemoehybrid")

# NemotronHConfig._pattern_to_list, and transformers' _LEGACY_LAYER_TYPE_REMAP names
_NEMOTRON_CHARS = {"M": "mamba", "*": "attention", "-": "mlp", "E": "moe"}
_NEMOTRON_NAMES = {
    "mamba": ("mamba", "none"),
    "linear_attention": ("mamba", "none"),  # transformers 5.x's name for the Mamba-2 block
    "attention": ("full_attention", "none"),
    "full_attention": ("full_attention", "none"),
    "mlp": ("none", "dense"),
    "moe": ("none", "sparse"),
}
_GRANITE_NAMES = {
    "mamba": "mamba",
    "linear_attention": "mamba",
    "attention": "full_attention",
    "full_attention": "full_attention",
}


def hybrid_ssm_fields(cfg: _Config, mt: str) -> dict:
    return _nemotron_h(cfg) if mt == "nemotron_h" else _granite(cfg)


# --- nemotron_h -----------------------------------------------------------------------------


def _nemotron_blocks(cfg: _Config) -> list[str]:
    """One block name per layer, as NemotronHConfig.__post_init__ picks them."""
    key = next(
        (k for k in ("layers_block_type", "layer_types") if cfg.data.get(k) is not None), None
    )
    if key is not None:
        blocks = cfg.data[key]
        if not (isinstance(blocks, list) and blocks and all(b in _NEMOTRON_NAMES for b in blocks)):
            raise cfg.fail(key, f"must list one of {', '.join(_NEMOTRON_NAMES)} per layer")
        return blocks
    pattern = cfg.data.get("hybrid_override_pattern")
    if pattern is None:  # NemotronHConfig's default layers_block_type
        return ["mamba", "moe", "attention", "mlp"]
    if not (isinstance(pattern, str) and pattern and set(pattern) <= set(_NEMOTRON_CHARS)):
        raise cfg.fail("hybrid_override_pattern", "must be a string of M, *, - and E")
    return [_NEMOTRON_CHARS[c] for c in pattern]


def _nemotron_h(cfg: _Config) -> dict:
    blocks = _nemotron_blocks(cfg)
    L = len(blocks)
    # NemotronHConfig.num_hidden_layers is the block list's length (a differing value is only
    # warned about): refused here, so a file that says two things is not read as one
    stated = cfg.int("num_hidden_layers", default=None, nullable=True)
    if stated is not None and stated != L:
        raise cfg.fail("num_hidden_layers", f"must equal the {L} layers the block pattern lists")
    attention = [_NEMOTRON_NAMES[b][0] for b in blocks]
    mlp = [_NEMOTRON_NAMES[b][1] for b in blocks]
    _refuse(cfg, "num_nextn_predict_layers", 0, "MTP layers are not modelled for nemotron_h")
    _refuse(cfg, "moe_latent_size", None, "a latent MoE (fc1/fc2_latent_proj) is not modelled")
    _refuse(cfg, "attention_bias", False, "NemotronHAttention builds bias-free projections")
    _refuse(cfg, "sliding_window", None, "NemotronHAttention attends to every earlier token")
    # NemotronHForCausalLM._tied_weights_keys is empty: transformers builds its own lm_head
    _refuse(cfg, "tie_word_embeddings", False, "NemotronHForCausalLM never ties lm_head")
    use_bias = cfg.bool("use_bias", False)
    if cfg.bool("mamba_proj_bias", use_bias) != use_bias:  # transformers reads use_bias
        raise cfg.fail("mamba_proj_bias", f"must equal use_bias={use_bias} (in_proj's bias)")
    H = cfg.int("num_attention_heads", default=32)
    fields = {
        "num_hidden_layers": L,
        "hidden_size": cfg.int("hidden_size", default=4096),
        "num_attention_heads": H,
        "num_key_value_heads": cfg.int("num_key_value_heads", default=8, nullable=True),
        "head_dim": cfg.int("head_dim", default=128),
        "intermediate_size": cfg.int("intermediate_size", default=21504),
        "vocab_size": cfg.int("vocab_size", default=131072),
        "max_position_embeddings": cfg.int("max_position_embeddings", default=4096),
        "mlp_kind": "standard",  # up_proj, down_proj (relu2)
        "hidden_act": cfg.str("mlp_hidden_act", default="relu2"),
        "mlp_bias": cfg.bool("mlp_bias", False),
        "tie_word_embeddings": False,
        "norm_kind": "rmsnorm",
        "norms_per_block": 1,  # NemotronHBlock.norm
        "position_embedding": "none",
        "mamba_num_heads": cfg.int("mamba_num_heads", default=128),
        "mamba_head_dim": cfg.int("mamba_head_dim", default=64),
        "ssm_state_size": cfg.int("ssm_state_size", default=128),
        "n_groups": cfg.int("n_groups", "mamba_n_groups", default=8),
        "conv_kernel": cfg.int("conv_kernel", "mamba_d_conv", default=4),
        "use_conv_bias": _bool(cfg, ("use_conv_bias", "mamba_conv_bias"), True),
        "mamba_proj_bias": use_bias,
        "mamba_chunk_size": cfg.int("chunk_size", "mamba_chunk_size", default=128),
        "mamba_ssm_cache_dtype": cfg.data.get("mamba_ssm_cache_dtype", "float32"),
        **compact(attention, "layer_types", "layer_pattern"),
        **compact(mlp, "mlp_layer_types", "mlp_layer_pattern"),
    }
    if "mamba" not in attention:  # no Mamba-2 layer: its sizes describe nothing
        for key in ("mamba_num_heads", "mamba_head_dim", "ssm_state_size", "n_groups",
                    "conv_kernel", "mamba_chunk_size", "mamba_ssm_cache_dtype"):  # fmt: skip
            fields[key] = None
    if "sparse" in mlp:
        if cfg.int("n_shared_experts", default=1, low=0) != 1:
            raise cfg.fail("n_shared_experts", "must be 1 (NemotronHMoE builds one shared MLP)")
        fields.update(
            num_local_experts=cfg.int("n_routed_experts", "num_local_experts", default=8),
            num_experts_per_tok=cfg.int("num_experts_per_tok", default=2),
            moe_intermediate_size=cfg.int("moe_intermediate_size", default=7688),
            shared_expert_intermediate_size=cfg.int(
                "moe_shared_expert_intermediate_size", default=7688
            ),
            e_score_correction_bias=True,  # DeepseekV3TopkRouter's fp32 buffer
        )
    return fields


# --- granitemoehybrid -----------------------------------------------------------------------


def _granite(cfg: _Config) -> dict:
    L = cfg.int("num_hidden_layers", default=32)
    types = cfg.data.get("layer_types")
    if types is None:  # GraniteMoeHybridConfig.__post_init__: every layer Mamba-2
        types = ["mamba"] * L
    if not (
        isinstance(types, list) and len(types) == L and all(t in _GRANITE_NAMES for t in types)
    ):
        raise cfg.fail("layer_types", f"must list mamba or attention for each of the {L} layers")
    attention = [_GRANITE_NAMES[t] for t in types]
    h = cfg.int("hidden_size", default=4096)
    H = cfg.int("num_attention_heads", default=32)
    pos = cfg.data.get("position_embedding_type")
    if pos not in (None, "nope", "rope"):
        raise cfg.fail("position_embedding_type", "must be null, 'nope' or 'rope'")
    bias = cfg.bool("attention_bias", False)
    shared = cfg.int("shared_intermediate_size", default=1024)
    E = cfg.int("num_local_experts", default=8, low=0)
    if E == 1:  # a router over one expert: kvcalc's MoE layers need more than one
        raise cfg.fail("num_local_experts", "must be 0 (dense) or more than 1")
    fields = {
        "num_hidden_layers": L,
        "hidden_size": h,
        "num_attention_heads": H,
        "num_key_value_heads": cfg.int("num_key_value_heads", default=None, nullable=True),
        "head_dim": cfg.int("head_dim", default=None, nullable=True),  # getattr(config, ...)
        "vocab_size": cfg.int("vocab_size", default=32000),
        "max_position_embeddings": cfg.int("max_position_embeddings", default=2048),
        "mlp_kind": "gated",  # input_linear = gate and up; experts' gate_up_proj
        "hidden_act": cfg.str("hidden_act", default="silu"),
        "tie_word_embeddings": cfg.bool("tie_word_embeddings", False),
        "qkv_bias": bias,
        "attn_out_bias": bias,
        "norm_kind": "rmsnorm",
        "norms_per_block": 2,  # input_layernorm, post_attention_layernorm
        "position_embedding": "rope" if pos == "rope" else "none",
        **compact(attention, "layer_types", "layer_pattern"),
    }
    if E:  # block_sparse_moe (router h -> E, no bias) + shared_mlp, in every layer
        fields.update(
            intermediate_size=shared,
            num_local_experts=E,
            num_experts_per_tok=cfg.int("num_experts_per_tok", default=2),
            moe_intermediate_size=cfg.int("intermediate_size", default=11008),
            shared_expert_intermediate_size=shared,
        )
    else:  # only the shared MLP: a dense SwiGLU of shared_intermediate_size
        fields["intermediate_size"] = shared
    if "mamba" in attention:
        fields.update(_granite_mamba(cfg, h))
    return fields


def _granite_mamba(cfg: _Config, h: int) -> dict:
    heads = cfg.int("mamba_n_heads", default=128)
    expand = cfg.int("mamba_expand", default=2)
    inner = expand * h
    d_head = cfg.data.get("mamba_d_head", "auto")
    if d_head == "auto":  # GraniteMoeHybridConfig.__post_init__
        d_head = inner // heads
    else:
        d_head = cfg.int("mamba_d_head")
    if inner % heads or d_head * heads != inner:  # GraniteMoeHybridConfig.validate_architecture
        raise cfg.fail(
            "mamba_d_head",
            f"x mamba_n_heads={heads} must equal mamba_expand x hidden_size={inner}",
        )
    return {
        "mamba_num_heads": heads,
        "mamba_head_dim": d_head,
        "ssm_state_size": cfg.int("mamba_d_state", default=256),
        "n_groups": cfg.int("mamba_n_groups", default=1),
        "conv_kernel": cfg.int("mamba_d_conv", default=4),
        "use_conv_bias": _bool(cfg, ("mamba_conv_bias",), True),
        "mamba_proj_bias": _bool(cfg, ("mamba_proj_bias",), False),
        "mamba_chunk_size": cfg.int("mamba_chunk_size", default=256),
        "mamba_ssm_cache_dtype": cfg.data.get("mamba_ssm_cache_dtype"),
    }


# --- helpers --------------------------------------------------------------------------------


def _bool(cfg: _Config, keys: tuple[str, ...], default: bool) -> bool:
    """The first of `keys` the file has (a newer name, then its legacy alias), as a bool."""
    key = next((k for k in keys if cfg.has(k)), keys[0])
    return cfg.bool(key, default)


def _refuse(cfg: _Config, key: str, allowed: object, why: str) -> None:
    """A key whose only modelled value is `allowed` (absent counts as allowed)."""
    value = cfg.data.get(key, allowed)
    if value != allowed and not (allowed == 0 and value is None):
        raise cfg.fail(key, f"must be {allowed!r} ({why})")
