"""SGLang's sliding-window pools (SWAKVPool: the full layers' and the sliding layers' token
pools, shared out by --swa-full-tokens-ratio, calc.serving.memory.sglang_swa_tokens), by model
and release.

- gpt-oss (GptOssForCausalLM, models/gpt_oss.py from 0.5.1, absent from the 0.4.10.post2
  wheel): 0.5.1 - 0.5.6.post2 set disable_hybrid_swa_memory in the model's server_args branch
  and 0.5.7 builds the hybrid pool for MiMo-V2 and Llama 4 only, so every layer sits in the one
  token pool as full attention. From 0.5.8 configs/model_config.py is_hybrid_swa_model lists
  GptOssForCausalLM and the sliding layers get the sliding-window pool, except where the
  server_args branch still sets disable_hybrid_swa_memory: in 0.5.8 - 0.5.9 with trtllm_mha as
  the prefill or decode backend (the default it picks on SM100, is_sm100_supported: capability
  10.x; fa3 on SM90, triton elsewhere) and in 0.5.8 - 0.5.8.post1 with speculative decoding
  ("Disable hybrid SWA memory for GPT-OSS model with ..."; server_args.py in the 0.5.8,
  0.5.8.post1 and 0.5.9 wheels). From 0.5.10 the branch sets it for neither (still so in
  0.5.23's model_overrides/gpt_oss.py).
- Llama 4's chunked layers (Llama4ForConditionalGeneration): up to 0.5.7 model_config.
  is_hybrid_model gives a hybrid pool only with --hybrid-kvcache-ratio (default None) and
  ModelRunner skips Llama 4 in the sliding-window check (model_runner.py @ 5c8bd8b51 :455-462),
  so every layer sits in the one token pool as full attention; from 0.5.8 is_hybrid_swa_model
  lists Llama4ForConditionalGeneration (configs/model_config.py in the 0.5.8 wheel, still in
  0.5.23) and the chunked layers get the sliding-window pool (full layers every fourth,
  get_hybrid_layer_ids).
- Gemma 2 / 3 (the models with get_attention_sliding_window_size): one pool, except in
  0.4.9.post3 - 0.4.10.post1 (Gemma 2) and 0.4.9.post3 - 0.4.10.post2 (Gemma 3, 3n), where
  ModelRunner.initialize turns the hybrid pool on for them after the load (disable_hybrid_swa_
  memory off by default; 0.4.10.post2's check_server_args sets it for Gemma2ForCausalLM, 0.5.1's
  model_specific_adjustments for the Gemma 2 / 3 / 3n family): that early pool (page 1, sized by
  set_num_token_hybrid, its own lines) is not modelled, so those releases are refused for them.
The pools' sizes (SWAKVPool's two token pools, swa = int(full x r), r the ratio, both in whole
pages): up to 0.5.10 from the one-pool count, full = int(T x layers / (r x n_swa + n_full))
(calc.serving.memory.sglang_swa_tokens; set_num_tokens_hybrid_swa, 0.5.10's
_resolve_hybrid_swa_tokens takes swa from the rounded full); from 0.5.11 HybridSWAPoolConfigurator
(model_executor/pool_configurator.py, the same in 0.5.23) from the budget, full = int(rest //
(F x n_full + r x S x n_swa)), F = S the K + V bytes of one token of one layer. From 0.5.20
_solve_pool_sizes refuses a sliding pool of at most sliding_window_size + page_size tokens
(validate_swa_pool_size, its ValueError; sliding_window_size: gpt-oss's sliding_window - 1,
get_attention_sliding_window_size; Llama 4's attention_chunk_size, load_model_utils.py).
--max-total-tokens on these pools: calc/serving/sglang_token_cap.py.
Not modelled, refused: these pools with pipeline parallelism; from 0.5.14 the sliding pool sized
from --max-running-requests with the radix cache off (SWAChunkCapPoolConfigurator.is_applicable
in the 0.5.14 - 0.5.21 wheels, SWARequestCapPoolConfigurator from 0.5.22).
"""

from __future__ import annotations

import numpy as np

from calc.plan_core import floor_int
from calc.serving import memory as m
from calc.serving.defaults_sglang import release_name, sglang_version
from calc.serving.sglang_token_cap import CONFIGURATOR_FROM, capped

LLAMA4_SWA_FROM = (0, 5, 8, 0)
SWA_REQUEST_CAP_FROM = (0, 5, 14, 0)  # SWAChunkCap / SWARequestCapPoolConfigurator
GPT_OSS_FROM = (0, 5, 1, 0)
GPT_OSS_SWA_FROM = (0, 5, 8, 0)  # is_hybrid_swa_model lists GptOssForCausalLM
GPT_OSS_TRTLLM_OFF_UNTIL = (0, 5, 10, 0)  # off with trtllm_mha, SM100's default backend
GPT_OSS_SPEC_OFF_UNTIL = (0, 5, 9, 0)  # off with speculative decoding
SWA_FROM_ROUNDED_FULL = (0, 5, 10, 0)  # swa = int(full x r) of the page-rounded full
SWA_FLOOR_FROM = (0, 5, 20, 0)  # validate_swa_pool_size


