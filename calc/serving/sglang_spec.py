"""SGLang's speculative decoding (--speculative-algorithm EAGLE / EAGLE3 / NEXTN / STANDALONE) as
far as it changes the start-up figures, read in the PyPI wheels 0.4.7.post1, 0.4.9.post2, 0.5.0rc0 -
0.5.0rc2, 0.5.1, 0.5.1.post3, 0.5.2, 0.5.3rc0, 0.5.3rc2, 0.5.3 - 0.5.14, 0.5.16 - 0.5.23
(python/sglang/srt/server_args.py, from 0.5.13 arg_groups/speculative_hook.py, from 0.5.20
arg_groups/pipeline.py and memory_hook.py; model_executor/model_runner.py, from 0.5.7
model_runner_kv_cache_mixin.py, from 0.5.11 pool_configurator.py, from 0.5.16
model_runner_components/spec_aux_hidden_state.py; managers/tp_worker.py). The pools:
calc.serving.sglang_spec_pool.

ServerArgs (__post_init__; _handle_speculative_decoding from 0.5.3rc2, the hook from 0.5.13):
- NEXTN is EAGLE ("NEXTN shares the same implementation of EAGLE"); STANDALONE (a small model
  of its own as the draft) from 0.5.2, refused with DP attention ("Currently standalone
  speculative decoding does not support dp attention.").
- max_running_requests, when not given, is 48 ("Max running requests is reset to 48 for
  speculative decoding").
- speculative_num_steps / _eagle_topk / _num_draft_tokens: all three or none ("assert
  self.speculative_eagle_topk is None and self.speculative_num_draft_tokens is None");
  none: auto_choose_speculative_params by architecture: (3, 1, 4) for STANDALONE and for
  DeepseekV3 / DeepseekV2ForCausalLM (every release read), GptOssForCausalLM from 0.5.1 (absent in
  0.5.0rc2), BailingMoe(V2)ForCausalLM from 0.5.3rc0, DeepseekV32ForCausalLM from 0.5.3rc2,
  Glm4MoeForCausalLM from 0.5.6.post1 (absent in 0.5.6; MistralLarge3ForCausalLM from 0.5.6.post1,
  which kvcalc cannot tell from other MLA models: refused before 0.5.8); (5, 4, 8) for
  LlamaForCausalLM and Grok, and for the rest until 0.5.7; from 0.5.8 "The default value for all
  other models" is (3, 1, 4) (unchanged to 0.5.23). With topk 1 the draft tokens are steps + 1
  ("speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 when
  speculative_eagle_topk == 1").
- For DeepseekV3 (and, from the wheels listed in MTP_PATH_FROM, Glm4Moe, DeepseekV32, Bailing,
  Glm4MoeLite, GlmMoeDsa) the draft is the model's own MTP layers: speculative_draft_model_path
  defaults to the model ("DeepSeek MTP does not require setting speculative_draft_model_path.").
- check_server_args: "Pipeline parallelism is not compatible with overlap schedule, speculative
  decoding, mixed chunked prefill."
- mem_fraction_static when unset: the reserve + 2048 MiB ("draft model and larger cuda graph
  buffers"; STANDALONE + 6144 MiB from 0.5.2), from 0.5.3rc2 added after the 10 GiB floor
  (calc.serving.defaults_sglang), 4096 MiB from 0.5.10 ("eagle draft models and cuda graphs");
  0.5.10's _handle_piecewise_cuda_graph, which runs before the memory settings, turns the
  prefill graph off with any algorithm (so its reserve term is 0; 0.5.11 dropped that rule).
  0.5.14 drops the speculative reserve (the pool counts the draft instead, below); 0.5.20's
  memory_hook reads speculative_num_draft_tokens only in PD-disaggregation decode mode. The
  speculative rules run after the memory settings in every release read (so the fraction and
  cuda_graph_max_bs defaults see a given max_running_requests only).

The target's pool (model_runner / the kv-cache mixin / pool_configurator):
- up to 0.5.6.post2, init_memory_pool adds a headroom for the draft and verify tokens ("We are
  sharing the `token_to_kv_pool`, and both verify and draft tokens can be concurrently allocated,
  so we should give a headroom for it"): T = T' + G x steps x topk + G x draft_tokens + 100, T'
  profile_max_num_token's count, G the max_running_requests as given or defaulted (not divided by
  DP attention: init_memory_pool reads server_args.max_running_requests), then rounded down to
  whole pages and split into the sliding-window pools; the pool so exceeds the fraction's budget
  by the headroom x the cell;
- 0.5.7 - 0.5.13: no headroom, draft_runner_cache_size (from 0.5.10 the shared
  MemoryPoolConfig) = the target's own count;
- from 0.5.14 DefaultPoolConfigurator divides the budget by the target's cell grown by the
  draft's layers D ("EAGLE/STANDALONE: scale cell_size to account for draft model KV cache.
  Assumes draft and target share the same per-layer KV size"): int(cell x (1 + D / L)) to 0.5.21,
  cell + int(cell x D / L) from 0.5.22, L the target's layers in the cell; D the draft config's
  num_nextn_predict_layers, else its layers (eagle_draft_num_layers; kvcalc reads no draft
  config, so it is speculative_draft_num_layers, given, or the model's MTP layers where the
  draft is the model). The sliding-window and DSA configurators add the draft their own way:
  refused there.
The scheduler runs min(G // dp, ...) requests (calc.serving.sglang_requests). The draft worker
takes the target's count for its own pool: an MTP draft of an MLA model (DeepSeek-V3 / R1,
model_has_mtp_layers) holds num_nextn_predict_layers latent layers (MLATokenToKVPool layer_num)
and prints its own "KV Cache is allocated" line. Up to 0.5.13 the draft's weights and pool load
after the target's pool, out of the (1 - mem_fraction_static) reserve: they change none of the
target's figures. From 0.5.14 the draft loads first (calc.serving.sglang_budget): its "Load
weight end ... mem usage" (with the bf16 embed / lm_head copies an MTP draft frees only after the
target's pool is sized, sglang#36452) is speculative_draft_weights_gib, needed to derive the pool.

Not modelled, refused by name: NGRAM (from 0.5.3rc2: no headroom, its own draft-token settings),
releases outside 0.4.7.post1 - 0.5.23, Gemma 4 assistant drafts (0.5.12 turns EAGLE / NEXTN with
one into FROZEN_KV_MTP), DFLASH, speculative_adaptive, linear-attention models (their mamba state
pool keeps speculative states), sliding-window and DSA models from 0.5.14. Not computed: the
draft pool of a separate draft checkpoint (EAGLE / EAGLE3 / STANDALONE: its own config.json), of
a non-MLA MTP draft, and of DeepSeek-V3.2's (indexer keys).
"""

