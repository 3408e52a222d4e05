"""The model spec: one frozen, validated description of a decoder-only transformer.

Field names follow Hugging Face `config.json` where one exists (`num_hidden_layers`,
`num_key_value_heads`, `head_dim`, `intermediate_size`, `tie_word_embeddings`, ...), so a preset
can be diffed against its source. Everything the calculators need is here; nothing else is read.

What it describes: dense and mixture-of-experts decoders with MHA / GQA / MQA attention, an
explicit `head_dim` (Gemma: 256 != 3072 / 16), 2-matrix or gated 3-matrix MLPs, LayerNorm with or
without bias or RMSNorm, 1, 2 or 4 norms per block, learned / RoPE / ALiBi positions, sequential
or parallel attention+MLP blocks, sliding windows on all layers or on a repeating pattern.
But: no encoder-decoders, no MLA (DeepSeek), no per-layer head counts, no shared experts.

>>> spec = ModelSpec(name="toy", num_hidden_layers=2, hidden_size=64, num_attention_heads=8,
...                  num_key_value_heads=2, intermediate_size=128, vocab_size=100)
>>> spec.head_dim, spec.kv_groups, spec.attention_kind
(8, 4, 'GQA')
"""

from __future__ import annotations

import datetime as _dt
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from calc.limits import check_limit

MlpKind = Literal[
    "standard", "gated"
]  # standard: up+down (GELU); gated: gate+up+down (SwiGLU/GeGLU)
NormKind = Literal["layernorm", "layernorm_nobias", "rmsnorm"]
PositionKind = Literal["learned", "rope", "alibi"]
BlockKind = Literal["sequential", "parallel"]


