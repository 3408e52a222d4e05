"""Whether SGLang runs a checkpoint with a vision encoder as a multimodal model, and whether it
builds the encoder, with and without --enable-multimodal (SglangConfig.enable_multimodal), read
in the PyPI wheels (sglang <version>: configs/model_config.py, models/mllama4.py, gemma3_mm.py,
server_args.py; arg_groups/fields/mm.py from 0.5.14):

- enable_multimodal: Optional[bool] = None is a ServerArgs field from 0.4.6 (`--enable-multimodal`,
  store_true; 0.4.5.post1 has only --enable-llama4-multimodal, not modelled: refused before
  0.4.6). True: is_multimodal for every architecture on multimodal_model_archs (Gemma 3 and
  Llama 4 included); False (the Python API): for none; None: the default below.

- ModelConfig.is_multimodal = enable_multimodal and the architecture on multimodal_model_archs.
  enable_multimodal unset is False for mm_disabled_models ("Multimodal is disabled for
  {model_type}. To enable it, set --enable-multimodal."): Gemma3ForConditionalGeneration and
  Llama4ForConditionalGeneration from 0.4.6 to 0.5.23 (0.4.5.post1's test,
  `architectures == "Llama4ForConditionalGeneration"`, compares a list with a string and never
  holds). Gemma3ForConditionalGeneration joined multimodal_model_archs in 0.4.4.post2,
  Llama4ForConditionalGeneration in 0.4.5.post1 (0.4.5: "TODO: add multimodal support"). So
  Gemma 3's and Llama 4's multimodal checkpoints are multimodal only in [0.4.4.post2, 0.4.6) and
  [0.4.5.post1, 0.4.6); every other encoder kvcalc knows is taken as multimodal.
  is_multimodal decides the default fraction's VLM factor (calc.serving.defaults_sglang
  sglang_vlm_default_scale, sglang_vlm_runner_scale) and 0.5.18's reservation
  (calc.serving.sglang_budget) and its prefill graph (calc.serving.defaults_sglang_2026).
- Llama 4's vision model is built only with server_args.enable_multimodal from 0.5.0rc0
  (mllama4.py: has_vision = has_vision_weights and enable_multimodal; 0.4.9.post2 on the
  checkpoint's vision weights alone, 0.4.6.post5 - 0.4.7.post1 always): its weights are then
  not loaded. Gemma 3's SiglipVisionModel is built in every release read.
Which releases have an architecture at all: calc.serving.sglang_archs.
"""

from __future__ import annotations

from calc.serving.defaults_sglang import sglang_version

# kvcalc's family names (preset, HF import) of the two architectures on mm_disabled_models
GEMMA3 = ("gemma-3", "gemma3", "gemma3_text")
LLAMA4 = ("llama-4", "llama4", "llama4_text")
MM_DISABLED_FROM = (0, 4, 6, 0)
MULTIMODAL_FROM = {"gemma": (0, 4, 4, 2), "llama4": (0, 4, 5, 1)}
LLAMA4_VISION_GATED_FROM = (0, 5, 0, -100)  # 0.5.0rc0


def _kind(spec) -> str | None:
    if spec.vision is None:
        return None
    if spec.family in GEMMA3:
        return "gemma"
    if spec.family in LLAMA4:
        return "llama4"
    return "other"


ENABLE_FLAG_FROM = (0, 4, 6, 0)


def check_enable_multimodal(version: str, enable: bool | None) -> None:
    """SglangConfig's check: the setting exists from 0.4.6 (module docstring)."""
    if enable is not None and sglang_version(version) < ENABLE_FLAG_FROM:
        raise ValueError(
            f"'enable_multimodal' needs SGLang 0.4.6 or later (0.4.5.post1's "
            f"--enable-llama4-multimodal is not modelled): got {version}"
        )


def sglang_multimodal(spec, version: str, enable: bool | None = None) -> str | None:
    """The vision encoder's kind where SGLang's is_multimodal holds, else None; `enable`:
    --enable-multimodal (None: not given)."""
    kind = _kind(spec)
    if kind is None or enable is False:
        return None
    if kind == "other" or enable:
        return spec.vision.kind
    v = sglang_version(version)
    return spec.vision.kind if MULTIMODAL_FROM[kind] <= v < MM_DISABLED_FROM else None


def sglang_weight_spec(spec, version: str, enable: bool | None = None):
    """`spec` as SGLang loads it: without Llama 4's vision encoder from 0.5.0rc0 unless
    --enable-multimodal is given."""
    gated = sglang_version(version) >= LLAMA4_VISION_GATED_FROM
    if _kind(spec) == "llama4" and gated and not enable:
        return spec.model_copy(update={"vision": None})
    return spec