from __future__ import annotations

from typing import NamedTuple

ALGORITHMS = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE")
NOT_MODELLED = ("NGRAM", "LOOKAHEAD")
SPEC_FROM = (0, 4, 7, 1)
SPEC_UNTIL = (0, 5, 23, 0)  # the last release modelled (inclusive)
RESERVE_4_FROM = (0, 5, 10, 0)  # "eagle draft models and cuda graphs": 4 GiB
PCG_OFF_IN = ((0, 5, 10, 0), (0, 5, 11, 0))  # [from, until): the prefill graph off for it
HEADROOM_UNTIL = (0, 5, 7, 0)  # init_memory_pool's headroom, until the kv-cache mixin
OTHER_SMALL_FROM = (0, 5, 8, 0)  # "The default value for all other models": (3, 1, 4)
DRAFT_CELL_FROM = (0, 5, 14, 0)  # the target's cell counts the draft's layers
NO_RESERVE_FROM = (0, 5, 14, 0)  # ... and the default fraction's reserve no longer adds for it
# the architectures whose EAGLE / NEXTN draft is the model's own MTP layers (ServerArgs sets
# speculative_draft_model_path to the model path; "DeepSeek MTP does not require setting
# speculative_draft_model_path."): the first wheel read that lists it
MTP_PATH_FROM = {
    "deepseek_v3": SPEC_FROM,
    "glm4_moe": (0, 5, 0, -100),  # absent from 0.4.9.post2
    "deepseek_v32": (0, 5, 3, -98),
    "bailing": (0, 5, 3, -98),
    "glm4_moe_lite": (0, 5, 8, 0),
    "glm_moe_dsa": (0, 5, 9, 0),
}
STANDALONE_FROM = (0, 5, 2, 0)
DEFAULT_RUNNING = 48
RESERVE_MIB = 2 * 1024
STANDALONE_RESERVE_MIB = 6 * 1024
HEADROOM_BUFFER = 100
PP_REFUSAL = (
    "Pipeline parallelism is not compatible with overlap schedule, speculative decoding, mixed "
    "chunked prefill."
)
# auto_choose_speculative_params' (3, 1, 4) architectures, by kvcalc's name for them (sglang_arch):
# the first release read that lists it; everything else (5, 4, 8)
SMALL_FROM = {
    "deepseek_v3": SPEC_FROM,  # DeepseekV3ForCausalLM, DeepseekV2ForCausalLM
    "gpt_oss": (0, 5, 1, 0),
    "bailing": (0, 5, 3, -100),
    "deepseek_v32": (0, 5, 3, -98),
    "glm4_moe": (0, 5, 6, 1),
}
# the releases where these rules change (the dashboard's version choices)
SPEC_CHANGES = (
    SPEC_FROM, SPEC_UNTIL, STANDALONE_FROM, HEADROOM_UNTIL, OTHER_SMALL_FROM, *PCG_OFF_IN,
    DRAFT_CELL_FROM, (0, 5, 22, 0), *SMALL_FROM.values(),
)  # fmt: skip
LLAMA_FAMILIES = ("llama", "llama-1", "llama-2", "llama-3", "llama-3.1", "llama-3.2")
DEEPSEEK_FAMILIES = ("deepseek", "deepseek_v2", "deepseek_v3", "deepseek_v32", "kimi", "kimi_k2")


