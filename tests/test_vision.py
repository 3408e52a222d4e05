"""Vision encoders of multimodal checkpoints (calc/vision.py, calc/hf/vision.py).

Expected values: transformers 5.x's multimodal model built on the meta device from each fixture
config (numel of the vision tower + projector); vLLM 0.19.0's "Model loading took" lines of the
llm-d-planner runs (benchmarks/engine_logs/llmd-019-*.toml, commit d3121e0 of
github.com/llm-d-incubation/llm-d-planner); the split arithmetic written out from the 0.19.0 sdist.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import calc
from calc.serving import engine_plan
from calc.vision import vision_params, vision_rank_params

FIXTURES = Path(__file__).parent / "fixtures"
GIB = 1 << 30
CONFIGS = {
    "medgemma-27b-it": FIXTURES / "checkpoints" / "medgemma-27b-it" / "config.json",
    "gemma-3-4b": FIXTURES / "hf" / "modern" / "gemma-3-4b.json",
    "mistral-small-3.1": FIXTURES / "hf" / "modern" / "mistral-small-3.1.json",
    "llama-4-scout": FIXTURES / "hf" / "modern" / "llama-4-scout.json",
    "qwen3.5-27b": FIXTURES / "checkpoints" / "hub-configs" / "qwen3.5-27b.json",
    "qwen3.5-35b-a3b": FIXTURES / "checkpoints" / "hub-configs" / "qwen3.5-35b-a3b.json",
    "qwen3.5-4b": FIXTURES / "hf" / "modern" / "qwen3.5-4b.json",
}


def _cfg(name: str) -> dict:
    return json.loads(CONFIGS[name].read_text())


def _meta_vision_numel(cfg: dict) -> int:
    """numel of every parameter outside the language model and LM head of transformers' model."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    transformers.logging.set_verbosity_error()
    d = {k: v for k, v in cfg.items() if k not in ("quantization_config", "architectures")}
    config = transformers.CONFIG_MAPPING[d.pop("model_type")](**d)
    with torch.device("meta"):
        model = transformers.AutoModelForImageTextToText.from_config(config)
    return sum(
        p.numel()
        for n, p in model.named_parameters()
        if "language_model" not in n and not n.startswith("lm_head")
    )


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_vision_params_equal_transformers_on_meta(name):
    cfg = _cfg(name)
    spec = calc.from_hf_config(cfg)
    assert spec.vision is not None
    assert vision_params(spec.vision, spec.hidden_size) == _meta_vision_numel(cfg)


def test_written_out_siglip_and_llama4():
    """SigLIP (medgemma-27b-it): 417M (Gemma 3 technical report Table 1) + 1152 x 5376 + 1152;
    Llama 4 (Scout): per layer 4 biased 1408-wide projections, fc1 / fc2 (5632), 2 LayerNorms."""
    s = calc.from_hf_config(CONFIGS["medgemma-27b-it"])
    d, m, n = 1152, 4304, 27
    layer = 4 * (d * d + d) + (d * m + m) + (m * d + d) + 2 * 2 * d
    siglip = (d * 3 * 14 * 14 + d) + 64 * 64 * d + n * layer + 2 * d
    assert vision_params(s.vision, s.hidden_size) == siglip + d * 5376 + d
    s = calc.from_hf_config(CONFIGS["llama-4-scout"])
    d, m, n = 1408, 5632, 34
    layer = 4 * (d * d + d) + (d * m + m) + (m * d + d) + 2 * 2 * d
    tower = d * 3 * 14 * 14 + d + (24 * 24 + 1) * d + 2 * 2 * d + n * layer
    adapter, projector = 5632 * 4096 + 4096 * 4096, 4096 * 5120
    assert vision_params(s.vision, s.hidden_size) == tower + adapter + projector


