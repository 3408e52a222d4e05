"""EngineConfig: one frozen, validated serving configuration, in the engine's own vocabulary.

`engine_config("vllm", version="0.11.0", ...)` or `engine_config("sglang", ...)` fills every
setting the user left unset with the default that engine version applies, and refuses settings
the engine refuses, with the engine's own wording. The defaults by release, each with the release
that changed it, are in calc/serving/defaults.py; the classes in engine_base.py (the shared
settings and the release parser), engine_vllm.py and engine_sglang.py.
"""

from __future__ import annotations

from calc.serving.defaults import (
    CHUNKED_LOCAL_HYBRID_FROM,
    check_vllm_release,
    vllm_batch_defaults,
    vllm_gpu_memory_utilization,
)
from calc.serving.engine_base import Engine, EngineConfig, parse_version
from calc.serving.engine_sglang import SglangConfig, sglang_settings
from calc.serving.engine_vllm import VllmConfig
from calc.serving.kv_choices import KV_CACHE_DTYPES
from calc.serving.vllm_block import vllm_default_block
from calc.serving.vllm_extensible import extensible_on
from calc.serving.vllm_kv_memory import parse_kv_cache_memory

__all__ = [
    "DEFAULT_VERSION",
    "ENGINES",
    "KV_CACHE_DTYPES",
    "Engine",
    "EngineConfig",
    "SglangConfig",
    "VllmConfig",
    "engine_config",
    "parse_version",
]

ENGINES: tuple[str, ...] = ("vllm", "sglang")
DEFAULT_VERSION = {"vllm": "0.34.0", "sglang": "0.5.23"}  # the newest releases read


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
        if kw.get("max_model_len") in (-1, "auto"):  # auto-fit (calc.serving.vllm_autofit)
            kw["max_model_len"], kw["auto_max_model_len"] = model_max_len, True
        mml = kw.get("max_model_len", model_max_len)
        tokens, seqs, chunked = vllm_batch_defaults(v, gpu_memory_gib, gpu_name, mml)
        kw.setdefault("max_num_batched_tokens", tokens)
        kw.setdefault("max_num_seqs", seqs)
        kw.setdefault("enable_chunked_prefill", chunked)
        if kw.get("kv_cache_memory_bytes") is not None:  # vLLM's text ("750M") or bytes
            kw["kv_cache_memory_bytes"] = parse_kv_cache_memory(kw["kv_cache_memory_bytes"], v)
        flag = kw.get("enable_extensible_kv_cache")
        sizing = {k: kw.get(k) for k in ("kv_cache_memory_bytes", "num_gpu_blocks_override")}
        kw["enable_extensible_kv_cache"] = extensible_on(v, gpu_vendor, flag, **sizing)
        backend = kw.get("attention_backend")
        kw.setdefault("block_size", vllm_default_block(v, gpu_vendor, backend)[0])
        util = vllm_gpu_memory_utilization(v, kw["enable_extensible_kv_cache"])
        kw.setdefault("gpu_memory_utilization", util)
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
