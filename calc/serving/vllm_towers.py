"""Where vLLM builds a multimodal checkpoint's vision tower: --language-model-only and the pipeline
stages after the first.

Read in the PyPI sdists 0.10.0 - 0.34.0 (0.15.x from their wheels): vllm/model_executor/models/
interfaces.py _mark_tower_model, utils.py no_init_weights / StageMissingLayer, gemma3_mm.py,
mistral3.py, mllama4.py, qwen3_5.py, kimi_k25.py, vllm/config/multimodal.py, vllm/config/model.py,
vllm/multimodal/registry.py, vllm/engine/arg_utils.py, the V1 and V2 model runners.

- `--language-model-only` (MultiModalConfig.language_model_only) is a flag from 0.17.0 (absent in
  0.16.0): get_limit_per_prompt returns 0 for every modality, so _mark_tower_model builds each
  tower module (the vision model and its projector, which sits in the same context: Gemma 3's
  multi_modal_projector with mm_soft_emb_norm, Mistral 3's with its patch merger, Llama 4's
  vision_model with its adapter and multi_modal_projector, Qwen3.5's `visual` with its mergers,
  Kimi K2.5's vision_tower and mm_projector) on the meta device as a StageMissingLayer, which
  the weight loader skips: only the language model is loaded. supports_multimodal_inputs is then
  False, so the profile run encodes no dummy images (calc.serving.mm_profile), and an MTP
  drafter allocates no input-embedding buffer (calc.serving.vllm_drafter). The architecture is
  still the *ForConditionalGeneration one (its other rules are unchanged).
- pipeline parallelism: up to 0.32.0 every stage builds and loads the whole tower; 0.33.0 skips
  it on the stages after the first under Model Runner V2 (`vllm_config.use_v2_model_runner and
  not get_pp_group().is_first_rank`; V2 is the default: calc.serving.vllm_v2), 0.34.0 always
  (`or not get_pp_group().is_first_rank`: "encoders run on the first stage only").
Not modelled: --limit-mm-per-prompt (0 for every modality skips the same modules from 0.15.0,
and Mistral 3 / Llama 4 from 0.10.1, but Kimi K2.5's one modality is vision_chunk).
"""

from __future__ import annotations

LANGUAGE_MODEL_ONLY_FROM = (0, 17, 0)
PP_TOWER_V2_FROM = (0, 33, 0)  # under Model Runner V2
PP_TOWER_FROM = (0, 34, 0)  # every stage after the first


def check_language_model_only(version: tuple[int, ...], flag: bool) -> None:
    """The flag exists from 0.17.0."""
    if flag and tuple(version[:3]) < LANGUAGE_MODEL_ONLY_FROM:
        raise ValueError(
            "'language_model_only' is a vLLM flag from 0.17.0 (absent from 0.16.0): got vLLM "
            + ".".join(str(x) for x in version[:3])
        )


def tower_stages(spec, config, uses_v2: bool) -> tuple[bool, ...]:
    """Whether each of vLLM's pipeline stages builds the vision tower (all False without one);
    `uses_v2`: Model Runner V2 runs (calc.serving.vllm_v2.vllm_uses_v2_runner)."""
    pp = config.pipeline_parallel_size
    if spec.vision is None or config.language_model_only:
        return (False,) * pp
    v = config.version_tuple[:3]
    first_only = v >= PP_TOWER_FROM or (v >= PP_TOWER_V2_FROM and uses_v2)
    return tuple(r == 0 or not first_only for r in range(pp))


def takes_images(spec, config) -> bool:
    """vLLM's supports_multimodal_inputs for a checkpoint with a vision tower: the limits are not
    all 0 (--language-model-only sets them so)."""
    return spec.vision is not None and not getattr(config, "language_model_only", False)
