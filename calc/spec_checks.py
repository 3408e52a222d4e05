"""Cross-field checks of a ModelSpec: each error names the field, the constraint and the value.

A field that would change a count must be consistent with the others, or the spec is refused:
a sliding layer needs a window, a chunked layer a chunk size, a linear-attention layer its five
Gated-DeltaNet sizes, MLA all its head sizes, an indexed (DeepSeek Sparse Attention) layer MLA
with a query latent and the indexer's three sizes, an MoE layer more than one expert;
DeepSeek-V4's own checks are in calc/spec_checks_v4.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from calc.spec_checks_ssm import check_ssm
from calc.spec_checks_v4 import check_v4

if TYPE_CHECKING:
    from calc.spec import ModelSpec

_MLA_FIELDS = ("qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")
_INDEX_FIELDS = ("index_n_heads", "index_head_dim", "index_topk")
_LINEAR_FIELDS = (
    "linear_num_key_heads",
    "linear_num_value_heads",
    "linear_key_head_dim",
    "linear_value_head_dim",
    "linear_conv_kernel_dim",
)


def check_spec(s: ModelSpec) -> None:
    _check_heads(s)
    _check_layout(s)
    check_v4(s)
    _check_mla(s)
    _check_linear(s)
    check_ssm(s)  # Mamba-2 layers, mixer-less blocks (calc/spec_checks_ssm.py)
    _check_indexed(s)
    _check_moe(s)
    if s.block_kind == "parallel" and s.norms_per_block == 4:
        raise ValueError("'norms_per_block' must be 1 or 2 for a parallel block: got 4")
    if s.include_mtp and not s.num_nextn_predict_layers:
        raise ValueError(
            "'include_mtp' needs num_nextn_predict_layers > 0: got num_nextn_predict_layers=0"
        )


def _check_heads(s: ModelSpec) -> None:
    H, G = s.num_attention_heads, s.n_kv_heads
    if H % G:
        raise ValueError(f"'num_key_value_heads' must divide num_attention_heads={H}: got {G}")
    if s.head_dim_ is None and not s.is_mla and s.hidden_size % H:
        raise ValueError(
            f"'hidden_size' must be divisible by num_attention_heads={H} when head_dim is "
            f"not given: got {s.hidden_size}"
        )


def _check_layout(s: ModelSpec) -> None:
    L = s.num_hidden_layers
    for field in ("layer_types", "mlp_layer_types"):
        runs = getattr(s, field)
        if runs is not None and sum(c for _, c in runs) != L:
            raise ValueError(
                f"'{field}' must give num_hidden_layers={L} layers: got {sum(c for _, c in runs)}"
            )
    given = [f for f in ("layer_types", "layer_pattern") if getattr(s, f) is not None]
    if len(given) > 1:
        raise ValueError("'layer_pattern' must not be given with layer_types: give one of them")
    if s.mlp_layer_types is not None and s.mlp_layer_pattern is not None:
        raise ValueError("'mlp_layer_pattern' must not be given with mlp_layer_types")
    if s.sliding_window_pattern is not None:
        if s.sliding_window is None:
            raise ValueError(
                "'sliding_window_pattern' needs a sliding_window: got pattern "
                f"{s.sliding_window_pattern} with sliding_window=None"
            )
        if given:
            raise ValueError(
                f"'sliding_window_pattern' must not be given with {given[0]}: got "
                f"{s.sliding_window_pattern}"
            )
    counts = s.attention_counts
    if "sliding_attention" in counts and s.sliding_window is None:
        raise ValueError(
            f"'sliding_window' must be set: {counts['sliding_attention']} layers are "
            "sliding_attention"
        )
    if "chunked_attention" in counts and s.attention_chunk_size is None:
        raise ValueError(
            f"'attention_chunk_size' must be set: {counts['chunked_attention']} layers are "
            "chunked_attention"
        )


def _check_mla(s: ModelSpec) -> None:
    mla = [f for f in (*_MLA_FIELDS, "q_lora_rank") if getattr(s, f) is not None]
    if s.is_v4:  # V4 reads q_lora_rank and qk_rope_head_dim itself (calc/spec_checks_v4.py)
        mla = [f for f in mla if f not in ("q_lora_rank", "qk_rope_head_dim")]
    if not s.is_mla:
        if mla:
            raise ValueError(f"'{mla[0]}' is an MLA size and needs kv_lora_rank: got None")
        return
    missing = [f for f in _MLA_FIELDS if getattr(s, f) is None]
    if missing:
        raise ValueError(f"'{missing[0]}' must be set for MLA (kv_lora_rank given): got None")
    if s.num_key_value_heads not in (None, s.num_attention_heads):
        raise ValueError(  # MLA's kv_b_proj expands the latent to every query head
            f"'num_key_value_heads' must equal num_attention_heads={s.num_attention_heads} "
            f"for MLA: got {s.num_key_value_heads}"
        )


def _check_linear(s: ModelSpec) -> None:
    if "linear_attention" not in s.attention_counts:
        return
    missing = [f for f in _LINEAR_FIELDS if getattr(s, f) is None]
    if missing:
        raise ValueError(
            f"'{missing[0]}' must be set: {s.attention_counts['linear_attention']} layers are "
            "linear_attention"
        )
    nk, nv = s.linear_num_key_heads, s.linear_num_value_heads
    if nv % nk:
        raise ValueError(
            f"'linear_num_key_heads' must divide linear_num_value_heads={nv}: got {nk}"
        )


def _check_indexed(s: ModelSpec) -> None:
    """DeepseekV32Indexer (transformers 5.x modeling_deepseek_v32.py): wq_b reads the query
    latent (q_lora_rank -> index_n_heads x index_head_dim), rope is applied to the first
    qk_rope_head_dim of each index head."""
    given = [f for f in _INDEX_FIELDS if getattr(s, f) is not None]
    n = s.attention_counts.get("indexed_attention", 0)
    if s.is_v4:  # the CSA layers' indexer: calc/spec_checks_v4.py
        return
    if given and not n:
        raise ValueError(
            f"'{given[0]}' is an indexer size and needs indexed_attention layers: got none "
            "in layer_types"
        )
    if not n:
        return
    missing = [f for f in _INDEX_FIELDS if getattr(s, f) is None]
    if missing:
        raise ValueError(f"'{missing[0]}' must be set: {n} layers are indexed_attention")
    if not s.is_mla or s.q_lora_rank is None:
        field = "kv_lora_rank" if not s.is_mla else "q_lora_rank"
        raise ValueError(
            f"'{field}' must be set: indexed_attention is MLA whose indexer reads the query "
            "latent, got None"
        )
    if s.index_head_dim < s.qk_rope_head_dim:
        raise ValueError(
            f"'index_head_dim' must be >= qk_rope_head_dim={s.qk_rope_head_dim} (the indexer's "
            f"rope slice): got {s.index_head_dim}"
        )


def _check_moe(s: ModelSpec) -> None:
    if s.num_experts_per_tok > s.num_local_experts:
        raise ValueError(
            f"'num_experts_per_tok' must be <= num_local_experts={s.num_local_experts}: "
            f"got {s.num_experts_per_tok}"
        )
    if s.n_moe_layers and not s.is_moe:
        raise ValueError(
            f"'num_local_experts' must be > 1 when {s.n_moe_layers} layers are sparse (MoE): "
            f"got {s.num_local_experts}"
        )
    if s.shared_expert_gate and s.shared_expert_intermediate_size is None:
        raise ValueError("'shared_expert_gate' needs shared_expert_intermediate_size: got None")