def test_param_count_stays_the_language_models():
    cfg = _cfg("mistral-small-3.1")
    text = calc.from_hf_config({k: v for k, v in cfg.items() if k != "vision_config"})
    spec = calc.from_hf_config(cfg)
    assert text.vision is None and spec.vision is not None
    assert calc.param_count(spec) == calc.param_count(text)
    assert calc.param_breakdown(spec) == calc.param_breakdown(text)
    assert calc.weight_bytes(spec) - calc.weight_bytes(text) == 2 * vision_params(
        spec.vision, spec.hidden_size
    )


@pytest.mark.parametrize(
    "name, where, key, value, match",
    [
        ("medgemma-27b-it", "vision", "vision_use_head", True, "'vision_use_head' must be false"),
        ("medgemma-27b-it", "vision", "model_type", "clip", "'model_type' must be 'siglip"),
        ("medgemma-27b-it", "vision", "image_size", [896, 896], "'image_size' must be a positive"),
        ("llama-4-scout", "vision", "multi_modal_projector_bias", True, "projector_bias' must be"),
        ("qwen3.5-27b", "vision", "deepstack_visual_indexes", [8], "'deepstack_visual_indexes'"),
        ("mistral-small-3.1", "outer", "vision_feature_layer", "last", "'vision_feature_layer'"),
        ("mistral-small-3.1", "outer", "spatial_merge_size", 0, "'spatial_merge_size' must be"),
    ],
)
def test_count_changing_fields_are_refused_by_name(name, where, key, value, match):
    cfg = _cfg(name)
    if where == "vision":
        cfg = {**cfg, "vision_config": {**cfg["vision_config"], key: value}}
    else:
        cfg = {**cfg, key: value}
    with pytest.raises(ValueError, match=match):
        calc.from_hf_config(cfg)


@pytest.mark.parametrize(
    "key, value",
    [("num_hidden_layers", 13), ("image_size", 448), ("patch_size", 16), ("num_channels", 1)],
)
def test_count_changing_fields_are_honoured(key, value):
    cfg = _cfg("medgemma-27b-it")
    changed = {**cfg, "vision_config": {**cfg["vision_config"], key: value}}
    assert vision_params(calc.from_hf_config(changed).vision, 5376) == _meta_vision_numel(changed)


def test_mistral3_feature_layers_and_projector_bias_are_honoured():
    cfg = {**_cfg("mistral-small-3.1"), "vision_feature_layer": [-1, -2],
           "multimodal_projector_bias": True}  # fmt: skip
    assert vision_params(calc.from_hf_config(cfg).vision, 5120) == _meta_vision_numel(cfg)


