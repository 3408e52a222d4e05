"""config.json (model_type deepseek_v4) -> spec fields, as transformers 5.x builds DeepSeek-V4
(configuration_deepseek_v4.py DeepseekV4Config and its __post_init__, modeling_deepseek_v4.py).

Defaults are DeepseekV4Config's (V4-Flash sizes). Legacy keys are folded in as its
__post_init__ does: `compress_ratios` (0 / 4 / 128 per layer; a trailing MTP entry is cut to
num_hidden_layers) gives layer_types when none are listed, else the default schedule (2 HCA
layers, then CSA / HCA alternating); `compress_rate_csa` / `compress_rate_hca` override
`compress_rates`; `num_hash_layers` (default 3) gives the hash_moe / moe schedule;
`qk_rope_head_dim` gives partial_rotary_factor (default 64 / 512 of head_dim). Every layer is
MoE (hash-routed or top-k: the same parameters, only their buffers differ: num_hash_layers
keeps how many lead, for the stored tid2eid tables) with one shared
expert of moe_intermediate_size (DeepseekV4MLP reads `intermediate_size`, which the config maps
to moe_intermediate_size).
Refused by name: anything transformers would build differently from what the file says
(n_shared_experts != 1, attention_bias true, num_key_value_heads != 1, an `intermediate_size`
unlike moe_intermediate_size) or would reject (unknown layer / MLP types, ratios other than
0 / 4 / 128, an unknown compress_rates key).
The rope table: `rope_scaling` (yarn) applies to the compressed layers' rope only; kvcalc keeps
one table (calc/rope.py), read by calc/hf/rope.py.
"""

from __future__ import annotations

from calc.hf.reader import _Config
from calc.hf.rope import rope_fields
from calc.layout import compact
from calc.spec_checks_v4 import V4_TYPES

RATIO_TYPES = {0: V4_TYPES[0], 4: V4_TYPES[1], 128: V4_TYPES[2]}  # _COMPRESS_RATIO_TO_LAYER_TYPE
RATE_KEYS = {"compressed_sparse_attention": "compress_rate_csa",
             "heavily_compressed_attention": "compress_rate_hca"}  # fmt: skip
MLP_TYPES = ("hash_moe", "moe")


def deepseek_v4_fields(cfg: _Config) -> dict:
    L, h = cfg.int("num_hidden_layers", default=43), cfg.int("hidden_size", default=4096)
    H = cfg.int("num_attention_heads", default=64)
    d = cfg.int("head_dim", default=512)
    f = cfg.int("moe_intermediate_size", default=2048)
    if cfg.has("intermediate_size") and cfg.data["intermediate_size"] != f:
        raise cfg.fail("intermediate_size", f"must equal moe_intermediate_size={f} (the config "
                       "maps one onto the other)")  # fmt: skip
    if cfg.int("num_key_value_heads", default=1) != 1:
        raise cfg.fail("num_key_value_heads", "must be 1 (DeepseekV4Attention: one shared KV head)")
    if cfg.int("n_shared_experts", default=1, low=0) != 1:
        raise cfg.fail("n_shared_experts", f"must be 1 (DeepseekV4MLP: one shared expert of "
                       f"moe_intermediate_size={f})")  # fmt: skip
    if cfg.bool("attention_bias", False):
        raise cfg.fail("attention_bias", "must be false (DeepseekV4Attention has no biases)")
    E = cfg.int("n_routed_experts", "num_local_experts", default=256)
    fields = {
        "num_hidden_layers": L,
        "hidden_size": h,
        "num_attention_heads": H,
        "num_key_value_heads": 1,
        "head_dim": d,
        "intermediate_size": f,
        "vocab_size": cfg.int("vocab_size", default=129280),
        "max_position_embeddings": cfg.int("max_position_embeddings", default=1048576),
        "hidden_act": cfg.str("hidden_act", default="silu"),
        "tie_word_embeddings": cfg.bool("tie_word_embeddings", False),
        "mlp_bias": cfg.bool("mlp_bias", False),  # the shared expert's projections
        "norms_per_block": 2,  # input_layernorm, post_attention_layernorm
        "attention_sinks": True,
        "q_lora_rank": cfg.int("q_lora_rank", default=1024),
        "qk_rope_head_dim": _rope_dim(cfg, d),
        "o_groups": cfg.int("o_groups", default=8),
        "o_lora_rank": cfg.int("o_lora_rank", default=1024),
        "hc_mult": cfg.int("hc_mult", default=4),
        "sliding_window": cfg.int("sliding_window", default=128),
        "num_local_experts": E,
        "num_experts_per_tok": cfg.int("num_experts_per_tok", default=6),
        "moe_intermediate_size": f,
        "shared_expert_intermediate_size": f,
        "num_nextn_predict_layers": cfg.int("num_nextn_predict_layers", default=1, low=0),
    }
    types = _layer_types(cfg, L)
    fields.update(compact(types, "layer_types", "layer_pattern"))
    rates = _rates(cfg)
    for kind, key in RATE_KEYS.items():
        if kind in types:
            fields[key] = rates[kind]
    if V4_TYPES[1] in types:  # the CSA layers' lightning indexer
        fields["index_n_heads"] = cfg.int("index_n_heads", default=64)
        fields["index_head_dim"] = cfg.int("index_head_dim", default=128)
        fields["index_topk"] = cfg.int("index_topk", default=512)
    fields["num_hash_layers"] = _hash_layers(cfg, L)  # every layer is MoE whichever the router
    thetas = (cfg.data.get("rope_theta", 10000), cfg.data.get("compress_rope_theta", 160000))
    if thetas[0] == thetas[1]:  # vLLM: one fp32 cos/sin table per base (v4_weights counts 2)
        raise cfg.fail("compress_rope_theta", f"must differ from rope_theta={thetas[0]} (vLLM "
                       "then builds one rope table for both layer kinds)")  # fmt: skip
    return fields


