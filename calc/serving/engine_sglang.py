"""SGLang's settings as its ServerArgs completes them: every setting left unset gets the default
of that release (mem_fraction_static, chunked_prefill_size, cuda_graph_max_bs), then the
adjustments SGLang applies to the fraction (multimodal models) and the chunk (DP attention).
The rules by release are in calc/serving/defaults.py, defaults_sglang.py and
defaults_sglang_2026.py; calc.serving.engine.engine_config calls this for engine "sglang".
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from calc.serving import defaults_sglang_2026 as sg26
from calc.serving.defaults import (
    sglang_chunk_default,
    sglang_graph_bs_default,
    sglang_mem_fraction_default,
    sglang_version,
)
from calc.serving.defaults_sglang import (
    SGLANG_RESERVE_FROM,
    sglang_model_checks,
    sglang_vlm_default_scale,
    sglang_vlm_runner_scale,
)
from calc.serving.engine_base import EngineConfig
from calc.serving.indexed_sglang import sglang_dsa_settings
from calc.serving.sglang_hybrid import SglangMambaArgs
from calc.serving.sglang_multimodal import check_enable_multimodal
from calc.serving.sglang_spec import check_algorithm, speculative_settings
from calc.serving.sglang_token_cap import check_max_total_tokens, parse_max_total_tokens


def sglang_settings(
    version: str,
    settings: dict,
    *,
    gpu_memory_gib: float,
    gpu_vendor: str,
    multimodal: str | None,
    vision_tower: tuple[int, int] | None,
    nsa: bool,
    mla: bool | None,
    linear_attention: bool,
    model_name: str,
    nemotron_h: bool = False,
    gpu_name: str = "",
    model_family: str = "",
    sglang_arch: str = "other",
) -> dict:
    """The given settings (None values already dropped) completed with `version`'s defaults;
    the arguments after `settings` are engine_config's (its docstring)."""
    kw = dict(settings)
    sv = sglang_version(version)
    if "max_total_tokens" in kw:  # as the release's argparse reads it (sglang_token_cap)
        kw["max_total_tokens"] = parse_max_total_tokens(kw["max_total_tokens"], sv)
    # max_running_requests 48 and the draft numbers (calc.serving.sglang_spec); the releases
    # that read speculative decoding complete it after the memory defaults, which see the
    # given max_running_requests only
    given_mrr = kw.get("max_running_requests")
    kw = speculative_settings(sv, kw, sglang_arch)
    if nsa:  # page size, DP attention, KV dtype: ServerArgs' DeepSeek DSA overrides
        glm = model_family in ("glm", "glm_moe_dsa")
        kw = sglang_dsa_settings(sv, kw, gpu_name, gpu_vendor, glm)
    sg26.check_piecewise_setting(sv, kw.get("disable_piecewise_cuda_graph"))
    given = kw.get("mem_fraction_static")
    forced = sglang_model_checks(sv, given, nsa=nsa)
    if forced is not None:
        kw["mem_fraction_static"] = forced
    if "mem_fraction_static" not in kw:
        if sv >= SGLANG_RESERVE_FROM and gpu_vendor.upper() != "NVIDIA":
            raise ValueError(
                f"'mem_fraction_static' must be given for sglang {version} on a "
                f"{gpu_vendor} GPU: kvcalc models its default from nvidia-smi's memory"
            )
        newer = {}
        if sv > sg26.AFTER_056:  # what the releases after v0.5.6.post2 also read
            newer = dict(
                max_running_requests=given_mrr,
                disable_piecewise_cuda_graph=kw.get("disable_piecewise_cuda_graph"),
                mla=mla,
                nsa=nsa,
                linear_attention=linear_attention,
                nemotron_h=nemotron_h,
                model_name=model_name,
                context_length=kw.get("max_model_len"),  # only when given
                multimodal=multimodal,  # SGLang's is_multimodal (calc.serving.sglang_multimodal)
                max_total_tokens=kw.get("max_total_tokens"),  # caps the prefill graph's tokens
            )
        kw["mem_fraction_static"] = sglang_mem_fraction_default(
            sv,
            kw.get("tensor_parallel_size", 1),
            gpu_memory_gib,
            kw.get("pipeline_parallel_size", 1),
            dp=kw.get("data_parallel_size", 1),
            dp_attention=kw.get("enable_dp_attention", False),
            chunked_prefill_size=kw.get("chunked_prefill_size"),
            cuda_graph_max_bs=kw.get("cuda_graph_max_bs"),
            speculative_algorithm=kw.get("speculative_algorithm"),
            **newer,
        )
        scale = sglang_vlm_default_scale(sv, bool(multimodal), vision_tower)
        kw["mem_fraction_static"] *= scale  # adjust_mem_fraction_for_vlm (0.4.9 on)
    scale = sglang_vlm_runner_scale(sv, multimodal)  # ModelRunner's own, before 0.4.9
    kw["mem_fraction_static"] = kw["mem_fraction_static"] * scale
    kw.setdefault("chunked_prefill_size", sglang_chunk_default(sv, gpu_memory_gib))
    tp = kw.get("tensor_parallel_size", 1)
    kw.setdefault("cuda_graph_max_bs", sglang_graph_bs_default(sv, gpu_memory_gib, tp, given_mrr))
    if kw.get("enable_dp_attention") and kw.get("data_parallel_size", 1) > 1:
        # server_args: "DP attention is enabled. The chunked prefill size is adjusted";
        # // 2 before 0.4.4.post1 (where dp_size was set to tp_size), // dp_size from it
        div = kw["data_parallel_size"] if sv >= (0, 4, 4, 1) else 2
        kw["chunked_prefill_size"] = kw["chunked_prefill_size"] // div
    return kw


class SglangConfig(EngineConfig, SglangMambaArgs):  # + the mamba pool's (sglang_hybrid)
    """SGLang's server arguments (`python -m sglang.launch_server --help` names)."""

    engine: Literal["sglang"] = "sglang"
    mem_fraction_static: float
    page_size: int = Field(default=1, gt=0)
    chunked_prefill_size: int = Field(gt=0)
    max_running_requests: int | None = Field(default=None, gt=0)
    # --max-total-tokens: a cap on the token pool's max_total_num_tokens (sglang_token_cap)
    max_total_tokens: int | None = None
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
    # --cpu-offload-gb (an int in SGLang's argparse): GiB of each rank's decoder-layer weights
    # kept in CPU memory (calc.serving.vllm_offload, the same offloader loop)
    cpu_offload_gb: int = Field(default=0, ge=0, le=10**6)

    @model_validator(mode="after")
    def _check(self) -> SglangConfig:
        check_enable_multimodal(self.version, self.enable_multimodal)
        check_max_total_tokens(self.max_total_tokens)
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
