"""Where and how vLLM builds a multimodal checkpoint's vision tower: --language-model-only,
--limit-mm-per-prompt, --skip-mm-profiling, --mm-encoder-tp-mode, the pipeline stages after the
first, and SigLIP's split position table up to 0.13.

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
- `--mm-encoder-tp-mode data` (0.10.2 on; read in the 0.10.2 - 0.34.0 sdists: config/model.py,
  mllama4.py, qwen3_vl.py, kimi_k25.py / kimi_k25_vit.py): the tower's parallel linears take
  disable_tp, whole on every TP rank, for the models that declare supports_encoder_tp_data:
  Llama 4 (its multi_modal_projector.linear_1 stays split), Kimi K2.5 (its projector is
  replicated in both modes), Qwen3.5 (Qwen3-VL's `visual`, mergers included). Gemma 3 and
  Mistral 3 fall back to "weights" with vLLM's warning.
- `--limit-mm-per-prompt` (kvcalc's limit_mm_per_prompt: modality, count pairs; a modality not
  named keeps 999): with every modality the model takes at 0 (Gemma 3, Mistral 3, Llama 4:
  image; Qwen3.5: image and video; Kimi K2.5: its one vision_chunk, so {"image": 0} leaves its
  tower) supports_multimodal_inputs is False from 0.10.1 (multimodal/registry.py; the encoder
  budget 0 in 0.10.0), so nothing is profiled, and the tower is skipped as above: Mistral 3 and
  Llama 4 from 0.10.1 (their explicit `self.vision_tower = None`), Gemma 3 from 0.15.0
  (_mark_tower_model; built before), Kimi K2.5 from 0.16.0, Qwen3.5 from its first, 0.17.0. A
  non-zero image limit bounds the dummy images a prompt holds (calc.serving.mm_profile).
  Counts only: the per-modality options form ({"image": {"count": 1, "width": ...}}) is refused.
- `--skip-mm-profiling` (0.10.1 on): profile_run logs "Skipping memory profiling for multimodal
  encoder and encoder cache." and encodes no dummy images; the tower is built.
"""

from __future__ import annotations

import json

from calc.serving.vllm_state_dtype import release

MODALITIES = {  # get_supported_mm_limits by vision kind (calc.vision)
    "siglip": ("image",),
    "pixtral": ("image",),
    "llama4": ("image",),
    "qwen3_5": ("image", "video"),
    "moonvit": ("vision_chunk",),
}
KNOWN_MODALITIES = ("image", "video", "audio", "vision_chunk")
DEFAULT_LIMIT = 999  # MultiModalConfig.get_limit_per_prompt: an unnamed modality
TOWER_SKIP_FROM = {  # the first release whose model skips its tower at limit 0
    "siglip": (0, 15, 0),
    "pixtral": (0, 10, 1),
    "llama4": (0, 10, 1),
    "qwen3_5": (0, 17, 0),
    "moonvit": (0, 16, 0),
}


LANGUAGE_MODEL_ONLY_FROM = (0, 17, 0)
PP_TOWER_V2_FROM = (0, 33, 0)  # under Model Runner V2
PP_TOWER_FROM = (0, 34, 0)  # every stage after the first


def _flag_from(name: str, since: tuple[int, ...], version: tuple[int, ...], note: str = ""):
    """vLLM's flag `name` is absent before `since`."""
    if tuple(version[:3]) < since:
        raise ValueError(
            f"'{name}' is a vLLM flag from {release(since)}{note}: got vLLM {release(version[:3])}"
        )


def check_language_model_only(version: tuple[int, ...], flag: bool) -> None:
    """The flag exists from 0.17.0."""
    if flag:
        _flag_from(
            "language_model_only", LANGUAGE_MODEL_ONLY_FROM, version, " (absent from 0.16.0)"
        )


SKIP_MM_PROFILING_FROM = (0, 10, 1)
ENCODER_TP_MODE_FROM = (0, 10, 2)  # --mm-encoder-tp-mode (engine/arg_utils.py)
DATA_MODE_FROM = {"llama4": (0, 10, 2), "moonvit": (0, 15, 0), "qwen3_5": (0, 17, 0)}
DATA_FALLBACK_LINE = (
    "This model does not support `--mm-encoder-tp-mode data`. Falling back to "
    "`--mm-encoder-tp-mode weights`."
)


def check_encoder_tp_mode(version: tuple[int, ...], mode: str) -> None:
    if mode != "weights":
        _flag_from("mm_encoder_tp_mode", ENCODER_TP_MODE_FROM, version)


MOONVIT_HEADS_FALLBACK_FROM = (0, 26, 0)  # is_vit_use_data_parallel(num_heads)
HEADS_FALLBACK_LINE = (
    "The number of vision attention heads is not divisible by the tensor parallel size. "
    "Falling back to data parallelism for the vision encoder."
)


def heads_fallback(spec, config) -> bool:
    """Kimi K2.5's MoonViT from 0.26.0 (kimi_k25.py, kimi_k25_vit.py: is_vit_use_data_parallel
    (num_heads), models/vision.py): whole on every rank when TP does not divide its heads, in
    either mode; before, vLLM's divide() fails at start-up (kvcalc refuses it)."""
    v, tp = spec.vision, config.tensor_parallel_size
    if v is None or v.kind != "moonvit" or v.num_attention_heads % tp == 0:
        return False
    if config.version_tuple[:3] < MOONVIT_HEADS_FALLBACK_FROM:
        raise ValueError(
            f"'tensor_parallel_size' {tp} does not divide the vision encoder's "
            f"{v.num_attention_heads} heads (vLLM before 0.26.0 fails to split MoonViT)"
        )
    return True


