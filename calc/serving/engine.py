"""EngineConfig: one frozen, validated serving configuration, in the engine's own vocabulary.

`engine_config("vllm", version="0.11.0", ...)` or `engine_config("sglang", ...)` fills every
setting the user left unset with the default that engine version applies, and refuses settings
the engine refuses, with the engine's own wording. The defaults by release, each with the release
that changed it, are in calc/serving/defaults.py.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from calc.dtypes import canonical_dtype
from calc.serving.defaults import (
    CHUNKED_LOCAL_HYBRID_FROM,
    V1_DEFAULT_FROM,
    check_vllm_release,
    vllm_batch_defaults,
    vllm_gpu_memory_utilization,
)
from calc.serving.engine_sglang import sglang_settings
from calc.serving.sglang_hybrid import SglangMambaArgs
from calc.serving.sglang_multimodal import check_enable_multimodal
from calc.serving.sglang_spec import check_algorithm
from calc.serving.vllm_draft_group import check_backend_name
from calc.serving.vllm_mamba import StateArgs, check_mode_flag
from calc.serving.vllm_spec import check_method
from calc.serving.vllm_state_dtype import check_state_flags

Engine = Literal["vllm", "sglang"]
ENGINES: tuple[str, ...] = ("vllm", "sglang")
DEFAULT_VERSION = {"vllm": "0.33.0", "sglang": "0.5.23"}  # the newest releases read
KV_CACHE_DTYPES = ("auto", "fp8", "fp8_e4m3", "fp8_e5m2", "bf16", "fp16", "fp32")


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

    @property
    def version_tuple(self) -> tuple[int, int, int]:
        return parse_version(self.version)

    @property
    def gpus_per_replica(self) -> int:
        return self.tensor_parallel_size * self.pipeline_parallel_size

    def kv_dtype(self, model_dtype: str = "bf16") -> str:
        """The cache's storage dtype: 'auto' stores K and V in the model's dtype."""
        if self.kv_cache_dtype == "auto":
            return canonical_dtype(model_dtype)
        return canonical_dtype(self.kv_cache_dtype)

    @model_validator(mode="after")
    def _check_common(self) -> EngineConfig:
        parse_version(self.version)
        if self.kv_cache_dtype not in KV_CACHE_DTYPES:
            raise ValueError(
                f"'kv_cache_dtype' must be one of {', '.join(KV_CACHE_DTYPES)}: "
                f"got {self.kv_cache_dtype!r}"
            )
        return self


class VllmConfig(EngineConfig):
    """vLLM's serving arguments (`vllm serve --help` names, underscores for dashes)."""

    engine: Literal["vllm"] = "vllm"
    gpu_memory_utilization: float = 0.9  # engine_config: 0.92 from 0.20.0
    block_size: int = Field(default=16, gt=0)
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


class SglangConfig(EngineConfig, SglangMambaArgs):  # + the mamba pool's (sglang_hybrid)
    """SGLang's server arguments (`python -m sglang.launch_server --help` names)."""

    engine: Literal["sglang"] = "sglang"
    mem_fraction_static: float
    page_size: int = Field(default=1, gt=0)
    chunked_prefill_size: int = Field(gt=0)
    max_running_requests: int | None = Field(default=None, gt=0)
    enable_dp_attention: bool = False
    enable_dp_lm_head: bool = False  # the LM head over the attention TP group (sglang_parallel)
    moe_dense_tp_size: int | None = None  # 1: DeepSeek's dense MLP layers replicated
    ep_size: int | None = None  # --ep-size: 1 or tp_size (enable_expert_parallel: tp_size)
    # what the default mem_fraction_static reads from 0.5.3rc2 on (defaults_sglang.py)
    cuda_graph_max_bs: int | None = Field(default=None, gt=0)
    swa_full_tokens_ratio: float = Field(default=0.8, gt=0, le=1)
    # --disable-piecewise-cuda-graph; None: the release's default (on from 0.5.10 where SGLang's
    # rules allow, defaults_sglang_2026.py); it changes the default mem_fraction_static
    disable_piecewise_cuda_graph: bool | None = None
    # --speculative-algorithm and its three numbers (calc.serving.sglang_spec; engine_config
    # completes them as ServerArgs does)
    speculative_algorithm: str | None = None
    speculative_num_steps: int | None = Field(default=None, gt=0)
    speculative_eagle_topk: int | None = Field(default=None, gt=0)
    speculative_num_draft_tokens: int | None = Field(default=None, gt=0)
    # kvcalc's: the draft checkpoint's layers (its num_hidden_layers; an MTP draft's
    # num_nextn_predict_layers), which the target's pool counts from 0.5.14 (sglang_spec_pool)
    speculative_draft_num_layers: int | None = Field(default=None, gt=0)
    # kvcalc's: the draft worker's own "Load weight end ... mem usage" (GB as SGLang prints
    # it: GiB), resident when the target's pool is sized from 0.5.14 (sglang_spec_pool)
    speculative_draft_weights_gib: float | None = Field(default=None, gt=0, le=4096)
    # --enable-multimodal (0.4.6 on); None: not given (calc.serving.sglang_multimodal)
    enable_multimodal: bool | None = None
    # --mm-feature-transport (0.5.16 on; checked with the GPU in plan.prepare: sglang_budget)
    mm_feature_transport: str | None = None

    @model_validator(mode="after")
    def _check(self) -> SglangConfig:
        check_enable_multimodal(self.version, self.enable_multimodal)
        check_algorithm(
            self.speculative_algorithm,
            self.speculative_num_steps,
            self.speculative_eagle_topk,
            self.speculative_num_draft_tokens,
            self.speculative_draft_num_layers,
            self.speculative_draft_weights_gib,
        )
        f = self.mem_fraction_static
        if not 0 < f < 1:
            raise ValueError(f"'mem_fraction_static' must be in (0, 1): got {f}")
        if self.enable_dp_attention and self.data_parallel_size < 2:
            raise ValueError("'enable_dp_attention' needs dp_size >= 2: got dp_size=1")
        if self.enable_dp_attention and self.tensor_parallel_size % self.data_parallel_size:
            raise ValueError(
                f"'tp_size' must be divisible by dp_size={self.data_parallel_size} with DP "
                f"attention: got {self.tensor_parallel_size}"
            )
        if self.moe_dense_tp_size not in (1, None):  # server_args.check_server_args
            raise ValueError("moe_dense_tp_size only support 1 and None currently")
        tp, ep = self.tensor_parallel_size, self.ep_size
        if ep is not None and ep not in (1, tp):
            raise ValueError(
                f"'ep_size' must be 1 or tp_size={tp} (SGLang then splits each expert tp / ep "
                f"ways inside an expert-parallel rank, which kvcalc does not model): got {ep}"
            )
        if self.enable_expert_parallel and ep == 1:
            raise ValueError("'ep_size' is tp_size with enable_expert_parallel: got 1")
        return self


