"""What calc/hf/modern.py adds for MiniMax-M2 (minimax_m2), GLM-4.7-Flash (glm4_moe_lite) and
GLM-5 (glm_moe_dsa), as transformers 5.x builds them.

- minimax_m2 (models/minimax_m2/modular_minimax_m2.py): bias-free q/k/v/o; q_norm / k_norm are
  RMSNorms over all heads at once (num_attention_heads x head_dim, num_key_value_heads x
  head_dim: "full"); every layer a Mixtral-style MoE of num_local_experts experts, each
  intermediate_size wide, a bias-free router and an fp32 e_score_correction_bias buffer; no
  shared expert, no sliding window. The released config.json's remote-code keys are honoured or
  refused by name: rotary_dim gives partial_rotary_factor (MiniMaxM2Config does the same);
  use_qk_norm false, a qk_norm_type other than per_layer, use_routing_bias false, a non-zero
  shared_intermediate_size, attention_bias true and a lightning-attention layer in
  attn_type_list (0: MiniMax-M1's linear attention) are refused. use_mtp / num_mtp_modules name
  MTP modules that transformers does not build and the released fp8 checkpoint does not store
  (its 96,103 tensors are the 62 layers, the embedding, the final norm and the LM head:
  github.com/whn09/neuronx-distributed-inference @ e205de97c70355e717bf45b7562aed460dc163d9
  examples/minimax_m2_misc/model_precision_report.txt): no MTP layer is counted.
- glm4_moe_lite (Glm4MoeLiteConfig): DeepseekV3Attention (MLA) and GLM-4.5's MoE (shared experts,
  e_score_correction_bias). Its __post_init__ makes layer 0 dense and every other layer MoE
  whatever first_k_dense_replace says: a first_k_dense_replace other than 1 without an explicit
  mlp_layer_types is refused (transformers and vLLM would disagree).
- glm_moe_dsa (GlmMoeDsaConfig, a DeepseekV32Config): MLA with the DSA lightning indexer, dense
  before first_k_dense_replace (default 3). Layers whose indexer_types entry is "shared" reuse
  the previous layer's top-k and build no indexer (GLM-5.1+'s index_topk_freq); kvcalc models
  every layer as indexed, so any "shared" layer is refused by name.
moe_layer_freq (DeepSeek's every-N-th MoE layer) is not read by these config classes: other
than 1 it is refused.
"""

from __future__ import annotations

from calc.hf.reader import _Config


def minimax_m2_fields(cfg: _Config, head_dim: int) -> dict:
    """Refusals of the remote-code keys transformers' MiniMaxM2 ignores, and the rotary part."""
    if not cfg.bool("use_qk_norm", True):
        raise cfg.fail("use_qk_norm", "must be true (transformers always builds q_norm / k_norm)")
    if cfg.data.get("qk_norm_type", "per_layer") != "per_layer":
        raise cfg.fail("qk_norm_type", "must be 'per_layer' (one RMSNorm over all heads)")
    if not cfg.bool("use_routing_bias", True):
        raise cfg.fail(
            "use_routing_bias", "must be true (transformers builds e_score_correction_bias)"
        )
    if cfg.int("shared_intermediate_size", default=0, low=0):
        raise cfg.fail("shared_intermediate_size", "must be 0 (no shared expert is built)")
    if cfg.bool("attention_bias", False):
        raise cfg.fail("attention_bias", "must be false (q/k/v/o are built without a bias)")
    types = cfg.data.get("attn_type_list")
    if types is not None and (not isinstance(types, list) or any(t != 1 for t in types)):
        raise cfg.fail(
            "attn_type_list",
            "must be 1 (softmax attention) for every layer: lightning attention is not modelled",
        )
    out: dict = {"e_score_correction_bias": True, "moe_intermediate_size": None}
    rotary = cfg.int("rotary_dim", default=None, nullable=True)
    if rotary is not None:
        if rotary > head_dim:
            raise cfg.fail("rotary_dim", f"must be <= head_dim={head_dim}")
        out["partial_rotary_factor"] = rotary / head_dim  # rope_parameters' own factor wins
    return out


def glm_mlp_types(cfg: _Config, mt: str, L: int) -> list[str]:
    """Dense or sparse per layer, as Glm4MoeLiteConfig / GlmMoeDsaConfig derive it."""
    if cfg.int("moe_layer_freq", default=1) != 1:
        raise cfg.fail("moe_layer_freq", f"must be 1 ({mt}'s config class does not read it)")
    if mt == "glm4_moe_lite":
        if cfg.int("first_k_dense_replace", default=1, low=0) != 1:
            raise cfg.fail(
                "first_k_dense_replace",
                "must be 1 without mlp_layer_types (Glm4MoeLiteConfig makes only layer 0 dense)",
            )
        return ["dense"] + ["sparse"] * (L - 1)
    k = min(cfg.int("first_k_dense_replace", default=3, low=0), L)
    return ["dense"] * k + ["sparse"] * (L - k)


def glm_dsa_check(cfg: _Config, L: int) -> None:
    """Refuse GLM-MoE-DSA layers that share the previous layer's top-k (no indexer of their own),
    derived as GlmMoeDsaConfig.__post_init__ does."""
    types = cfg.data.get("indexer_types")
    key = "indexer_types"
    if types is None and cfg.data.get("index_topk_pattern") is not None:
        key, pattern = "index_topk_pattern", cfg.data["index_topk_pattern"]
        if isinstance(pattern, str):
            types = [{"F": "full", "S": "shared"}.get(c, c) for c in pattern]
        else:
            types = pattern
    if types is None:
        freq = max(cfg.int("index_topk_freq", default=1), 1)
        offset = cfg.int("index_skip_topk_offset", default=2, low=0)
        types = ["full" if max(i - offset + 1, 0) % freq == 0 else "shared" for i in range(L)]
        key = "index_topk_freq"
    if not (isinstance(types, list) and len(types) == L and set(types) <= {"full", "shared"}):
        raise cfg.fail(key, f"must give 'full' or 'shared' for each of the {L} layers")
    if "shared" in types:
        raise cfg.fail(
            key,
            "must make every layer 'full': layers sharing the previous layer's top-k (no indexer "
            "of their own) are not modelled",
        )