def encoder_data_parallel(spec, config) -> bool:
    """Whether --mm-encoder-tp-mode data holds: the model declares supports_encoder_tp_data
    (Llama 4, Kimi K2.5, Qwen3.5 through Qwen3-VL); Gemma 3 and Mistral 3 never do, and fall
    back to "weights" with DATA_FALLBACK_LINE (config/model.py, 0.10.2 - 0.34.0). Kimi K2.5's
    MoonViT also whenever TP does not divide its heads (heads_fallback)."""
    if config.engine == "vllm" and heads_fallback(spec, config):
        return True
    if spec.vision is None or getattr(config, "mm_encoder_tp_mode", "weights") != "data":
        return False
    since = DATA_MODE_FROM.get(spec.vision.kind)
    return since is not None and config.version_tuple[:3] >= since


SIGLIP_POSITION_REPLICATED_FROM = (0, 14, 0)  # nn.Embedding; VocabParallelEmbedding before


def siglip_position_saving_bytes(spec, config, dtype_bytes: int) -> int:
    """Up to 0.13.0 SigLIP's position_embedding is a VocabParallelEmbedding (siglip.py; an
    nn.Embedding from 0.14.0): its rows, padded to 64, split over TP, so each rank holds
    cdiv(rows, tp) of them (calc.vision counts the whole table)."""
    from calc.serving.sharding import padded_vocab

    v, tp = spec.vision, config.tensor_parallel_size
    if v is None or v.kind != "siglip" or tp == 1:
        return 0
    if config.version_tuple[:3] >= SIGLIP_POSITION_REPLICATED_FROM:
        return 0
    rows = (v.image_size // v.patch_size) ** 2
    kept = -(-padded_vocab(rows) // tp)
    return (rows - kept) * v.hidden_size * dtype_bytes


def check_skip_mm_profiling(version: tuple[int, ...], flag: bool) -> None:
    """--skip-mm-profiling exists from 0.10.1 (engine/arg_utils.py; absent from 0.10.0)."""
    if flag:
        _flag_from("skip_mm_profiling", SKIP_MM_PROFILING_FROM, version)


def parse_limits(value) -> tuple[tuple[str, int], ...] | None:
    """--limit-mm-per-prompt as kvcalc keeps it: sorted (modality, count) pairs, from JSON text,
    a dict or pairs; None for None."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except (ValueError, RecursionError):  # malformed, or nested past the parser's depth
            raise ValueError(
                f"'limit_mm_per_prompt' must be JSON such as '{{\"image\": 2}}': got {value[:60]!r}"
            ) from None
    if not isinstance(value, (dict, list, tuple)):
        raise ValueError(
            f"'limit_mm_per_prompt' takes modality: count pairs: got {str(value)[:60]!r}"
        )
    pairs = value.items() if isinstance(value, dict) else value
    out = {}
    for item in pairs:
        if not (isinstance(item, (tuple, list)) and len(item) == 2):
            raise ValueError(f"'limit_mm_per_prompt' takes modality: count pairs: got {item!r}")
        name, count = item
        if name not in KNOWN_MODALITIES:
            raise ValueError(
                f"'limit_mm_per_prompt' modality must be one of {', '.join(KNOWN_MODALITIES)}: "
                f"got {name!r}"
            )
        if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= 10**6:
            raise ValueError(
                f"'limit_mm_per_prompt' {name} must be a count from 0 to 1000000 (the options "
                f"form is not modelled): got {count!r}"
            )
        out[name] = count
    return tuple(sorted(out.items()))


def modality_limit(config, modality: str) -> int:
    """get_limit_per_prompt: 0 with --language-model-only, the count given, else 999."""
    if getattr(config, "language_model_only", False):
        return 0
    return dict(getattr(config, "limit_mm_per_prompt", None) or ()).get(modality, DEFAULT_LIMIT)


def tower_built(spec, config) -> bool:
    """Whether vLLM builds the tower at all (module docstring: limits all 0 skip it where the
    release's model checks them)."""
    if spec.vision is None:
        return False
    kind = spec.vision.kind
    return takes_images(spec, config) or config.version_tuple[:3] < TOWER_SKIP_FROM[kind]


def tower_stages(spec, config, uses_v2: bool) -> tuple[bool, ...]:
    """Whether each of vLLM's pipeline stages builds the vision tower (all False without one);
    `uses_v2`: Model Runner V2 runs (calc.serving.vllm_v2.vllm_uses_v2_runner)."""
    pp = config.pipeline_parallel_size
    if not tower_built(spec, config):
        return (False,) * pp
    v = config.version_tuple[:3]
    first_only = v >= PP_TOWER_FROM or (v >= PP_TOWER_V2_FROM and uses_v2)
    return tuple(r == 0 or not first_only for r in range(pp))


def takes_images(spec, config) -> bool:
    """vLLM's supports_multimodal_inputs for a checkpoint with a vision tower: the limits of the
    modalities it takes are not all 0 (--language-model-only sets them so)."""
    if spec.vision is None:
        return False
    return any(modality_limit(config, m) > 0 for m in MODALITIES[spec.vision.kind])