GEMMA_EARLY_SWA = {  # [from, until): ModelRunner.initialize's switch for these families
    "gemma-2": ((0, 4, 9, 3), (0, 4, 10, 2)),
    "gemma-3": ((0, 4, 9, 3), (0, 5, 1, 0)),
}


def check_gemma_swa(spec, v: tuple[int, ...]) -> None:
    """Refuse the releases that give Gemma 2 / 3 the early sliding-window pool (module
    docstring), which kvcalc does not model."""
    family = "gemma-3" if spec.family.startswith("gemma-3") else spec.family
    span = GEMMA_EARLY_SWA.get(family)
    if span and span[0] <= v < span[1] and spec.n_sliding_layers:
        raise ValueError(
            f"'version': SGLang {release_name(v)} gives {spec.name} its hybrid sliding-window "
            f"pool (ModelRunner.initialize, from {release_name(span[0])} until "
            f"{release_name(span[1])}), which kvcalc does not model: plan an earlier or a "
            "later release"
        )


def hybrid_swa_memory(spec, v: tuple[int, ...], major: int | None, speculative: bool) -> bool:
    """Whether server_args leave SGLang's hybrid SWA memory on for this model (no
    disable_hybrid_swa_memory): gpt-oss in 0.5.8 - 0.5.9 on SM100 (trtllm_mha, its default
    backend) or, in 0.5.8.x, with speculative decoding turns it off (module docstring)."""
    if spec.family != "gpt-oss" or v >= GPT_OSS_TRTLLM_OFF_UNTIL:
        return True
    return major != 10 and not (speculative and v < GPT_OSS_SPEC_OFF_UNTIL)


def gpt_oss_swa(spec, version: tuple[int, ...], pp: int, on: bool = True) -> dict:
    """KVLayout fields for gpt-oss's pool (module docstring): {"sglang_swa": (full, sliding)}
    from 0.5.8 where `on` (hybrid_swa_memory), {} (one pool) otherwise from 0.5.1, refused
    before."""
    if version < GPT_OSS_FROM:
        raise ValueError(
            "'version': GptOssForCausalLM is in SGLang from 0.5.1 (models/gpt_oss.py, absent from "
            f"the 0.4.10.post2 wheel): got {release_name(version)}"
        )
    if version < GPT_OSS_SWA_FROM or not on or not (spec.n_sliding_layers and spec.n_full_layers):
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
    """From 0.5.14 the radix cache off with --max-running-requests sizes the sliding-window pool
    from the requests (module docstring), which kvcalc does not model."""
    v = sglang_version(config.version)
    if config.disable_radix_cache and config.max_running_requests and v >= SWA_REQUEST_CAP_FROM:
        raise ValueError(
            f"'disable_radix_cache' with max_running_requests: SGLang {release_name(v)} sizes the "
            "sliding-window pool from the requests, which kvcalc does not model yet: got True"
        )


def sglang_swa_pools(v: tuple[int, ...], lay, config, rest, tokens):
    """(full, swa, profiled) layer tokens of the two pools (module docstring; int or array):
    up to 0.5.10 from `tokens`, the one-pool count (capped, page-rounded); from 0.5.11 from the
    budget `rest`, the cap (--max-total-tokens) on the full layers' count, `profiled` the
    (full, swa) the configurator logs before it (None before 0.5.11)."""
    P, r = config.page_size, config.swa_full_tokens_ratio
    n_full, n_swa = lay.sglang_swa
    if v < CONFIGURATOR_FROM:
        full, swa = m.sglang_swa_tokens(tokens, n_full, n_swa, r)
        if v >= SWA_FROM_ROUNDED_FULL:
            swa = floor_int(full // P * P * r)
        return full // P * P, swa // P * P, None
    cell = lay.token_bytes * n_full + r * lay.token_bytes * n_swa  # F x n_full + r x S x n_swa
    full0 = floor_int(rest // cell) // P * P
    profiled = (full0, floor_int(full0 * r) // P * P)
    full = capped(full0, config.max_total_tokens, P)  # calculate_pool_sizes_from_max_tokens
    return full, floor_int(full * r) // P * P, profiled


def swa_pool_refusal(v: tuple[int, ...], lay, page_size: int, *swa_tokens) -> str | None:
    """From 0.5.20 validate_swa_pool_size's ValueError for the first sliding pool (of those
    `swa_tokens` sized, None skipped) at most sliding_window_size + page_size tokens."""
    if v < SWA_FLOOR_FROM:
        return None
    window = lay.chunk or lay.sliding_window - 1  # Llama 4's chunk; gpt-oss's window - 1
    for s in swa_tokens:
        if s is None or not np.any(np.asarray(s) <= window + page_size):
            continue
        shown = f" ({s} tokens)" if not getattr(s, "ndim", 0) else ""
        return (
            f"SWA pool{shown} cannot hold even one request: the prefill admission floor is "
            f"sliding_window_size ({window}) + page_size ({page_size}). Increase "
            "--swa-full-tokens-ratio or the total KV budget."
        )
    return None
