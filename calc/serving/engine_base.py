"""What both engines' configs share: the release parser and EngineConfig's common settings.

VllmConfig (calc/serving/engine_vllm.py) and SglangConfig (calc/serving/engine_sglang.py) add
each engine's own; calc.serving.engine.engine_config builds them with the release's defaults.
"""

from __future__ import annotations

from functools import cached_property, lru_cache
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from calc.dtypes import canonical_dtype
from calc.serving.kv_choices import ENGINE_SPELLING, check_kv_cache_dtype

Engine = Literal["vllm", "sglang"]


@lru_cache(maxsize=256)  # a pure function of the string, read several times a plan
def parse_version(text: str) -> tuple[int, int, int, int]:
    """'0.11.0' -> (0, 11, 0, 0); 'v0.10.1.1' -> (0, 10, 1, 1); '0.4.5.post3' -> (0, 4, 5, 3)
    (a post or fourth-number release sorts after its base); '0.9.2rc1' -> (0, 9, 2, 0) (a
    release candidate is taken as its release); a clear error otherwise."""
    t = str(text).strip().lstrip("vV")
    pieces = t.split(".")
    parts = []
    for piece in pieces[:3]:
        digits = ""
        for ch in piece:
            if not ch.isdigit():
                break
            digits += ch
        if not digits:
            raise ValueError(f"'version' must look like 0.11.0: got {text!r}")
        parts.append(int(digits))
    while len(parts) < 3:
        parts.append(0)
    post = pieces[3].removeprefix("post") if len(pieces) > 3 else "0"
    if not post.isdigit():
        raise ValueError(f"'version' must look like 0.11.0 or 0.4.5.post3: got {text!r}")
    return (*parts, int(post))  # type: ignore[return-value]


class EngineConfig(BaseModel):
    """Settings shared by both engines; VllmConfig and SglangConfig add their own."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    engine: Engine
    version: str
    tensor_parallel_size: int = Field(default=1, gt=0)
    pipeline_parallel_size: int = Field(default=1, gt=0)
    data_parallel_size: int = Field(default=1, gt=0)
    enable_expert_parallel: bool = False
    kv_cache_dtype: str = "auto"
    max_model_len: int | None = Field(default=None, gt=0)  # SGLang: context_length

    @cached_property
    def version_tuple(self) -> tuple[int, int, int]:
        """The parsed release, read dozens of times a plan (model_copy drops it: an update may
        change the version)."""
        return parse_version(self.version)

    def model_copy(self, *, update=None, deep: bool = False):
        copy = super().model_copy(update=update, deep=deep)
        copy.__dict__.pop("version_tuple", None)
        return copy

    @property
    def gpus_per_replica(self) -> int:
        return self.tensor_parallel_size * self.pipeline_parallel_size

    def kv_dtype(self, model_dtype: str = "bf16") -> str:
        """The cache's storage dtype: 'auto' stores K and V in the model's dtype."""
        if self.kv_cache_dtype == "auto":
            return canonical_dtype(model_dtype)
        if self.kv_cache_dtype in ("nvfp4", "fp4_e2m1"):  # packed formats, no element dtype
            return self.kv_cache_dtype  # (calc.serving.vllm_nvfp4, sglang_nvfp4, sglang_fp4)
        return canonical_dtype(self.kv_cache_dtype)

    @model_validator(mode="before")
    @classmethod
    def _kvcalc_spelling(cls, data):
        """The engines' bfloat16 / float16 as kvcalc's bf16 / fp16 (calc.serving.kv_choices)."""
        kv = data.get("kv_cache_dtype") if isinstance(data, dict) else None
        if isinstance(kv, str) and kv in ENGINE_SPELLING:
            data = {**data, "kv_cache_dtype": ENGINE_SPELLING[kv]}
        return data

    @model_validator(mode="after")
    def _check_common(self) -> EngineConfig:
        v = parse_version(self.version)
        check_kv_cache_dtype(self.engine, v, self.version, self.kv_cache_dtype)
        return self
