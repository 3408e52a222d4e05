"""The model types calc/hf/modern.py imports: what each one's modeling code builds and the defaults
of its transformers 5.x config class (`configuration_<type>.py`) for keys a config.json leaves out.
"""

from __future__ import annotations

from typing import NamedTuple

from calc.hf.reader import _REQUIRED


class Family(NamedTuple):
    kv_heads: int | None  # config-class default; None: = num_attention_heads
    head_dim: int | None  # config-class default; None: hidden_size // heads
    tie: bool
    max_pos: int
    bias: str = "qkvo"  # which projections `attention_bias` applies to: "qkvo", "qkv", ...
    norms: int = 2  # norms per block
    qk_norm: str = "none"  # head / full / none; "flag": use_qk_norm picks head (glm4_moe)
    layout: str = "full"  # how layer types are derived when the file lists none
    moe: str = ""  # how MoE layers are placed: qwen / deepseek / llama4 / all
    window: int | None = None  # sliding_window default
    vocab: object = _REQUIRED  # vocab_size default (Gemma 3 configs may omit it)


F = Family
FAMILIES = {
    "qwen3": F(32, 128, False, 32768, qk_norm="head", layout="max_window"),
    "qwen3_moe": F(4, None, False, 32768, qk_norm="head", layout="max_window", moe="qwen"),
    "qwen2_moe": F(16, None, False, 32768, bias="qkv!", layout="max_window", moe="qwen"),
    "qwen3_next": F(2, 256, False, 32768, qk_norm="head", layout="interval", moe="qwen"),
    "qwen3_5_text": F(4, 256, False, 32768, qk_norm="head", layout="interval"),
    "qwen3_5_moe_text": F(2, 256, False, 32768, qk_norm="head", layout="interval", moe="all"),
    "deepseek_v2": F(None, None, False, 2048, moe="deepseek"),
    "deepseek_v3": F(None, None, False, 4096, moe="deepseek"),
    "deepseek_v32": F(None, None, False, 163840, layout="indexed", moe="deepseek"),
    "gpt_oss": F(8, 64, False, 131072, layout="alternate", moe="all", window=128),
    "gemma3_text": F(
        4, 256, True, 131072, vocab=262208, norms=4, qk_norm="head", layout="every6", window=4096
    ),
    "llama4_text": F(8, 128, False, 131072, layout="nope", moe="llama4"),
    "glm4": F(2, 128, False, 131072, bias="qkv", norms=4),
    "glm4_moe": F(8, None, False, 131072, bias="qkv", qk_norm="flag", moe="deepseek"),
    "phi3": F(None, None, False, 4096, bias="", layout="window"),
    "olmo2": F(None, None, False, 2048, qk_norm="full"),
    "olmo3": F(None, None, False, 2048, qk_norm="full", layout="every4", window=4096),
    "starcoder2": F(2, None, True, 4096, bias="use_bias", layout="window"),
    "granite": F(None, None, False, 2048),
    "cohere": F(None, None, True, 8192, norms=1, qk_norm="cohere"),
    "exaone4": F(None, None, False, 2048, bias="", qk_norm="head", layout="every4", window=4096),
    "smollm3": F(4, None, True, 32768, layout="max_window"),
    # MiniMax-M2 (calc/hf/glm_minimax.py): GQA with q/k RMSNorms over all heads, every layer MoE
    "minimax_m2": F(8, 128, False, 196608, bias="", qk_norm="full", moe="all", vocab=200064),
    # GLM-4.7-Flash: DeepSeek-V3's MLA and MoE; GLM-5: DeepSeek-V3.2's (MLA + DSA indexer)
    "glm4_moe_lite": F(None, None, False, 202752, moe="deepseek"),
    "glm_moe_dsa": F(None, None, False, 202752, layout="indexed", moe="deepseek"),
}
MODERN_TYPES = tuple(FAMILIES)
LINEAR_DEFAULTS = {  # Qwen3NextConfig / Qwen3_5TextConfig
    "linear_num_key_heads": 16,
    "linear_num_value_heads": 32,
    "linear_key_head_dim": 128,
    "linear_value_head_dim": 128,
    "linear_conv_kernel_dim": 4,
}
ATTENTION_NAMES = (
    "full_attention",
    "sliding_attention",
    "chunked_attention",
    "linear_attention",
    "indexed_attention",
)
INDEX_DEFAULTS = {
    "index_n_heads": 64,
    "index_head_dim": 128,
    "index_topk": 2048,
}  # DeepseekV32Config (GlmMoeDsaConfig: index_n_heads 32)
MLA_TYPES = ("deepseek_v2", "deepseek_v3", "deepseek_v32", "glm4_moe_lite", "glm_moe_dsa")
# q_lora_rank, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim (config classes)
MLA_DEFAULTS = {
    "glm4_moe_lite": (768, 512, 192, 64, 256),  # Glm4MoeLiteConfig
    "glm_moe_dsa": (2048, 512, 192, 64, 256),  # GlmMoeDsaConfig
}
DEEPSEEK_MLA_DEFAULTS = (1536, 512, 128, 64, 128)  # DeepseekV3Config (V2 and V3.2 alike)
