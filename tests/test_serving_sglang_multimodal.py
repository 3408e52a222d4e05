"""Which checkpoints with a vision encoder SGLang runs as multimodal, with and without
--enable-multimodal
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
        # (from 0.5.10 a multimodal model's prefill graph is off: the next test)
        one = frac("llama-3.1-8b", v, disable_piecewise_cuda_graph={"0.5.23": True}.get(v))
        assert frac("mistral-small-3.1", v).mem_fraction_static == pytest.approx(
            one.mem_fraction_static * 0.95
        )


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


def test_the_prefill_graph_is_off_for_multimodal_models():
    # _handle_piecewise_cuda_graph (0.5.10 - 0.5.13: "9. Multimodal / VLM models"), 0.5.14's
    # tc_piecewise rules (only Cohere2Vision allowlisted), 0.5.15's breakable "multimodal model"
    # rule, and from 0.5.16 multimodal_breakable_cuda_graph_supported_model_archs (no
    # Mistral3ForConditionalGeneration): Mistral-Small-3.1's default is a text model's with the
    # graph off, x 0.95 for its Pixtral tower (24 x 1024, ViT-L/14's size)
    for v in ("0.5.10", "0.5.13", "0.5.14", "0.5.15", "0.5.16", "0.5.23"):
        off = frac("llama-3.1-8b", v, disable_piecewise_cuda_graph=True).mem_fraction_static
        on = frac("llama-3.1-8b", v).mem_fraction_static
        assert on < off  # the text model keeps its graph's reserve
        assert frac("mistral-small-3.1", v).mem_fraction_static == pytest.approx(off * 0.95)
    # Qwen3.5's multimodal checkpoint: off to 0.5.15 (no linear-attention refusal: the
    # multimodal rule decides), its text rules from 0.5.16, where it is allowlisted
    with open(f"{FIXTURES}/qwen3.5-27b.json") as fh:
        qwen = from_hf_config(json.load(fh))
    kw = dict(tensor_parallel_size=2)
    for v, listed in (("0.5.12", False), ("0.5.15", False), ("0.5.16", True), ("0.5.23", True)):
        off = frac(qwen, v, "h200", disable_piecewise_cuda_graph=True, **kw).mem_fraction_static
        default = frac(qwen, v, "h200", **kw).mem_fraction_static
        assert (default < off) is listed
    # Kimi K2.5 in 0.5.16 - 0.5.17: allowlisted for tc_piecewise, not for breakable: refused
    kimi = dict(tensor_parallel_size=8)
    with pytest.raises(ValueError, match="'disable_piecewise_cuda_graph' must be given for Kimi"):
        frac("kimi-k2.5", "0.5.17", "h200", **kimi)
    assert frac("kimi-k2.5", "0.5.17", "h200", disable_piecewise_cuda_graph=True, **kimi)
    # from 0.5.18 it is on the breakable list: its MLA graph reserves 1.5 GiB (143,771 MiB)
    off = frac("kimi-k2.5", "0.5.18", "h200", disable_piecewise_cuda_graph=True, **kimi)
    on = frac("kimi-k2.5", "0.5.18", "h200", **kimi)
    assert off.mem_fraction_static > on.mem_fraction_static


def test_kimi_k25_is_refused_before_0_5_9():
    # sglang/srt/models: KimiK25ForConditionalGeneration is in the 0.5.9 wheel, not in 0.5.8's
    # (ModelRegistry: "Model architectures [...] are not supported for now.")
    kw = dict(tensor_parallel_size=8, max_model_len=8192)
    with pytest.raises(
        ValueError, match=r"'version' must be at least 0\.5\.9 for 'kimi-k2\.5' in SGLang"
    ):
        engine_plan("kimi-k2.5", "h200", "sglang", version="0.5.8", **kw)
    assert engine_plan("kimi-k2.5", "h200", "sglang", version="0.5.9", **kw).fits


def test_enable_multimodal_makes_gemma3_and_llama4_multimodal():
    """--enable-multimodal (ServerArgs.enable_multimodal from 0.4.6): is_multimodal for Gemma 3
    and Llama 4 too. Gemma 3 12B's SigLIP tower (27 layers x 1152) scales the default by
    adjust_mem_fraction_for_vlm (0.5.6 server_args.py): 0.95 x (1 - 0.1 x (27 x 1152^2 /
    (24 x 1024^2) - 1)), clamped to [0.8, 1.05]."""
    text = frac("gemma-3-12b", "0.5.6").mem_fraction_static
    on = frac("gemma-3-12b", "0.5.6", enable_multimodal=True).mem_fraction_static
    ratio = 27 * 1152**2 / (24 * 1024**2)
    assert on == pytest.approx(text * 0.95 * max(0.8, min(1.05, 1 - 0.1 * (ratio - 1))))
    assert 0.759 < on < 0.760  # from 0.835 on an H100
    # from 0.5.18 its budget also leaves the VLM cache out (SGLANG_VLM_CACHE_SIZE_MB = 100)
    kw = dict(mem_fraction_static=0.85, max_model_len=8192)
    plain = engine_plan("gemma-3-12b", "h100-sxm", "sglang", version="0.5.18", **kw)
    mm = engine_plan("gemma-3-12b", "h100-sxm", "sglang", version="0.5.18",
                     enable_multimodal=True, **kw)  # fmt: skip
    assert plain.available_kv_cache_bytes - mm.available_kv_cache_bytes == 100 * 2**20
    # Llama 4's vision encoder is built again (mllama4.py: has_vision_weights and
    # enable_multimodal): Llama4VisionModel + projector, 871,932,416 values in bf16 at TP 1
    a = engine_plan("llama-4-scout", "h200", "sglang", version="0.5.6", max_model_len=8192)
    b = engine_plan("llama-4-scout", "h200", "sglang", version="0.5.6", max_model_len=8192,
                    enable_multimodal=True)  # fmt: skip
    assert b.weights_bytes - a.weights_bytes == (850_960_896 + 20_971_520) * 2


def test_enable_multimodal_false_and_before_0_4_6():
    # the Python API's False: is_multimodal for no model (Mistral-Small-3.1 as a text model)
    text = frac("llama-3.1-8b", "0.5.6").mem_fraction_static
    assert frac("mistral-small-3.1", "0.5.6", enable_multimodal=False).mem_fraction_static == text
    # 0.4.5.post1 has --enable-llama4-multimodal only (server_args.py), not modelled
    with pytest.raises(ValueError, match="'enable_multimodal' needs SGLang 0.4.6 or later"):
        frac("gemma-3-4b", "0.4.5.post1", enable_multimodal=True)
    # a text-only model: nothing happens ("If the model being served is not multimodal")
    assert frac("llama-3.1-8b", "0.5.6", enable_multimodal=True).mem_fraction_static == text


def test_the_cli_flag_is_sglangs():
    import subprocess
    import sys

    base = [sys.executable, "-m", "calc", "plan", "gemma-3-12b", "--gpu", "h100-sxm", "--seq",
            "8192", "--json"]  # fmt: skip
    run = lambda *a: subprocess.run([*base, *a], capture_output=True, text=True)  # noqa: E731
    on = run("--engine", "sglang", "--engine-version", "0.5.6", "--enable-multimodal")
    off = run("--engine", "sglang", "--engine-version", "0.5.6")
    assert on.returncode == off.returncode == 0
    p = engine_plan("gemma-3-12b", "h100-sxm", "sglang", version="0.5.6", max_model_len=8192,
                    enable_multimodal=True)  # fmt: skip
    assert json.loads(on.stdout)["gpu_kv_cache_tokens"] == p.gpu_kv_cache_tokens
    assert json.loads(off.stdout)["gpu_kv_cache_tokens"] > p.gpu_kv_cache_tokens
    r = run("--engine", "vllm", "--enable-multimodal")
    assert r.returncode == 2 and "is an SGLang setting" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "model, tp, before, first, arch",
    [
        # sglang/srt/models in the PyPI wheels: glm4_moe.py from 0.4.9.post5 (not in
        # 0.4.9.post4), glm4_moe_lite.py from 0.5.8 (not in 0.5.7), minimax_m2.py from
        # 0.5.4.post1 (not in 0.5.4)
        ("glm-4.5-air", 4, "0.4.9.post4", "0.4.9.post5", "Glm4MoeForCausalLM"),
        ("glm-4.7-flash", 2, "0.5.7", "0.5.8", "Glm4MoeLiteForCausalLM"),
        ("minimax-m2.5", 4, "0.5.4", "0.5.4.post1", "MiniMaxM2ForCausalLM"),
    ],
)
def test_an_architecture_is_refused_before_its_first_release(model, tp, before, first, arch):
    kw = dict(tensor_parallel_size=tp, max_model_len=8192)
    with pytest.raises(ValueError, match=f"at least {first} for '{model}'.*{arch}"):
        engine_plan(model, "h200", "sglang", version=before, **kw)
    assert engine_plan(model, "h200", "sglang", version=first, **kw).fits
