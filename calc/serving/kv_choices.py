"""--kv-cache-dtype's choices by engine and release, in kvcalc's spelling ("bf16", "fp16"); the
engines' own "bfloat16" / "float16" are read as the same.

- vLLM (CacheDType in vllm/config/cache.py, the 0.10.1 - 0.34.0 sdists; arg_utils.py's choices
  before): "auto", "fp8", "fp8_e4m3", "fp8_e5m2" in every release kvcalc plans; "bfloat16" from
  0.11.0 (absent from the 0.10.2 sdist); "float16" from 0.18.0 (absent from 0.17.1); "nvfp4"
  from 0.20.0 (its GPU and release rules: calc.serving.vllm_nvfp4).
- SGLang (server_args.py's argparse; arg_groups/fields/model.py from 0.5.20; the pypi.org wheels
  0.4.4 - 0.5.23): "auto", "fp8_e5m2", "fp8_e4m3" in every release read; "bf16" / "bfloat16"
  from 0.5.4 (absent from the 0.5.3 wheel); "fp4_e2m1" 0.5.4.post3 - 0.5.20 (calc.serving.
  sglang_fp4); "nvfp4" from 0.5.16 (calc.serving.sglang_nvfp4).
  No "fp8", no float16.
- Neither engine takes float32 for the cache. Their other choices (vLLM's fp8_inc, turboquant_*,
  fp8_ds_mla, nvfp4_4over6; SGLang's fp4_mx_block16, mxfp8) are caches kvcalc does not model; DeepSeek's
  fp8_ds_mla is chosen by kvcalc itself where the engine does (calc.serving.indexed).
"""

from __future__ import annotations

from functools import lru_cache

KV_CACHE_DTYPES = ("auto", "fp8", "fp8_e4m3", "fp8_e5m2", "bf16", "fp16", "nvfp4", "fp4_e2m1")
ENGINE_SPELLING = {"bfloat16": "bf16", "float16": "fp16"}
VLLM_FROM = {"bf16": (0, 11, 0, 0), "fp16": (0, 18, 0, 0), "nvfp4": (0, 20, 0, 0)}
# nvfp4: calc.serving.sglang_nvfp4; fp4_e2m1 (0.5.4.post3 - 0.5.20): calc.serving.sglang_fp4
SGLANG_FROM = {"bf16": (0, 5, 4, 0), "nvfp4": (0, 5, 16, 0), "fp4_e2m1": (0, 5, 4, 3)}
SGLANG_UNTIL = {"fp4_e2m1": (0, 5, 21, 0)}
SGLANG_NEVER = ("fp8", "fp16")
VLLM_NEVER = ("fp4_e2m1",)


@lru_cache(maxsize=256)  # a pure function of two hashables, read on every config
def kv_cache_choices(engine: str, version: tuple[int, ...]) -> tuple[str, ...]:
    """The choices `engine`'s `version` takes, in kvcalc's spelling (module docstring)."""
    if engine == "sglang":
        allowed = [k for k in KV_CACHE_DTYPES if k not in SGLANG_NEVER]
        return tuple(
            k for k in allowed if SGLANG_FROM.get(k, (0,)) <= version < SGLANG_UNTIL.get(k, (99,))
        )
    allowed = [k for k in KV_CACHE_DTYPES if k not in VLLM_NEVER]
    return tuple(k for k in allowed if version >= VLLM_FROM.get(k, (0,)))


def check_kv_cache_dtype(engine: str, version: tuple[int, ...], name: str, kv_cache_dtype) -> str:
    """kvcalc's spelling of `kv_cache_dtype`, or a ValueError naming release `name`'s choices."""
    kv = ENGINE_SPELLING.get(kv_cache_dtype, kv_cache_dtype)
    choices = kv_cache_choices(engine, version)
    if kv not in choices:
        known = kv in (*KV_CACHE_DTYPES, "fp32", "float32")  # words the engines refuse too
        known = known and not (engine == "vllm" and kv in VLLM_NEVER)
        why = "its --kv-cache-dtype choices" if known else "the choices kvcalc models"
        raise ValueError(
            f"'kv_cache_dtype' must be one of {', '.join(choices)} for {engine} {name} "
            f"({why}; bf16 / fp16 also as bfloat16 / float16): got "
            f"{kv_cache_dtype!r}"
        )
    return kv
