"""DeepSeek-V4's cross-field checks (transformers 5.x modeling_deepseek_v4.py): each error names
the field, the constraint and the value.

A V4 spec (o_groups set) is shared-KV MQA: one KV head of head_dim read as both K and V, the
last qk_rope_head_dim channels rotated; low-rank queries (q_lora_rank); the grouped output
projection splits the H x head_dim outputs into o_groups groups (DeepseekV4GroupedLinear);
every layer slides over sliding_window tokens; CSA layers need compress_rate_csa and the
indexer's three sizes, HCA layers compress_rate_hca (given without such layers they change no
count, as in DeepseekV4Config's defaults); hc_mult hyper-connection streams. MTP layers are not
modelled (include_mtp is refused).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from calc.spec import ModelSpec

V4_TYPES = ("sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention")
V4_FIELDS = ("o_groups", "o_lora_rank", "compress_rate_csa", "compress_rate_hca", "hc_mult",
             "num_hash_layers")  # fmt: skip
_INDEX_FIELDS = ("index_n_heads", "index_head_dim", "index_topk")
_NEEDED = (
    "o_lora_rank",
    "hc_mult",
    "q_lora_rank",
    "qk_rope_head_dim",
    "head_dim_",
    "sliding_window",
)


def check_v4(s: ModelSpec) -> None:
    counts = s.attention_counts
    v4_kinds = [k for k in V4_TYPES[1:] if k in counts]
    if not s.is_v4:
        given = [f for f in V4_FIELDS if getattr(s, f) is not None]
        if given or v4_kinds:
            what = (
                f"'{given[0]}' is given"
                if given
                else f"{counts[v4_kinds[0]]} layers are {v4_kinds[0]}"
            )
            raise ValueError(f"'o_groups' must be set for DeepSeek-V4 attention ({what}): got None")
        return
    other = [k for k in counts if k not in V4_TYPES]
    if other:
        raise ValueError(
            f"'layer_types' must name only {', '.join(V4_TYPES)} for DeepSeek-V4 attention "
            f"(o_groups set): got {other[0]!r}"
        )
    missing = [f for f in _NEEDED if getattr(s, f) is None]
    if missing:
        name = "head_dim" if missing[0] == "head_dim_" else missing[0]
        raise ValueError(
            f"'{name}' must be set for DeepSeek-V4 attention (o_groups given): got None"
        )
    if s.is_mla:
        raise ValueError(
            f"'kv_lora_rank' must not be set for DeepSeek-V4 attention (one shared KV head): "
            f"got {s.kv_lora_rank}"
        )
    if s.n_kv_heads != 1:
        raise ValueError(
            f"'num_key_value_heads' must be 1 for DeepSeek-V4 attention (one kv_proj head read "
            f"as K and V): got {s.n_kv_heads}"
        )
    H, d = s.num_attention_heads, s.head_dim
    if (H * d) % s.o_groups:
        raise ValueError(  # DeepseekV4GroupedLinear: H x head_dim / o_groups inputs a group
            f"'o_groups' must divide num_attention_heads x head_dim={H * d} (the grouped output "
            f"projection's groups): got {s.o_groups}"
        )
    if s.qk_rope_head_dim > d:
        raise ValueError(
            f"'qk_rope_head_dim' must be <= head_dim={d} (the rotated slice of each head): "
            f"got {s.qk_rope_head_dim}"
        )
    if not s.attention_sinks:
        raise ValueError("'attention_sinks' must be true for DeepSeek-V4 attention: got false")
    if "compressed_sparse_attention" in counts:
        n = counts["compressed_sparse_attention"]
        for f in ("compress_rate_csa", *_INDEX_FIELDS):
            if getattr(s, f) is None:
                raise ValueError(f"'{f}' must be set: {n} layers are compressed_sparse_attention")
        if s.index_head_dim < s.qk_rope_head_dim:
            raise ValueError(
                f"'index_head_dim' must be >= qk_rope_head_dim={s.qk_rope_head_dim} (the "
                f"indexer's rope slice): got {s.index_head_dim}"
            )
    n_hca = counts.get("heavily_compressed_attention", 0)
    if n_hca and s.compress_rate_hca is None:
        raise ValueError(
            f"'compress_rate_hca' must be set: {n_hca} layers are heavily_compressed_attention"
        )
    # a rate or indexer size without such layers changes no count: DeepseekV4Config always
    # carries them (its defaults), whatever layer_types holds
    if s.include_mtp:
        raise ValueError(
            "'include_mtp' is not supported for DeepSeek-V4's parameter count: transformers "
            "builds no MTP layer (it skips mtp.* on load), so no count checks it; its stored "
            "bytes, MTP block included, are calc.weight_bytes; got true"
        )
