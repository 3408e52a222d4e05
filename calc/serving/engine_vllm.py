"""VllmConfig: vLLM's serving arguments, validated as vLLM validates them.

calc.serving.engine.engine_config fills the ones left unset with the release's defaults
(calc/serving/defaults.py).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from calc.serving.defaults import V1_DEFAULT_FROM
from calc.serving.engine_base import EngineConfig
from calc.serving.vllm_draft_group import check_backend_name
from calc.serving.vllm_extensible import check_extensible_flag
from calc.serving.vllm_kv_memory import check_kv_cache_memory_flag
from calc.serving.vllm_lora import check_lora_rank
from calc.serving.vllm_mamba import StateArgs, check_mode_flag
from calc.serving.vllm_spec import check_method
from calc.serving.vllm_state_dtype import check_state_flags
from calc.serving.vllm_towers import (
    check_encoder_tp_mode,
    check_language_model_only,
    check_skip_mm_profiling,
    parse_limits,
)


class VllmConfig(EngineConfig):
    """vLLM's serving arguments (`vllm serve --help` names, underscores for dashes)."""

    engine: Literal["vllm"] = "vllm"
    gpu_memory_utilization: float = 0.9  # engine_config: 0.92 from 0.20.0; 0.34.0: 1.0 extensible
    block_size: int = Field(default=16, gt=0)  # engine_config: 64 from 0.34.0 (vllm_block)
    max_num_batched_tokens: int = Field(gt=0)
    max_num_seqs: int = Field(gt=0)
    enforce_eager: bool = False
    cudagraph_memory_gib: float | None = Field(default=None, ge=0)  # from 0.20; None: estimate
    enable_chunked_prefill: bool = True
    disable_hybrid_kv_cache_manager: bool = False
    # the environment variable VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE (0.11.0: off)
    allow_chunked_local_attn_hybrid: bool = False
    # --quantization: a quantized checkpoint's own method, or "fp8" on an unquantized one
    # (calc.serving.quant_weights; other runtime methods are refused there)
    quantization: str | None = None
    # a linear layer's states (calc.serving.vllm_state_dtype: the choices and "auto" by release)
    mamba_cache_dtype: str = "auto"
    mamba_ssm_cache_dtype: str = "auto"
    # --[no-]enable-prefix-caching; None: the release's default (it changes only the pages of a
    # linear layer's state: calc.serving.vllm_mamba)
    enable_prefix_caching: bool | None = None
    # --mamba-cache-mode (0.16.0 - 0.32.x; no effect from 0.33.0); None: not given
    mamba_cache_mode: str | None = None
    # --decode-context-parallel-size: a request's tokens split over dcp of the TP ranks
    # (calc.serving.vllm_dcp; its checks need the model, so they run in plan.prepare)
    decode_context_parallel_size: int = Field(default=1, gt=0)
    # --speculative-config's method and num_speculative_tokens (calc.serving.vllm_spec; checked
    # against the model in plan.prepare); None: no speculative decoding
    speculative_method: str | None = None
    num_speculative_tokens: int | None = Field(default=None, gt=0)
    # --attention-backend, the target's only: modelled for an MTP drafter's KV-cache group
    # (calc.serving.vllm_draft_group; checked against the model and GPU in plan.prepare)
    attention_backend: str | None = None
    # --[no-]enable-extensible-kv-cache (0.34.0 on; calc.serving.vllm_extensible): engine_config
    # resolves None to the release's default (on on CUDA and ROCm)
    enable_extensible_kv_cache: bool | None = None
    # --num-gpu-blocks-override: the blocks vLLM allocates whatever the memory (calc.serving.
    # figures: from 0.21.0 the checks plan against them too); turns the extensible cache off
    num_gpu_blocks_override: int | None = Field(default=None, gt=0)
    # --kv-cache-memory-bytes (0.10.2 on; calc.serving.vllm_kv_memory): every worker's KV-cache
    # memory in bytes instead of the profiled figure (engine_config reads vLLM's text, "750M");
    # 0 profiles as without it; any value turns the extensible cache off
    kv_cache_memory_bytes: int | None = Field(default=None, ge=0)
    # --language-model-only (0.17.0 on; calc.serving.vllm_towers): a multimodal checkpoint's
    # vision tower is not built, nor its dummy images profiled
    language_model_only: bool = False
    # --limit-mm-per-prompt's counts, (modality, count) pairs (JSON text or a dict read as
    # vLLM does: calc.serving.vllm_towers.parse_limits); None: 999 each
    limit_mm_per_prompt: tuple[tuple[str, int], ...] | None = None
    # --skip-mm-profiling (0.10.1 on): no dummy images in the profile run (calc.serving.mm_profile)
    skip_mm_profiling: bool = False
    # --cpu-offload-gb: GiB of each worker's decoder-layer parameters kept in CPU memory
    # (calc.serving.vllm_offload)
    cpu_offload_gb: float = Field(default=0, ge=0, le=10**6)
    # --mm-encoder-tp-mode (0.10.2 on): "data" keeps the vision tower whole on every TP rank
    # (calc.serving.vllm_towers.encoder_data_parallel)
    mm_encoder_tp_mode: Literal["weights", "data"] = "weights"
    # --enable-lora and its slots (calc.serving.vllm_lora): vLLM's defaults 1 adapter of rank 16
    enable_lora: bool = False
    max_loras: int = Field(default=1, gt=0, le=1024)
    max_lora_rank: int = 16
    fully_sharded_loras: bool = False
    # --max-model-len -1 / auto: the longest context that fits (calc.serving.vllm_autofit);
    # engine_config sets it and max_model_len to the model's own
    auto_max_model_len: bool = False

    @field_validator("limit_mm_per_prompt", mode="before")
    @classmethod
    def _limits(cls, value):
        return parse_limits(value)

    @model_validator(mode="after")
    def _check(self) -> VllmConfig:
        u = self.gpu_memory_utilization
        if not 0 < u <= 1:  # vllm/config/cache.py: Field(gt=0, le=1)
            raise ValueError(f"'gpu_memory_utilization' must be in (0, 1]: got {u}")
        if self.block_size not in (1, 8, 16, 32, 64, 128, 256):
            raise ValueError(
                f"'block_size' must be one of 1, 8, 16, 32, 64, 128, 256: got {self.block_size}"
            )
        check_state_flags(self.version_tuple, self.state_args[:2])
        check_mode_flag(self.version_tuple, self.mamba_cache_mode)
        check_method(self.speculative_method, self.num_speculative_tokens)
        check_backend_name(self.attention_backend)
        check_extensible_flag(self.version_tuple, self.enable_extensible_kv_cache)
        check_kv_cache_memory_flag(self.version_tuple, self.kv_cache_memory_bytes)
        check_language_model_only(self.version_tuple, self.language_model_only)
        check_skip_mm_profiling(self.version_tuple, self.skip_mm_profiling)
        check_encoder_tp_mode(self.version_tuple, self.mm_encoder_tp_mode)
        check_lora_rank(self.max_lora_rank)
        return self

    @property
    def state_args(self) -> StateArgs:
        return StateArgs(
            self.mamba_cache_dtype,
            self.mamba_ssm_cache_dtype,
            self.enable_prefix_caching,
            self.mamba_cache_mode,
        )

    @property
    def is_v1(self) -> bool:
        return self.version_tuple >= V1_DEFAULT_FROM

    @property
    def expert_parallel_size(self) -> int:
        """FusedMoE's ep: tp x dp with --enable-expert-parallel, else 1 (experts over tp)."""
        tp, dp = self.tensor_parallel_size, self.data_parallel_size
        return tp * dp if self.enable_expert_parallel else 1
