"""The dtypes vLLM keeps a linear layer's two states in: the conv state and the temporal (SSM /
recurrent) state, by release, model and the user's --mamba-cache-dtype / --mamba-ssm-cache-dtype.

Read in the vLLM sdists 0.10.1 - 0.33.0 (config/cache.py, model_executor/layers/mamba/
mamba_utils.py MambaStateDtypeCalculator, model_executor/models/config.py, qwen3_next.py):
- --mamba-cache-dtype (both states) and --mamba-ssm-cache-dtype (the temporal state) exist from
  0.10.1, each a MambaDType: "auto" | "float32" up to 0.12.x, + "float16" from 0.13.0,
  + "bfloat16" from 0.22.0.
- The conv state: the model dtype with --mamba-cache-dtype "auto", else that dtype.
- The temporal state (_mamba_state_dtype): --mamba-ssm-cache-dtype when given, else an "auto"
  the model's config class may set, else the conv state's dtype:
  - NemotronHForCausalLMConfig (from 0.13.0) sets an "auto" value from the checkpoint's
    config.json mamba_ssm_cache_dtype (spec.mamba_ssm_cache_dtype), else a default: "float16"
    up to 0.19.x, "float32" from 0.20.0 (DEFAULT_MAMBA_SSM_CACHE_DTYPE). GraniteMoeHybrid has
    no such class.
  - Qwen3_5ForConditionalGenerationConfig (every release serving Qwen3.5: 0.17.0 on, and
    through Qwen3_5ForCausalLMConfig 0.27.0 on for the text-only architectures) sets an "auto"
    value from the config.json's mamba_ssm_dtype ("float32" in Qwen/Qwen3.5-*'s; a given flag
    wins, with a warning). Qwen3-Next has no such class.
- The Gated DeltaNet (qwen3_next.py) passes only mamba_cache_dtype before 0.17.0
  (gated_delta_net_state_dtype(model_dtype, mamba_cache_dtype) -> both states in it), so a
  --mamba-ssm-cache-dtype changes nothing there; from 0.17.0 it passes both.
"""

from __future__ import annotations

from calc.dtypes import canonical_dtype

AUTO = ("auto", "auto")  # (--mamba-cache-dtype, --mamba-ssm-cache-dtype)
FLAGS_FROM = (0, 10, 1)  # CacheConfig.mamba_cache_dtype / mamba_ssm_cache_dtype
# MambaDType's values by release, newest first
CHOICES = (
    ((0, 22, 0), ("auto", "float32", "float16", "bfloat16")),
    ((0, 13, 0), ("auto", "float32", "float16")),
    (FLAGS_FROM, ("auto", "float32")),
)
NEMOTRON_SSM_CONFIG_FROM = (0, 13, 0)  # NemotronHForCausalLMConfig
NEMOTRON_SSM_FP32_FROM = (0, 20, 0)  # its default "float16" -> "float32"
GDN_SSM_FLAG_FROM = (0, 17, 0)  # qwen3_next.py passes mamba_ssm_cache_dtype
QWEN35_FROM = (0, 17, 0)  # registry.py: Qwen3_5(Moe)ForConditionalGeneration (not in 0.16.0)
QWEN35_TEXT_FROM = (0, 27, 0)  # registry.py: Qwen3_5(Moe)ForCausalLM (not in 0.26.0)
QWEN35_FAMILIES = frozenset({"qwen3_5_text", "qwen3_5_moe_text", "qwen3.5"})  # imported, preset


def release(v: tuple[int, ...]) -> str:
    return ".".join(map(str, v[:3] if v[3:] == (0,) else v))  # (0, 16, 0, 0) -> "0.16.0"


def is_qwen35(spec) -> bool:
    return spec.family in QWEN35_FAMILIES


def is_nemotron_h(spec) -> bool:
    return spec.family.replace("_", "-").startswith("nemotron")


def check_state_flags(version: tuple[int, ...], flags: tuple[str, str]) -> None:
    """vLLM's own refusal of a --mamba-cache-dtype / --mamba-ssm-cache-dtype it does not know."""
    for name, value in zip(("mamba_cache_dtype", "mamba_ssm_cache_dtype"), flags, strict=True):
        if value == "auto":
            continue
        choices = next((c for since, c in CHOICES if version >= since), None)
        if choices is None:
            raise ValueError(
                f"'{name}' is a vLLM setting from {release(FLAGS_FROM)}: got {value!r} for "
                f"{release(version)}"
            )
        if value not in choices:
            raise ValueError(
                f"'{name}' must be one of {', '.join(choices)} in vLLM {release(version)}: "
                f"got {value!r}"
            )


def _config_ssm_dtype(spec, version: tuple[int, ...]) -> str | None:
    """The dtype a model's config class puts in an "auto" --mamba-ssm-cache-dtype (docstring)."""
    if is_nemotron_h(spec) and "mamba" in spec.attention_counts:
        if version < NEMOTRON_SSM_CONFIG_FROM:
            return None
        if spec.mamba_ssm_cache_dtype is not None:
            return spec.mamba_ssm_cache_dtype
        return "fp32" if version >= NEMOTRON_SSM_FP32_FROM else "fp16"
    if is_qwen35(spec) and spec.mamba_ssm_cache_dtype is not None:
        since = QWEN35_TEXT_FROM if spec.vision is None else QWEN35_FROM
        return spec.mamba_ssm_cache_dtype if version >= since else None
    return None


def vllm_state_dtypes(
    spec, version: tuple[int, ...], model_dtype: str, flags: tuple[str, str] = AUTO
) -> tuple[str, str]:
    """(conv state dtype, temporal state dtype) of `spec`'s linear layers in vLLM `version`."""
    check_state_flags(version, flags)
    cache, ssm = flags
    conv = canonical_dtype(model_dtype if cache == "auto" else cache)
    if "linear_attention" in spec.attention_counts and version < GDN_SSM_FLAG_FROM:
        return conv, conv  # the Gated DeltaNet reads mamba_cache_dtype alone
    if ssm != "auto":
        return conv, canonical_dtype(ssm)
    config = _config_ssm_dtype(spec, version)
    return conv, canonical_dtype(config) if config else conv