def _rope_dim(cfg: _Config, d: int) -> int:
    """qk_rope_head_dim (legacy) else head_dim x partial_rotary_factor (default 64 / 512)."""
    if cfg.has("qk_rope_head_dim") and cfg.data.get("partial_rotary_factor") is None:
        return cfg.int("qk_rope_head_dim")
    factor = cfg.data.get("partial_rotary_factor") or 64 / 512
    if isinstance(factor, bool) or not isinstance(factor, int | float) or not 0 < factor <= 1:
        raise cfg.fail("partial_rotary_factor", "must be a number in (0, 1]")
    return int(d * factor)


def _layer_types(cfg: _Config, L: int) -> list[str]:
    types = cfg.data.get("layer_types")
    if types is None and cfg.data.get("compress_ratios") is not None:
        ratios = cfg.data["compress_ratios"]
        if not (isinstance(ratios, list) and len(ratios) >= L and
                all(r in RATIO_TYPES and not isinstance(r, bool) for r in ratios)):  # fmt: skip
            raise cfg.fail("compress_ratios", f"must list 0, 4 or 128 for each of the {L} layers "
                           "(a trailing MTP entry may follow)")  # fmt: skip
        if any(ratios[L:]):  # vLLM builds the MTP block window-only (compress_ratio 1), and
            # the checkpoint's mtp.* tensors are counted so (calc/quant/weights_v4.py)
            raise cfg.fail("compress_ratios", f"must end with 0 after the {L} layers (the MTP "
                           f"block's entry): got {ratios[L:]}")  # fmt: skip
        types = [RATIO_TYPES[r] for r in ratios]
    if types is None:  # DeepseekV4Config.__post_init__'s default schedule
        types = [V4_TYPES[2]] * min(L, 2) + [
            V4_TYPES[1] if i % 2 else V4_TYPES[2] for i in range(max(L - 2, 0))
        ]
    if not (isinstance(types, list) and len(types) >= L and set(types) <= set(V4_TYPES)):
        raise cfg.fail("layer_types", f"must name one of {', '.join(V4_TYPES)} for each of the "
                       f"{L} layers")  # fmt: skip
    return list(types[:L])


def _rates(cfg: _Config) -> dict[str, int]:
    rates = {V4_TYPES[1]: 4, V4_TYPES[2]: 128}
    given = cfg.data.get("compress_rates")
    if given is not None:
        if not isinstance(given, dict) or not set(given) <= set(rates):
            raise cfg.fail("compress_rates", f"must map {V4_TYPES[1]} / {V4_TYPES[2]} to rates")
        rates = {k: given.get(k, rates[k]) for k in rates}
    for kind, key in RATE_KEYS.items():  # legacy scalar overrides
        rates[kind] = cfg.int(key, default=rates[kind])
    bad = [k for k, v in rates.items() if isinstance(v, bool) or not isinstance(v, int) or v < 1]
    if bad:
        raise cfg.fail("compress_rates", "must give positive integer rates")
    return rates


def _hash_layers(cfg: _Config, L: int) -> int:
    """How many leading layers route by tid2eid: `num_hash_layers` (default 3), or the hash_moe
    prefix of `mlp_layer_types` (vLLM routes layer i by tid2eid when i < num_hash_layers, so a
    hash_moe layer after a moe one is refused)."""
    mlp = cfg.data.get("mlp_layer_types")
    if mlp is None:
        return cfg.int("num_hash_layers", default=3, low=0)  # layer i hashed if i < it
    if not (isinstance(mlp, list) and len(mlp) >= L and set(mlp) <= set(MLP_TYPES)):
        raise cfg.fail("mlp_layer_types", f"must name hash_moe or moe for each of the {L} layers")
    n = next((i for i, t in enumerate(mlp[:L]) if t != "hash_moe"), L)
    if "hash_moe" in mlp[n:L]:
        raise cfg.fail("mlp_layer_types", "must list the hash_moe layers first (vLLM's "
                       "num_hash_layers)")  # fmt: skip
    return n


def deepseek_v4_rope(cfg: _Config, fields: dict) -> dict:
    """The rope table kvcalc keeps: the compressed layers' (`rope_scaling`, or 5.x's nested
    rope_parameters["compress"]), over the qk_rope_head_dim slice of each head."""
    data = dict(cfg.data)
    nested = data.get("rope_parameters")
    if isinstance(nested, dict) and isinstance(nested.get("compress"), dict):
        data["rope_parameters"] = nested["compress"]
    for key in ("partial_rotary_factor", "rotary_pct", "rotary_emb_fraction"):
        data.pop(key, None)  # read above, into qk_rope_head_dim
    out = rope_fields(_Config(data, cfg.origin, cfg.model_type))
    out.pop("partial_rotary_factor", None)
    out["partial_rotary_factor"] = fields["qk_rope_head_dim"] / fields["head_dim"]
    return out
