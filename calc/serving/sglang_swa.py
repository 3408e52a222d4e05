"""SGLang's sliding-window pools (SWAKVPool: the full layers' and the sliding layers' token
pools, shared out by --swa-full-tokens-ratio, calc.serving.memory.sglang_swa_tokens), by model
and release.

- gpt-oss (GptOssForCausalLM, models/gpt_oss.py from 0.5.1, absent from the 0.4.10.post2
  wheel): 0.5.1 - 0.5.9 set disable_hybrid_swa_memory in the model's server_args branch, so
  ModelConfig.is_hybrid_swa is off and every layer sits in the one token pool as full attention;
  from 0.5.10 (the branch no longer sets it; still so in 0.5.23's model_overrides/gpt_oss.py)
  the sliding layers get the sliding-window pool.
- Llama 4's chunked layers (Llama4ForConditionalGeneration): up to 0.5.7 model_config.
  is_hybrid_model gives a hybrid pool only with --hybrid-kvcache-ratio (default None) and
  ModelRunner skips Llama 4 in the sliding-window check (model_runner.py @ 5c8bd8b51 :455-462),
  so every layer sits in the one token pool as full attention; from 0.5.8 is_hybrid_swa_model
  lists Llama4ForConditionalGeneration (configs/model_config.py in the 0.5.8 wheel, still in
  0.5.23) and the chunked layers get the sliding-window pool (full layers every fourth,
  get_hybrid_layer_ids).
- Gemma 2 / 3: disable_hybrid_swa_memory is set for them in every release read (one pool).
Not modelled, refused: these pools with pipeline parallelism; from 0.5.22 the pool sized from
--max-running-requests with the radix cache off (SWARequestCapPoolConfigurator).
"""

from __future__ import annotations

from calc.serving.defaults_sglang import release_name, sglang_version

LLAMA4_SWA_FROM = (0, 5, 8, 0)
SWA_REQUEST_CAP_FROM = (0, 5, 22, 0)  # SWARequestCapPoolConfigurator (pool_configurator.py)
GPT_OSS_FROM = (0, 5, 1, 0)
GPT_OSS_SWA_FROM = (0, 5, 10, 0)


def gpt_oss_swa(spec, version: tuple[int, ...], pp: int) -> dict:
    """KVLayout fields for gpt-oss's pool (module docstring): {"sglang_swa": (full, sliding)}
    from 0.5.10, {} (one pool) in 0.5.1 - 0.5.9, refused before."""
    if version < GPT_OSS_FROM:
        raise ValueError(
            "'version': GptOssForCausalLM is in SGLang from 0.5.1 (models/gpt_oss.py, absent from "
            f"the 0.4.10.post2 wheel): got {release_name(version)}"
        )
    if version < GPT_OSS_SWA_FROM or not (spec.n_sliding_layers and spec.n_full_layers):
        return {}
    if pp > 1:
        raise ValueError(
            "'pipeline_parallel_size' > 1 with SGLang's sliding-window pool is not modelled"
        )
    return {"sglang_swa": (spec.n_full_layers, spec.n_sliding_layers)}


def llama4_swa(spec, version: tuple[int, ...]) -> tuple[int, int] | None:
    """(full, chunked) layers for SGLang's sliding-window pool from 0.5.8, else None (every
    layer full attention in the one token pool)."""
    if version < LLAMA4_SWA_FROM:
        return None
    kinds = [k for k, _ in spec.layer_kinds]
    full = [i for i, k in enumerate(kinds) if k == "full_attention"]
    if full != [i for i in range(len(kinds)) if (i + 1) % 4 == 0]:
        raise ValueError(
            f"'model' {spec.name!r}: SGLang puts Llama 4's full-attention layers at every fourth "
            "layer (get_hybrid_layer_ids); this model's chunked layers sit elsewhere"
        )
    return len(full), len(kinds) - len(full)


def check_swa_args(config) -> None:
    """From 0.5.22 the radix cache off with --max-running-requests sizes the sliding-window pool
    from the requests (SWARequestCapPoolConfigurator.is_applicable), which kvcalc does not model."""
    v = sglang_version(config.version)
    if config.disable_radix_cache and config.max_running_requests and v >= SWA_REQUEST_CAP_FROM:
        raise ValueError(
            f"'disable_radix_cache' with max_running_requests: SGLang {release_name(v)} sizes the "
            "sliding-window pool from the requests, which kvcalc does not model yet: got True"
        )
