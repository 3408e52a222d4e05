"""vLLM V1's multimodal profile run: how many dummy images it encodes and what it keeps of them.

Before the text model's dummy forward, GPUModelRunner.profile_run (vllm 0.19.0 sdist,
vllm/v1/worker/gpu_model_runner.py) encodes a batch of dummy images "of the maximum feature size"
and keeps, until the dummy sampler is done, the batch's pixel values (a local) and the encoder's
outputs (encoder_cache["tmp_i"]); profile_terms.vllm_v1_mm_profile_held_bytes prices them. This
module gives that formula its inputs.

Images in the batch (vllm/multimodal/encoder_budget.py MultiModalBudget._get_max_items, the same
in the 0.16.0-0.19.0 sdists; budgets from vllm/v1/core/encoder_cache_manager.py
compute_mm_encoder_budget, max_num_encoder_input_tokens = encoder_cache_size =
max_num_batched_tokens in vllm/config/scheduler.py):
  budget = max(max_num_batched_tokens, tokens per item)
  per prompt = max(1, min(limit_mm_per_prompt's image count (999 by default), max_model_len //
  tokens))
  requests = max_num_seqs, or min(that, max_num_batched_tokens // tokens) without chunked prefill
  items = max(1, min(budget // tokens, requests x per prompt))
A log says it: "Encoder cache will be initialized with a budget of 8192 tokens, and profiled with
32 image items of the maximum feature size" (Gemma 3 at 8192 batched tokens).

One item of each encoder family (0.19.0 sdist, vllm/model_executor/models/; the processor's
outputs are cast to the model dtype, vllm/multimodal/processing/context.py _postprocess_output):
- siglip (Gemma 3, gemma3_mm.py): the largest image is resized to image_size x image_size (pan
  and scan is off by default, so get_num_crops is 0) and becomes mm_tokens_per_image embeddings;
  its tokens (the placeholders that embed) are those embeddings.
- pixtral (Mistral 3, mistral3.py + pixtral.py PixtralHFEncoderInfo): an image_size square; the
  grid is ceil(image_size / (patch x spatial_merge_size)) a side (_get_pixtral_hf_num_image_tokens)
  and each cell one embedding; the pixel values keep the image resized to whole patches
  (transformers PixtralImageProcessor: ceil(side / patch) x patch).
- llama4 (mllama4.py): an image of max_patches tiles of image_size (16:1) plus the global tile;
  each tile gives (image_size / patch)^2 / round(1 / pixel_shuffle_ratio^2) embeddings
  (get_patch_per_chunk), and the pixel values are the tiles.
- qwen3_5: its dynamic resolution (max_pixels, the sequence length) is not derived: None.
"""

from __future__ import annotations

from typing import NamedTuple

from calc.serving import profile_terms as m
from calc.serving.vllm_towers import modality_limit, takes_images
from calc.vision import VisionSpec


class ProfileItem(NamedTuple):
    tokens: int  # the encoder budget one item takes (vLLM's max tokens per item)
    pixel_values: int  # values of its pixel_values tensor(s)
    embeddings: int  # rows the encoder returns for it, of the text model's hidden size


def _need(v: VisionSpec, *fields: str):
    values = tuple(getattr(v, f) for f in fields)
    missing = [f for f, x in zip(fields, values, strict=True) if x is None]
    if missing:
        raise ValueError(
            f"vLLM's multimodal profile of a {v.kind!r} encoder needs {', '.join(missing)}: "
            "got None"
        )
    return values


def profile_item(v: VisionSpec) -> ProfileItem | None:
    """One dummy image of the maximum feature size (None where the family is not derived)."""
    c, p = v.num_channels, v.patch_size
    if v.kind == "siglip":
        image, tokens = _need(v, "image_size", "mm_tokens_per_image")
        return ProfileItem(tokens, c * image * image, tokens)
    if v.kind == "pixtral":
        image, merge = _need(v, "image_size", "spatial_merge_size")
        grid = -(-image // (p * merge))
        side = -(-image // p) * p
        return ProfileItem(grid * grid, c * side * side, grid * grid)
    if v.kind == "llama4":
        image, ratio, tiles = _need(v, "image_size", "pixel_shuffle_ratio", "max_patches")
        if image % p:
            raise ValueError(
                f"vision 'image_size' must be a multiple of patch_size={p} (vLLM mllama4.py "
                f"get_patch_per_chunk): got {image}"
            )
        per_tile = (image // p) ** 2 // int(round(1.0 / ratio**2))
        n = tiles + 1 if tiles > 1 else 1  # the global tile beside 2 or more
        return ProfileItem(n * per_tile, n * c * image * image, n * per_tile)
    return None


def profile_items(item: ProfileItem, config, max_model_len: int) -> int:
    """How many items the profile run encodes at once (MultiModalBudget._get_max_items)."""
    t = item.tokens
    budget = max(config.max_num_batched_tokens, t)
    per_prompt = max(1, min(modality_limit(config, "image"), max_model_len // t))
    requests = config.max_num_seqs
    if not config.enable_chunked_prefill:
        requests = min(requests, config.max_num_batched_tokens // t)
    return max(1, min(budget // t, requests * per_prompt))


def mm_profile_held_bytes(spec, config, act_bytes: int) -> int:
    """What vLLM's profile run holds from its dummy images while the text model runs: 0 without
    a vision encoder, where its limits are all 0 (--limit-mm-per-prompt, --language-model-only:
    no multimodal inputs, calc.serving.vllm_towers) or for a family whose item is not derived
    (qwen3_5)."""
    if not takes_images(spec, config):  # limits all 0 (--language-model-only): none profiled
        return 0
    if getattr(config, "skip_mm_profiling", False):  # "Skipping memory profiling for
        return 0  # multimodal encoder and encoder cache." (gpu_model_runner.py profile_run)
    item = profile_item(spec.vision)
    if item is None:
        return 0
    max_len = config.max_model_len or spec.max_position_embeddings
    n = profile_items(item, config, max_len)
    return m.vllm_v1_mm_profile_held_bytes(
        n, item.pixel_values, item.embeddings, spec.hidden_size, act_bytes
    )