def engine_config(
    engine: str = "vllm",
    *,
    version: str | None = None,
    gpu_memory_gib: float = 80.0,
    gpu_name: str = "",
    model_max_len: int = 2048,
    gpu_vendor: str = "NVIDIA",
    multimodal: str | None = None,
    vision_tower: tuple[int, int] | None = None,
    nsa: bool = False,
    mla: bool | None = None,
    linear_attention: bool = False,
    nemotron_h: bool = False,
    model_name: str = "",
    model_family: str = "",
    sglang_arch: str = "other",
    **settings,
) -> VllmConfig | SglangConfig:
    """A validated config with the version's defaults for every setting left out or None.

    `gpu_memory_gib` (nvidia-smi's total / 1024) / `gpu_name` / `gpu_vendor` / `model_max_len`
    decide the defaults that depend on them; SGLang's mem_fraction_static also the model's
    vision encoder kind (`multimodal`, None for a text model) and size (`vision_tower`: its
    num_hidden_layers and hidden_size; needed for a multimodal default from v0.4.9.post3),
    DeepSeek NSA (`nsa`; SGLang's DSA settings also `gpu_name` and `model_family`), and from
    SGLang 0.5.10 (its prefill CUDA graph) MLA (`mla`), linear attention, NemotronH (`nemotron_h`,
    a Mamba-2 hybrid of that architecture) and the model's name; SGLang's speculative defaults
    the model's architecture (`sglang_arch`: calc.serving.sglang_spec.sglang_arch).
    A setting of the other engine is refused with its name.
    """
    if engine not in ENGINES:
        raise ValueError(f"'engine' must be one of {', '.join(ENGINES)}: got {engine!r}")
    version = version or DEFAULT_VERSION[engine]
    v = parse_version(version)
    kw = {k: val for k, val in settings.items() if val is not None}
    cls = VllmConfig if engine == "vllm" else SglangConfig
    unknown = sorted(set(kw) - set(cls.model_fields))
    if unknown:
        raise ValueError(f"'{unknown[0]}' is not a {engine} setting")
    if engine == "vllm":
        check_vllm_release(v)
        mml = kw.get("max_model_len", model_max_len)
        tokens, seqs, chunked = vllm_batch_defaults(v, gpu_memory_gib, gpu_name, mml)
        kw.setdefault("max_num_batched_tokens", tokens)
        kw.setdefault("max_num_seqs", seqs)
        kw.setdefault("enable_chunked_prefill", chunked)
        kw.setdefault("gpu_memory_utilization", vllm_gpu_memory_utilization(v))
        kw.setdefault("allow_chunked_local_attn_hybrid", v >= CHUNKED_LOCAL_HYBRID_FROM)
        if mml > model_max_len:
            raise ValueError(
                f"User-specified max_model_len ({mml}) is greater than the derived "
                f"max_model_len (max_position_embeddings={model_max_len} in model's config.json)"
            )
    else:
        kw = sglang_settings(
            version,
            kw,
            gpu_memory_gib=gpu_memory_gib,
            gpu_vendor=gpu_vendor,
            multimodal=multimodal,
            vision_tower=vision_tower,
            nsa=nsa,
            mla=mla,
            linear_attention=linear_attention,
            nemotron_h=nemotron_h,
            model_name=model_name,
            gpu_name=gpu_name,
            model_family=model_family,
            sglang_arch=sglang_arch,
        )
    kw.setdefault("max_model_len", model_max_len)
    return cls(engine=engine, version=version, **kw)
