"""A multimodal config.json's `vision_config` (and its projector keys) -> ModelSpec.vision.

Defaults are those of transformers 5.x's config classes for keys the file leaves out
(SiglipVisionConfig, PixtralVisionConfig + Mistral3Config, Llama4VisionConfig,
Qwen3_5VisionConfig). A wrapper config without `vision_config` gets no vision description
(`vision` None: kvcalc's truncated fixtures; transformers would build its config class's default
encoder, which no published checkpoint uses). Keys that would change a count kvcalc does not
model are refused by name: SigLIP's attention-pooling head (vision_use_head), Llama 4's
multi_modal_projector_bias (transformers builds the adapter without a bias whatever it says, vLLM
mllama4.py with one), Qwen3-VL-style deepstack mergers (deepstack_visual_indexes).
"""

from __future__ import annotations

from calc.hf.moonvit import moonvit_fields
from calc.hf.reader import _Config

# (model_type of the wrapper) -> (vision kind, vision_config model_type transformers expects)
VISION_TYPES = {
    "gemma3": ("siglip", "siglip_vision_model"),
    "mistral3": ("pixtral", "pixtral"),
    "llama4": ("llama4", "llama4_vision_model"),
    "qwen3_5": ("qwen3_5", "qwen3_5"),
    "qwen3_5_moe": ("qwen3_5", "qwen3_5_moe"),
    "kimi_k25": ("moonvit", "kimi_k25_vision"),
}
# config-class defaults: hidden, intermediate, layers, heads, channels, patch, image
_DEFAULTS = {
    "siglip": (768, 3072, 12, 12, 3, 16, 224),
    "pixtral": (1024, 4096, 24, 16, 3, 16, 1024),
    "llama4": (768, 5632, 34, 16, 3, 14, 448),
    "qwen3_5": (1152, 4304, 27, 16, 3, 16, None),
}


def vision_fields(outer: dict, origin: str) -> dict | None:
    """ModelSpec.vision for a wrapper config (None without a vision_config)."""
    kind, vision_type = VISION_TYPES[outer["model_type"]]
    vc = outer.get("vision_config")
    if vc is None:
        return None
    if not isinstance(vc, dict):
        raise ValueError(f"{origin}: 'vision_config' must be an object: got {vc!r}")
    cfg = _Config(vc, f"{origin}: vision_config", vision_type)
    if vc.get("model_type", vision_type) != vision_type:
        raise cfg.fail(
            "model_type", f"must be {vision_type!r} for model_type {outer['model_type']!r}"
        )
    if kind == "moonvit":  # calc/hf/moonvit.py
        return moonvit_fields(outer, vc, cfg)
    hidden, inter, layers, heads, channels, patch, image = _DEFAULTS[kind]
    qwen = kind == "qwen3_5"
    out = {
        "kind": kind,
        "hidden_size": cfg.int("hidden_size", default=hidden),
        "intermediate_size": cfg.int("intermediate_size", default=inter),
        "num_hidden_layers": cfg.int("depth" if qwen else "num_hidden_layers", default=layers),
        "num_attention_heads": cfg.int(
            "num_heads" if qwen else "num_attention_heads", default=heads
        ),
        "num_channels": cfg.int("in_channels" if qwen else "num_channels", default=channels),
        "patch_size": cfg.int("patch_size", default=patch),
    }
    if kind in ("siglip", "llama4", "pixtral"):
        out["image_size"] = cfg.int("image_size", default=image)
    if kind == "siglip":  # Gemma3Config.mm_tokens_per_image (the processor's image_seq_length)
        wrapper = _Config(outer, origin, outer["model_type"])
        out["mm_tokens_per_image"] = wrapper.int("mm_tokens_per_image", default=256)
    if kind == "siglip" and cfg.bool("vision_use_head", True):
        raise cfg.fail(
            "vision_use_head", "must be false (the attention-pooling head is not modelled)"
        )
    if kind == "pixtral":
        wrapper = _Config(outer, origin, outer["model_type"])
        out["spatial_merge_size"] = wrapper.int("spatial_merge_size", default=2)
        out["projector_bias"] = wrapper.bool("multimodal_projector_bias", False)
        layer = outer.get("vision_feature_layer", -1)
        if isinstance(layer, list) and layer and all(isinstance(i, int) for i in layer):
            out["feature_layers"] = len(layer)
        elif not isinstance(layer, int) or isinstance(layer, bool):
            raise wrapper.fail("vision_feature_layer", "must be an integer or a list of them")
    if kind == "llama4":
        out["vision_output_dim"] = cfg.int("vision_output_dim", default=7680)
        out["projector_input_dim"] = cfg.int("projector_input_dim", default=4096)
        out["projector_output_dim"] = cfg.int("projector_output_dim", default=4096)
        ratio = vc.get("pixel_shuffle_ratio", 0.5)
        if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not 0 < ratio <= 1:
            raise cfg.fail("pixel_shuffle_ratio", "must be a number in (0, 1]")
        out["pixel_shuffle_ratio"] = float(ratio)
        # not a config.json key: Llama4ImageProcessorFast's max_patches (16, transformers 5.x
        # models/llama4/image_processing_llama4.py; the Scout / Maverick preprocessor_config.json
        # state 16 too); a preset may set another
        out["max_patches"] = 16
        if cfg.bool("multi_modal_projector_bias", False):
            raise cfg.fail(
                "multi_modal_projector_bias",
                "must be false (transformers builds the adapter without a bias, vLLM with one)",
            )
    if qwen:
        out["spatial_merge_size"] = cfg.int("spatial_merge_size", default=2)
        out["temporal_patch_size"] = cfg.int("temporal_patch_size", default=2)
        out["num_position_embeddings"] = cfg.int("num_position_embeddings", default=2304)
        out["out_hidden_size"] = cfg.int("out_hidden_size", default=3584)
        if vc.get("deepstack_visual_indexes") not in (None, []):
            raise cfg.fail("deepstack_visual_indexes", "must be empty (no deepstack mergers)")
    return out
