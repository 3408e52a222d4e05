"""The same model with other attention: MHA, GQA, MQA, MLA, sliding window, linear attention.

Every variant keeps the model's query heads, widths, MLP and vocabulary and puts one kind of
attention on every layer:
- MHA / GQA / MQA: full attention with G = H, the model's own G, and 1 KV heads;
- MLA: DeepSeek's latent cache with the model's own ranks, or DeepSeek-V2's choices for a model
  that has none (kv_lora_rank = 4 x head_dim, a rope key of head_dim / 2; V2 paper §2.1);
- sliding: the model's own G with its window (4096 tokens if it has none, Mistral 7B's);
- linear: Gated DeltaNet layers (Qwen3-Next) with H value heads and G key heads of head_dim and
  a 4-tap conv: a constant state per sequence, no per-token cache.
A model whose own layers mix kinds (Gemma 3, gpt-oss, Qwen3-Next, Llama 4) or use MLA is listed
as well, as configured. For an MLA model the other variants use head_dim = v_head_dim.

>>> from calc.presets import load_preset
>>> [name for name, _ in attention_variants(load_preset("llama-3-70b"))]
['MHA', 'GQA', 'MQA', 'MLA', 'sliding', 'linear']
"""

from __future__ import annotations

from calc.spec import ModelSpec

DEFAULT_WINDOW = 4096  # Mistral 7B v0.1's sliding window
DEFAULT_CONV_KERNEL = 4  # Qwen3-Next's linear_conv_kernel_dim

_NO_MLA = dict.fromkeys(
    ("kv_lora_rank", "q_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")
)
# DeepSeek-V3.2's indexer and DeepSeek-V4's compressed attention (calc/spec_checks_v4.py)
_NO_V4 = dict.fromkeys(
    ("o_groups", "o_lora_rank", "hc_mult", "compress_rate_csa", "compress_rate_hca",
     "index_n_heads", "index_head_dim", "index_topk"),
)  # fmt: skip
_NO_LINEAR = dict.fromkeys(
    ("linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim",
     "linear_value_head_dim", "linear_conv_kernel_dim"),
)  # fmt: skip


def _uniform(spec: ModelSpec, kind: str, **changes) -> ModelSpec:
    d = spec.v_head_dim if spec.is_mla else spec.head_dim
    base = {
        **_NO_MLA,
        **_NO_V4,
        **_NO_LINEAR,
        "head_dim": d,
        "layer_types": [[kind, spec.num_hidden_layers]],
        "layer_pattern": None,
        "sliding_window_pattern": None,
        "attention_chunk_size": None,
        "include_mtp": False,
        "num_nextn_predict_layers": 0,
    }
    return spec.replace(**{**base, **changes})


def is_mixed(spec: ModelSpec) -> bool:
    """Does the model differ from every uniform variant (mixed layers, MLA, chunks)?"""
    kinds = set(spec.attention_counts)
    plain = {"full_attention", "sliding_attention"}
    return spec.is_mla or spec.is_v4 or len(kinds) > 1 or not kinds <= plain


def attention_variants(spec: ModelSpec, window: int | None = None) -> list[tuple[str, ModelSpec]]:
    """(name, spec) for each attention variant of the model, and the model itself if mixed."""
    H, G = spec.num_attention_heads, spec.n_kv_heads
    d = spec.v_head_dim if spec.is_mla else spec.head_dim
    w = window or spec.sliding_window or spec.attention_chunk_size or DEFAULT_WINDOW
    out = [
        ("MHA", _uniform(spec, "full_attention", num_key_value_heads=H)),
        ("GQA", _uniform(spec, "full_attention", num_key_value_heads=G)),
        ("MQA", _uniform(spec, "full_attention", num_key_value_heads=1)),
        (
            "MLA",
            _uniform(
                spec,
                "full_attention",
                head_dim=None,
                num_key_value_heads=None,
                kv_lora_rank=spec.kv_lora_rank or 4 * d,
                q_lora_rank=spec.q_lora_rank,
                qk_nope_head_dim=spec.qk_nope_head_dim or d,
                qk_rope_head_dim=spec.qk_rope_head_dim or max(1, d // 2),
                v_head_dim=d,
            ),
        ),
        ("sliding", _uniform(spec, "sliding_attention", num_key_value_heads=G, sliding_window=w)),
        (
            "linear",
            _uniform(
                spec,
                "linear_attention",
                num_key_value_heads=G,
                linear_num_key_heads=G,
                linear_num_value_heads=H,
                linear_key_head_dim=d,
                linear_value_head_dim=d,
                linear_conv_kernel_dim=spec.linear_conv_kernel_dim or DEFAULT_CONV_KERNEL,
            ),
        ),
    ]
    if is_mixed(spec):
        out.append(("this model", spec))
    return out
