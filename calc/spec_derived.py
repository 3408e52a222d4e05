"""ModelSpec's derived values (head_dim, KV width, the layer layout, ...), kept apart from the
fields and their checks in calc/spec.py. Each reads the spec's fields only; the cached ones are
computed once per frozen spec (ModelSpec.model_copy drops them for the copy)."""

from __future__ import annotations

from functools import cached_property
from typing import Literal

from calc import layout
from calc.layout import LayerGroup


class DerivedShape:
    """Mixed into ModelSpec: properties of a spec's fields."""

    @property
    def head_dim(self) -> int:
        h = self.head_dim_
        return h if h is not None else self.hidden_size // self.num_attention_heads

    @property
    def n_kv_heads(self) -> int:
        g = self.num_key_value_heads
        return g if g is not None else self.num_attention_heads

    @property
    def kv_groups(self) -> int:
        """Query heads per KV head (H / G)."""
        return self.num_attention_heads // self.n_kv_heads

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank is not None

    @property
    def is_v4(self) -> bool:
        """DeepSeek-V4 attention (shared-KV MQA with compressors): o_groups is set."""
        return self.o_groups is not None

    @property
    def attention_kind(self) -> Literal["MHA", "GQA", "MQA", "MLA"]:
        if self.is_mla:
            return "MLA"
        if self.n_kv_heads == self.num_attention_heads:
            return "MHA"
        return "MQA" if self.n_kv_heads == 1 else "GQA"

    @property
    def is_moe(self) -> bool:
        return self.num_local_experts > 1

    @property
    def expert_intermediate_size(self) -> int:
        """One routed expert's width."""
        return self.moe_intermediate_size or self.intermediate_size

    @property
    def q_dim(self) -> int:
        """Width of the concatenated query heads, H * head_dim (MLA: H * (nope + rope))."""
        return self.num_attention_heads * self.qk_head_dim

    @property
    def qk_head_dim(self) -> int:
        """Per-head width of queries and keys (MLA: nope + rope)."""
        if self.is_mla:
            return self.qk_nope_head_dim + self.qk_rope_head_dim
        return self.head_dim

    @property
    def v_dim(self) -> int:
        """Per-head width of values (MLA: v_head_dim)."""
        return self.v_head_dim if self.is_mla else self.head_dim

    @property
    def kv_dim(self) -> int:
        """Width of one of K or V over all KV heads, G * head_dim."""
        return self.n_kv_heads * self.head_dim

    @cached_property
    def attention_types(self) -> tuple[str, ...]:
        """Per layer, in order: full / sliding / chunked / linear_attention."""
        L = self.num_hidden_layers
        if self.layer_types is not None:
            return layout.expand_runs(self.layer_types, L, periodic=False)
        if self.layer_pattern is not None:
            return layout.expand_runs(self.layer_pattern, L, periodic=True)
        if self.sliding_window is not None:
            n = self.sliding_window_pattern
            if n is None:
                return ("sliding_attention",) * L
            runs = (("sliding_attention", n - 1), ("full_attention", 1)) if n > 1 else ()
            return layout.expand_runs(runs or (("full_attention", 1),), L, periodic=True)
        if self.attention_chunk_size is not None:
            return ("chunked_attention",) * L
        if self.index_head_dim is not None and not self.is_v4:  # DeepseekV32Config: all DSA
            return ("indexed_attention",) * L
        return ("full_attention",) * L

    @cached_property
    def mlp_types(self) -> tuple[str, ...]:
        """Per layer, in order: dense or sparse (mixture of experts)."""
        L = self.num_hidden_layers
        if self.mlp_layer_types is not None:
            return layout.expand_runs(self.mlp_layer_types, L, periodic=False)
        if self.mlp_layer_pattern is not None:
            return layout.expand_runs(self.mlp_layer_pattern, L, periodic=True)
        return ("sparse" if self.is_moe else "dense",) * L

    @cached_property
    def layer_groups(self) -> tuple[LayerGroup, ...]:
        """Layers of the same attention and MLP type, counted (every formula sums over these)."""
        return layout.group(self.attention_types, self.mlp_types)

    @cached_property
    def attention_counts(self) -> dict[str, int]:
        """{attention type: layers}, for the types the model has."""
        out: dict[str, int] = {}
        for g in self.layer_groups:
            out[g.attention] = out.get(g.attention, 0) + g.count
        return out

    @property
    def layer_kinds(self) -> tuple[tuple[str, str], ...]:
        """Per layer, in order: (attention type, MLP type); for splits by position (PP)."""
        return tuple(zip(self.attention_types, self.mlp_types, strict=True))

    @property
    def n_moe_layers(self) -> int:
        return sum(g.count for g in self.layer_groups if g.mlp == "sparse")

    @property
    def layer_is_sliding(self) -> tuple[bool, ...]:
        """Per layer: does it attend within `sliding_window` only?"""
        return tuple(t == "sliding_attention" for t in self.attention_types)

    @property
    def n_sliding_layers(self) -> int:
        return self.attention_counts.get("sliding_attention", 0)

    @property
    def n_full_layers(self) -> int:
        return self.attention_counts.get("full_attention", 0)

    @cached_property
    def memo(self) -> dict:
        """Derived values computed once per spec (the spec is frozen); not part of equality."""
        return {}

    @property
    def label(self) -> str:
        return self.display_name or self.name