def test_quantized_vision_tower_is_refused_unless_skipped():
    cfg = _cfg("mistral-small-3.1")
    qc = {"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [128, 128]}
    spec = calc.from_hf_config({**cfg, "quantization_config": qc})
    with pytest.raises(ValueError, match="'quantization_config' must leave the vision encoder"):
        calc.weight_bytes(spec)
    skip = {**qc, "modules_to_not_convert": ["vision_tower", "multi_modal_projector"]}
    spec = calc.from_hf_config({**cfg, "quantization_config": skip})
    assert calc.weight_bytes_breakdown(spec)["vision"] == 2 * 438_958_080


# --- vLLM 0.19.0: "Model loading took" (llm-d-planner logs) ----------------------------------


def _logged(run: str) -> float:
    import tomllib

    path = Path(__file__).parent.parent / "benchmarks" / "engine_logs" / f"{run}.toml"
    return tomllib.loads(path.read_text())["logged"]["weights_gib"]


def test_llama4_scout_tp4_splits_the_encoder_four_ways():
    """mllama4.py (mm_encoder_tp_mode "weights"): q/k/v (QKVParallelLinear), fc1, the unfold
    conv, adapter fc1 and the projector split by output rows, o_proj / fc2 / adapter fc2 by input
    columns (their biases whole); class / position embeddings and LayerNorms on every rank."""
    spec = calc.load_preset("llama-4-scout")
    d, m, n, tp = 1408, 5632, 34, 4
    split = n * (4 * d * d + 3 * d + 2 * d * m + m) + d * 588 + 5632 * 4096 + 4096**2 + 4096 * 5120
    whole = n * (d + d + 4 * d) + d + 577 * d + 4 * d
    assert vision_rank_params(spec.vision, 5120, tp) == split // tp + whole
    weights = engine_plan(
        spec, "h100-sxm", tensor_parallel_size=4, max_model_len=8192
    ).weights_bytes
    logged = _logged("llmd-019-llama4-scout-tp4-8192")
    assert abs(weights / GIB - logged) / logged < 0.005


def test_mistral_small_3_1_weights_within_half_a_percent():
    spec = calc.load_preset("mistral-small-3.1")
    plan = engine_plan(spec, "h100-sxm", max_model_len=8192)
    logged = _logged("llmd-019-mistral-small31-tp1-8192")
    assert abs(plan.weights_bytes / GIB - logged) / logged < 0.005


def test_vllm_runtime_fp8_with_an_encoder_is_refused():
    with pytest.raises(ValueError, match="'quantization' would quantize the vision encoder"):
        engine_plan("gemma-3-4b", "h100-sxm", max_model_len=8192, quantization="fp8")


# What one dummy image of vLLM 0.19.0's multimodal profile run is (calc/serving/mm_profile.py),
# written out from the sdist and each checkpoint's config / processor: Gemma 3 resizes to
# image_size 896 and gives mm_tokens_per_image 256 embeddings (gemma3_mm.py, pan and scan off);
# Mistral Small 3.1 a 1540 square, ceil(1540 / (14 x 2)) = 55 a side (pixtral.py
# PixtralHFEncoderInfo); Llama 4 Scout 16 tiles of 336 + the global one, (336 / 14)^2 / 4 = 144
# embeddings a tile (mllama4.py get_patch_per_chunk, pixel_shuffle_ratio 0.5).
PROFILE_ITEMS = {
    "gemma-3-4b": (256, 3 * 896 * 896, 256),
    "mistral-small-3.1": (55 * 55, 3 * 1540 * 1540, 55 * 55),
    "llama-4-scout": (17 * 144, 17 * 3 * 336 * 336, 17 * 144),
}


@pytest.mark.parametrize("name", sorted(PROFILE_ITEMS))
def test_profile_item_from_the_config(name):
    from calc.serving.mm_profile import profile_item

    spec = calc.from_hf_config(_cfg(name))
    assert tuple(profile_item(spec.vision)) == PROFILE_ITEMS[name]
    assert tuple(profile_item(calc.load_preset(name).vision)) == PROFILE_ITEMS[name]


def test_profile_fields_read_or_refused():
    """mm_tokens_per_image (Gemma 3's wrapper), image_size (Pixtral), pixel_shuffle_ratio
    (Llama 4) change the profile's held bytes: read from the config, a bad value refused."""
    from calc.serving.mm_profile import profile_item

    cfg = _cfg("gemma-3-4b") | {"mm_tokens_per_image": 64}
    assert profile_item(calc.from_hf_config(cfg).vision).embeddings == 64
    cfg = _cfg("mistral-small-3.1")
    cfg["vision_config"] = cfg["vision_config"] | {"image_size": 1024}
    assert profile_item(calc.from_hf_config(cfg).vision).tokens == 37 * 37  # ceil(1024 / 28)
    cfg = _cfg("llama-4-scout")
    cfg["vision_config"] = cfg["vision_config"] | {"pixel_shuffle_ratio": "half"}
    with pytest.raises(ValueError, match="pixel_shuffle_ratio"):
        calc.from_hf_config(cfg)
    qwen = calc.from_hf_config(_cfg("qwen3.5-27b"))
    assert profile_item(qwen.vision) is None  # dynamic resolution: not derived