class ModelSpec(BaseModel):
    """A decoder-only transformer, exactly enough to count its parameters, FLOPs and KV cache."""

    # populate_by_name: `model_validate(spec.model_dump())` round-trips (the dump says head_dim_)
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    # --- metadata -----------------------------------------------------------------------------
    name: str = Field(min_length=1)
    family: str = "custom"
    display_name: str | None = None
    source: tuple[str, ...] = ()  # URLs of the config.json / paper the numbers come from
    retrieved: _dt.date | None = None  # when `source` was read
    published_params: str | None = None  # as published: "540.35B", "7B", "8,538,074,112"
    published_active_params: str | None = None  # MoE: active per token, as published
    notes: str | None = None  # resolutions of inconsistent sources, conventions

    # --- shape (HF config.json names) ---------------------------------------------------------
    num_hidden_layers: int = Field(gt=0)
    hidden_size: int = Field(gt=0)
    num_attention_heads: int = Field(gt=0)
    num_key_value_heads: int | None = Field(default=None, gt=0)  # None: MHA (= query heads)
    head_dim_: int | None = Field(default=None, gt=0, alias="head_dim")  # None: hidden / heads
    intermediate_size: int = Field(gt=0)  # per expert for MoE
    vocab_size: int = Field(gt=0)
    max_position_embeddings: int = Field(default=2048, gt=0)  # context length

    # --- architecture -------------------------------------------------------------------------
    mlp_kind: MlpKind = "gated"
    hidden_act: str = "silu"  # informational: silu (SwiGLU), gelu (GeGLU / GPT), ...
    # strict: 1, "yes" or "false" are not booleans (lax pydantic would read "false" as False)
    tie_word_embeddings: bool = Field(default=False, strict=True)
    qkv_bias: bool = Field(default=False, strict=True)
    attn_out_bias: bool = Field(default=False, strict=True)
    mlp_bias: bool = Field(default=False, strict=True)
    norm_kind: NormKind = "rmsnorm"
    norms_per_block: Literal[1, 2, 4] = 2  # 1: parallel (PaLM, Falcon-7B); 4: Gemma 2 sandwich
    final_norm: bool = Field(default=True, strict=True)
    position_embedding: PositionKind = "rope"
    block_kind: BlockKind = "sequential"

    # --- sliding window -----------------------------------------------------------------------
    sliding_window: int | None = Field(default=None, gt=0)  # tokens a sliding layer attends to
    # None: every layer slides (Mistral). N: every N-th layer (1-based) is global, the rest slide
    # (Gemma 2: N=2, layer 0 slides, layer 1 is global; same meaning as Gemma 3's config field).
    sliding_window_pattern: int | None = Field(default=None, gt=0)

    # --- mixture of experts (Mixtral names) ---------------------------------------------------
    num_local_experts: int = Field(default=1, gt=0)  # 1: dense
    num_experts_per_tok: int = Field(default=1, gt=0)

    # --- derived ------------------------------------------------------------------------------
    @property
    def head_dim(self) -> int:
        return (
            self.head_dim_
            if self.head_dim_ is not None
            else self.hidden_size // self.num_attention_heads
        )

    @property
    def n_kv_heads(self) -> int:
        return (
            self.num_key_value_heads
            if self.num_key_value_heads is not None
            else self.num_attention_heads
        )

    @property
    def kv_groups(self) -> int:
        """Query heads per KV head (H / G)."""
        return self.num_attention_heads // self.n_kv_heads

    @property
    def attention_kind(self) -> Literal["MHA", "GQA", "MQA"]:
        if self.n_kv_heads == self.num_attention_heads:
            return "MHA"
        return "MQA" if self.n_kv_heads == 1 else "GQA"

    @property
    def is_moe(self) -> bool:
        return self.num_local_experts > 1

    @property
    def q_dim(self) -> int:
        """Width of the concatenated query heads, H * head_dim."""
        return self.num_attention_heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        """Width of one of K or V over all KV heads, G * head_dim."""
        return self.n_kv_heads * self.head_dim

    @property
    def layer_is_sliding(self) -> tuple[bool, ...]:
        """Per layer: does it attend within `sliding_window` only?"""
        L = self.num_hidden_layers
        if self.sliding_window is None:
            return (False,) * L
        if self.sliding_window_pattern is None:
            return (True,) * L
        n = self.sliding_window_pattern
        return tuple((i + 1) % n != 0 for i in range(L))

    @property
    def n_sliding_layers(self) -> int:
        if self.sliding_window is None:
            return 0
        L, n = self.num_hidden_layers, self.sliding_window_pattern
        return L if n is None else L - L // n  # layers n, 2n, ... (1-based) are global

    @property
    def n_full_layers(self) -> int:
        return self.num_hidden_layers - self.n_sliding_layers

    @property
    def label(self) -> str:
        return self.display_name or self.name

    # --- checks -------------------------------------------------------------------------------
    @field_validator(
        "num_hidden_layers",
        "hidden_size",
        "num_attention_heads",
        "num_key_value_heads",
        "head_dim_",
        "intermediate_size",
        "vocab_size",
        "max_position_embeddings",
        "norms_per_block",
        "sliding_window",
        "sliding_window_pattern",
        "num_local_experts",
        "num_experts_per_tok",
        mode="before",
    )
    @classmethod
    def _not_bool(cls, value: object, info: ValidationInfo) -> object:
        # lax pydantic reads True as 1: a bool here is a mistake (a flag in the wrong field)
        if isinstance(value, bool):
            raise ValueError("must be an integer, not a bool")
        return check_limit(info.field_name, value)  # calc/limits.py: 10^12 layers is a typo

    @model_validator(mode="after")
    def _check(self) -> ModelSpec:
        H, G = self.num_attention_heads, self.n_kv_heads
        if H % G:
            raise ValueError(f"'num_key_value_heads' must divide num_attention_heads={H}: got {G}")
        if self.head_dim_ is None and self.hidden_size % H:
            raise ValueError(
                f"'hidden_size' must be divisible by num_attention_heads={H} when head_dim is "
                f"not given: got {self.hidden_size}"
            )
        if self.num_experts_per_tok > self.num_local_experts:
            raise ValueError(
                f"'num_experts_per_tok' must be <= num_local_experts={self.num_local_experts}: "
                f"got {self.num_experts_per_tok}"
            )
        if self.sliding_window_pattern is not None and self.sliding_window is None:
            raise ValueError(
                "'sliding_window_pattern' needs a sliding_window: got pattern "
                f"{self.sliding_window_pattern} with sliding_window=None"
            )
        if self.block_kind == "parallel" and self.norms_per_block == 4:
            raise ValueError("'norms_per_block' must be 1 or 2 for a parallel block: got 4")
        if self.position_embedding == "learned" and self.max_position_embeddings <= 0:
            raise ValueError(  # pragma: no cover - Field(gt=0) catches it first
                f"'max_position_embeddings' must be > 0: got {self.max_position_embeddings}"
            )
        return self

    def replace(self, **changes) -> ModelSpec:
        """A validated copy with some fields changed (`model_copy` skips validation)."""
        if "head_dim_" in changes:  # the field's own name: the dump below uses the alias
            changes["head_dim"] = changes.pop("head_dim_")
        data = self.model_dump(by_alias=True)
        data.update(changes)
        return ModelSpec.model_validate(data)
