"""Which checkpoints with a vision encoder SGLang runs as multimodal without --enable-multimodal
(calc.serving.sglang_multimodal), the expected values written out from the PyPI wheels'
configs/model_config.py (multimodal_model_archs; mm_disabled_models from 0.4.6:
Gemma3ForConditionalGeneration, Llama4ForConditionalGeneration), model_runner.py (`if
self.is_multimodal: self.mem_fraction_static *= 0.90` up to 0.4.8) and models/mllama4.py
(has_vision = has_vision_weights and enable_multimodal from 0.5.0rc0)."""

import json

import pytest

from calc.hf import from_hf_config
from calc.serving.plan import engine_plan, prepare
from calc.serving.sglang_multimodal import sglang_multimodal

FIXTURES = "tests/fixtures/hf/modern"


def frac(model, version, gpu="h100-sxm", **kw):
    return prepare(model, gpu, "sglang", version=version, max_model_len=8192, **kw)[2]


@pytest.mark.parametrize(
    ("model", "multimodal_in"),
    [
        # Gemma3ForConditionalGeneration: on multimodal_model_archs from 0.4.4.post2, disabled
        # by default from 0.4.6
        ("gemma-3-4b", ("0.4.4.post2", "0.4.5", "0.4.5.post1")),
        # Llama4ForConditionalGeneration: on the list from 0.4.5.post1 (0.4.5: a TODO), whose
        # `architectures == "Llama4ForConditionalGeneration"` never matched the list
        ("llama-4-scout", ("0.4.5.post1",)),
    ],
)
def test_mm_disabled_architectures_outside_their_window(model, multimodal_in):
    # before 0.4.9 ModelRunner scales any fraction of a multimodal model by 0.90 (from
    # 0.4.4.post4, 0.95 before); the default by TP size up to 0.4.8 (server_args.py: 0.88 at TP
    # 1, 0.85 at TP 4)
    kw = {"tensor_parallel_size": 4} if model.startswith("llama-4") else {}
    default = 0.85 if kw else 0.88
    for v in ("0.4.4.post1", "0.4.4.post2", "0.4.5", "0.4.5.post1", "0.4.6"):
        factor = (0.90 if v >= "0.4.4.post4" else 0.95) if v in multimodal_in else 1
        assert frac(model, v, **kw).mem_fraction_static == default * factor
    # the default scaled by the tower from 0.4.9.post3 (adjust_mem_fraction_for_vlm) only for
    # is_multimodal: Gemma 3 and Llama 4 as their text models, Pixtral's Mistral 3 scaled
    for v in ("0.5.6", "0.5.23"):
        text = frac("llama-3.1-8b", v, **kw).mem_fraction_static
        assert frac(model, v, **kw).mem_fraction_static == text
        one = frac("llama-3.1-8b", v).mem_fraction_static
        assert frac("mistral-small-3.1", v).mem_fraction_static == pytest.approx(one * 0.95)


def test_hf_import_takes_the_same_rule():
    for name in ("gemma-3-4b", "llama-4-scout"):
        with open(f"{FIXTURES}/{name}.json") as fh:
            spec = from_hf_config(json.load(fh))
        assert spec.vision is not None
        assert sglang_multimodal(spec, "0.5.23") is None
        assert sglang_multimodal(spec, "0.4.5.post1") == spec.vision.kind


def test_llama4_vision_weights_are_not_loaded_from_0_5_0():
    # Llama4VisionModel + Llama4MultiModalProjector of the Scout checkpoint's config, numel on
    # transformers' meta device: 850,960,896 + 20,971,520, in bf16 on one rank (TP 1)
    vision = (850_960_896 + 20_971_520) * 2
    old = engine_plan("llama-4-scout", "h200", "sglang", version="0.4.9.post2", max_model_len=8192)
    new = engine_plan("llama-4-scout", "h200", "sglang", version="0.5.6", max_model_len=8192)
    assert old.weights_bytes - new.weights_bytes == vision
    # Gemma 3's SiglipVisionModel is built in every release: the same weights
    a = engine_plan("gemma-3-4b", "h100-sxm", "sglang", version="0.4.9.post2", max_model_len=8192)
    b = engine_plan("gemma-3-4b", "h100-sxm", "sglang", version="0.5.6", max_model_len=8192)
    assert a.weights_bytes == b.weights_bytes