class Speculation(NamedTuple):
    """SGLang's speculative settings as its ServerArgs completes them."""

    algorithm: str  # as SGLang runs it: NEXTN is EAGLE
    steps: int
    topk: int
    draft_tokens: int


def _release(v: tuple[int, ...]) -> str:
    from calc.serving.defaults_sglang import release_name

    return release_name(v)


def check_algorithm(algorithm, steps, topk, draft, draft_layers=None, draft_weights=None) -> None:
    """The model-independent checks of the speculative settings (SglangConfig)."""
    if algorithm is None:
        named = (("num_steps", steps), ("eagle_topk", topk), ("num_draft_tokens", draft))
        kvcalc = (("draft_num_layers", draft_layers), ("draft_weights_gib", draft_weights))
        for name, x in (*named, *kvcalc):
            if x is not None:
                raise ValueError(
                    f"'speculative_{name}' needs a 'speculative_algorithm' (one of "
                    f"{', '.join(ALGORITHMS)}): got speculative_{name}={x} without one"
                )
        return
    if algorithm in NOT_MODELLED:
        raise ValueError(
            f"'speculative_algorithm' {algorithm} is not modelled by kvcalc (its pool and "
            f"draft-token settings differ from EAGLE's): use one of {', '.join(ALGORITHMS)}"
        )
    if algorithm not in ALGORITHMS:
        raise ValueError(
            f"'speculative_algorithm' must be one of {', '.join(ALGORITHMS)}: got {algorithm!r}"
        )
    if steps is None and (topk is not None or draft is not None):
        raise ValueError(
            "'speculative_num_steps' is required with speculative_eagle_topk / "
            "speculative_num_draft_tokens (SGLang asserts all three or none)"
        )
    if steps is not None and topk is None:
        raise ValueError("'speculative_eagle_topk' is required with speculative_num_steps")
    if topk is not None and topk > 1 and draft is None:
        raise ValueError(
            f"'speculative_num_draft_tokens' is required with speculative_eagle_topk={topk}"
        )


def sglang_arch(family: str, *, mla: bool, nsa: bool, moe: bool, multimodal: bool) -> str:
    """kvcalc's name for the model's architecture in auto_choose_speculative_params' lists
    (SMALL_FROM; "llama" and "grok": (5, 4, 8) in every release), "mla" for an MLA model it
    cannot place, else "other"."""
    if family in DEEPSEEK_FAMILIES and mla:  # Kimi K2.5 (a vision tower): KimiK25For...
        return "other" if multimodal else "deepseek_v32" if nsa else "deepseek_v3"
    if family in ("gpt-oss", "gpt_oss"):
        return "gpt_oss"
    if family.startswith("bailing"):
        return "bailing"
    if family in LLAMA_FAMILIES and not multimodal:  # LlamaForCausalLM
        return "llama"
    if family.startswith("grok"):
        return "grok"
    if family in ("glm", "glm4_moe", "glm4_moe_lite", "glm_moe_dsa") and moe and not multimodal:
        # GLM-4.5 / 4.6 (GQA), GLM-4.7-Flash (MLA), GLM-5 (MLA + DSA)
        return "glm_moe_dsa" if nsa else "glm4_moe_lite" if mla else "glm4_moe"
    return "mla" if mla else "other"


