"""A rotary position embedding's scaling, as config.json states it (`rope_scaling`, or
transformers 5's `rope_parameters`). It changes no parameter count; it changes the cos/sin table
an engine builds and keeps with the weights (calc.serving.sharding.rotary_tables).

Honoured rope types (anything else is refused by name, calc/hf/rope.py), with the rows of the
table vLLM 0.19.0's get_rope builds for max_position P (vllm 0.19.0 sdist,
vllm/model_executor/layers/rotary_embedding/):
- linear (linear_scaling_rope.py): P x factor rows (max_len = max_position_embeddings *
  scaling_factor);
- dynamic (dynamic_ntk_scaling_rope.py): P x factor rows;
- yarn (yarn_scaling_rope.py; deepseek_scaling_rope.py for DeepSeek-V2/V3 and Kimi K2):
  original_max_position_embeddings x factor rows, whatever P is;
- llama3 (llama3_rope.py): P rows (only the frequencies change);
- longrope (phi3_long_rope_scaled_rope.py): original_max_position_embeddings + P rows (a short
  and a long table, concatenated).
"""

from __future__ import annotations

from math import ceil
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

RopeType = Literal["linear", "dynamic", "yarn", "llama3", "longrope"]
NEEDS_ORIGINAL = ("yarn", "longrope")


class RopeScaling(BaseModel):
    """config.json's rope_scaling: the fields that size the cos/sin table."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    rope_type: RopeType
    factor: float = Field(default=1.0, gt=0)  # longrope: not used
    original_max_position_embeddings: int | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _check(self) -> RopeScaling:
        if self.rope_type in NEEDS_ORIGINAL and self.original_max_position_embeddings is None:
            raise ValueError(
                f"rope_type {self.rope_type!r} needs original_max_position_embeddings: got None"
            )
        return self

    def table_rows(self, max_position: int) -> int:
        """Rows of the cos/sin table vLLM builds for this scaling at max_position."""
        t, f, orig = self.rope_type, self.factor, self.original_max_position_embeddings
        if t in ("linear", "dynamic"):
            return ceil(max_position * f)  # torch.arange(P * factor)
        if t == "yarn":
            return ceil(orig * f)
        if t == "longrope":
            return orig + max_position
        return max_position  # llama3