def check_release(v: tuple[int, ...], algorithm: str) -> None:
    if not SPEC_FROM <= v <= SPEC_UNTIL:
        raise ValueError(
            f"'speculative_algorithm' {algorithm}: kvcalc models SGLang's speculative decoding in "
            f"{_release(SPEC_FROM)} - {_release(SPEC_UNTIL)} (the releases read for it; "
            f"calc.serving.sglang_spec): got {_release(v)}"
        )
    if algorithm == "STANDALONE" and v < STANDALONE_FROM:
        raise ValueError(
            f"'speculative_algorithm' STANDALONE is in SGLang from {_release(STANDALONE_FROM)} "
            f"(the first release read with it): got {_release(v)}"
        )


def auto_params(v: tuple[int, ...], algorithm: str, arch: str) -> tuple[int, int, int]:
    """auto_choose_speculative_params: (steps, topk, draft tokens) (module docstring)."""
    if algorithm == "STANDALONE":
        return 3, 1, 4
    if arch in ("llama", "grok"):
        return 5, 4, 8
    if v >= OTHER_SMALL_FROM:
        return 3, 1, 4
    if arch == "mla":
        raise ValueError(
            "'speculative_num_steps' (with speculative_eagle_topk and "
            "speculative_num_draft_tokens) must be given for this MLA model: kvcalc cannot tell "
            "which of SGLang's auto_choose_speculative_params lists its architecture is in"
        )
    since = SMALL_FROM.get(arch)
    return (3, 1, 4) if since is not None and v >= since else (5, 4, 8)


# speculative_<name> beside the algorithm, in check_algorithm's order; the CLI's flags too
NUMBER_NAMES = ("num_steps", "eagle_topk", "num_draft_tokens", "draft_num_layers",
                "draft_weights_gib")  # fmt: skip


def speculative_settings(v: tuple[int, ...], kw: dict, arch: str) -> dict:
    """`kw` (sglang_settings' settings) completed as ServerArgs completes the speculative ones
    (module docstring); unchanged without an algorithm."""
    algorithm = kw.get("speculative_algorithm")
    numbers = [kw.get(f"speculative_{n}") for n in NUMBER_NAMES]
    check_algorithm(algorithm, *numbers)  # before the defaults (SglangConfig checks it again)
    if algorithm is None:
        return kw
    check_release(v, algorithm)
    if kw.get("pipeline_parallel_size", 1) > 1:
        raise ValueError(PP_REFUSAL)
    if algorithm == "STANDALONE" and kw.get("enable_dp_attention"):
        raise ValueError("Currently standalone speculative decoding does not support dp attention.")
    out = dict(kw)
    out.setdefault("max_running_requests", DEFAULT_RUNNING)
    if PCG_OFF_IN[0] <= v < PCG_OFF_IN[1]:  # _handle_piecewise_cuda_graph, before the memory
        out["disable_piecewise_cuda_graph"] = True
    if out.get("speculative_num_steps") is None:
        steps, topk, draft = auto_params(v, algorithm, arch)
        out |= dict(
            speculative_num_steps=steps,
            speculative_eagle_topk=topk,
            speculative_num_draft_tokens=draft,
        )
    if out["speculative_eagle_topk"] == 1:
        out["speculative_num_draft_tokens"] = out["speculative_num_steps"] + 1
    return out


def reserve_mib(algorithm: str | None, v: tuple[int, ...]) -> int:
    """What the default mem_fraction_static reserves more for speculative decoding."""
    if algorithm is None or v >= NO_RESERVE_FROM:
        return 0
    if algorithm == "STANDALONE":
        return STANDALONE_RESERVE_MIB
    return 2 * RESERVE_MIB if v >= RESERVE_4_FROM else RESERVE_MIB


def speculation(config) -> Speculation | None:
    """The completed settings of an SglangConfig, None without speculative decoding."""
    a = config.speculative_algorithm
    if a is None:
        return None
    return Speculation(
        "EAGLE" if a == "NEXTN" else a,
        config.speculative_num_steps,
        config.speculative_eagle_topk,
        config.speculative_num_draft_tokens,
    )


def check_model(spec, config) -> None:
    """What the model refuses with speculative decoding (plan.engine_plan)."""
    a = config.speculative_algorithm
    if a is None:
        return
    if "linear_attention" in spec.attention_counts or "mamba" in spec.attention_counts:
        raise ValueError(
            f"'speculative_algorithm' {a} on {spec.name!r}: SGLang's mamba state pool with "
            "speculative decoding is not modelled yet"
        )
    if a == "NEXTN" and not spec.num_nextn_predict_layers:
        raise ValueError(
            f"'speculative_algorithm' NEXTN drafts with the model's own MTP layers: "
            f"{spec.name!r} has num_nextn_predict_layers=0 (use EAGLE / EAGLE3 with a draft model)"
        )
