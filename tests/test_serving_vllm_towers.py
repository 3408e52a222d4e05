"""vLLM's --language-model-only and the pipeline stages without a vision tower
(calc.serving.vllm_towers).

Expected values: the vision tower + projector's numel of transformers' multimodal model built on
the meta device from each fixture config (the same count tests/test_vision.py checks), times
2 B (bf16); the rules written out from the vLLM sdists (interfaces.py _mark_tower_model,
config/multimodal.py get_limit_per_prompt, arg_utils.py) and the profile arithmetic from the
0.19.0 sdist's profile_run (Gemma 3's dummy images: 896 x 896 x 3 pixel values and 256
embeddings of the text width each).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_vision import _meta_vision_numel

import calc
from calc.serving.engine import engine_config
from calc.serving.plan import engine_plan, prepare
from calc.serving.vllm_towers import tower_stages

MODERN = Path(__file__).parent / "fixtures" / "hf" / "modern"
HUB = Path(__file__).parent / "fixtures" / "checkpoints" / "hub-configs"
CONFIGS = {
    "gemma-3-4b": MODERN / "gemma-3-4b.json",
    "mistral-small-3.1": MODERN / "mistral-small-3.1.json",
    "qwen3.5-27b": HUB / "qwen3.5-27b.json",
}


_meta_tower_numel = _meta_vision_numel  # the tower + projector's numel on the meta device


def _weights(spec, version: str, **kw) -> tuple[int, ...]:
    return prepare(spec, "h100-sxm", "vllm", version=version, max_model_len=8192, **kw)[4]


@pytest.mark.parametrize("name", sorted(CONFIGS))
@pytest.mark.parametrize("version", ["0.17.0", "0.27.1", "0.34.0"])
def test_language_model_only_loads_no_tower(name, version):
    """get_limit_per_prompt is 0 for every modality, so _mark_tower_model builds the tower and
    its projector as StageMissingLayers the loader skips: "Model loading took" drops by the
    tower's bf16 bytes."""
    cfg = json.loads(CONFIGS[name].read_text())
    spec = calc.from_hf_config(cfg)
    full, text = (_weights(spec, version, language_model_only=f)[0] for f in (False, True))
    assert full - text == 2 * _meta_tower_numel(cfg)


def test_the_flag_is_refused_before_0_17():
    with pytest.raises(ValueError, match=r"'language_model_only' is a vLLM flag from 0\.17\.0"):
        engine_config("vllm", version="0.16.0", language_model_only=True)
    text = calc.load_preset("llama-3.1-8b")  # a text model: nothing to leave out
    a, b = (_weights(text, "0.34.0", language_model_only=f) for f in (False, True))
    assert a == b


def test_stages_after_the_first_skip_the_tower_from_0_33():
    """Up to 0.32.0 every PP stage builds the tower; 0.33.0 skips it on the later stages under
    Model Runner V2 (the default from 0.29.0 on CUDA), 0.34.0 always."""
    cfg = json.loads(CONFIGS["mistral-small-3.1"].read_text())
    spec, tower = calc.from_hf_config(cfg), 2 * _meta_tower_numel(cfg)
    for version, later in (("0.32.0", tower), ("0.33.0", 0), ("0.34.0", 0)):
        full = _weights(spec, version, pipeline_parallel_size=2)
        text = _weights(spec, version, pipeline_parallel_size=2, language_model_only=True)
        assert (full[0] - text[0], full[1] - text[1]) == (tower, later)
    c33, c34 = (
        engine_config("vllm", version=v, pipeline_parallel_size=4) for v in ("0.33.0", "0.34.0")
    )
    assert tower_stages(spec, c33, uses_v2=False) == (True,) * 4  # a V1 fallback in 0.33.0
    assert tower_stages(spec, c34, uses_v2=False) == (True, False, False, False)


def test_no_dummy_images_are_profiled():
    """vLLM 0.19.0, Gemma 3 4B on an H100 at 8,192 batched tokens: the profile run keeps 32
    dummy images (8,192 // 256 tokens each) of 3 x 896 x 896 pixel values and 256 x 2,560
    embeddings in bf16 until the sampler is done; with --language-model-only
    supports_multimodal_inputs is False and profile_run encodes none."""
    spec = calc.from_hf_config(json.loads(CONFIGS["gemma-3-4b"].read_text()))
    with pytest.raises(ValueError, match="0.17.0"):
        engine_plan(spec, "h100-sxm", "vllm", version="0.16.0", language_model_only=True)
    kw = dict(version="0.19.0", max_model_len=8192, max_num_batched_tokens=8192)
    full, text = (
        engine_plan(spec, "h100-sxm", "vllm", language_model_only=f, **kw) for f in (False, True)
    )
    held = 32 * (3 * 896 * 896 + 256 * 2560) * 2
    assert full.activation_bytes - text.activation_bytes == held
    assert text.gpu_kv_cache_tokens > full.gpu_kv_cache_tokens


def test_the_mtp_drafter_allocates_no_image_buffer():
    """0.34.0's MTP speculator allocates its inputs_embeds buffer only for a target that takes
    multimodal inputs (calc.serving.vllm_drafter): with --language-model-only the drafter adds
    its layer alone, as on a text-only checkpoint."""
    kw = dict(available_kv_gib=20, speculative_method="mtp", max_model_len=32768)
    spec = calc.load_preset("qwen3.5-27b")
    a = engine_plan(spec, "h100-sxm", "vllm", version="0.34.0", language_model_only=True, **kw)
    b = engine_plan(spec, "h100-sxm", "vllm", version="0.34.0", **kw)
    tower = 2 * _meta_tower_numel(json.loads(CONFIGS["qwen3.5-27b"].read_text()))
    assert b.weights_bytes - a.weights_bytes == tower + 8192 * 5120 * 2


def test_the_cli_and_a_log_take_the_flag(capsys):
    from calc.cli import main
    from calc.serving.logs import parse_log

    rc = main(["plan", "mistral-small-3.1", "--gpu", "h100-sxm", "--engine", "vllm",
               "--language-model-only", "--engine-version", "0.16.0"])  # fmt: skip
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "from 0.17.0" in err
    rc = main(["plan", "mistral-small-3.1", "--gpu", "h100-sxm", "--engine", "sglang",
               "--language-model-only"])  # fmt: skip
    assert rc == 2 and "'--language-model-only' is a vLLM setting" in capsys.readouterr().err
    line = "non-default args: {'model': 'x', 'language_model_only': True, 'max_model_len': 8192}"
    assert parse_log(line)["language_model_only"] is True


@pytest.mark.parametrize(
    ("name", "version", "limits", "skipped"),
    [
        ("gemma-3-4b", "0.19.0", {"image": 0}, True),  # _mark_tower_model from 0.15.0
        ("gemma-3-4b", "0.14.1", {"image": 0}, False),  # Gemma 3 built its tower before
        ("mistral-small-3.1", "0.12.0", {"image": 0}, True),  # `vision_tower = None`, 0.10.1
        ("mistral-small-3.1", "0.19.0", {"image": 2}, False),
        ("qwen3.5-27b", "0.19.0", {"image": 0}, False),  # its video limit stays 999
        ("qwen3.5-27b", "0.19.0", {"image": 0, "video": 0}, True),
    ],
)
def test_limits_of_zero_leave_the_tower_where_the_release_checks_them(
    name, version, limits, skipped
):
    cfg = json.loads(CONFIGS[name].read_text())
    spec = calc.from_hf_config(cfg)
    full, limited = (_weights(spec, version, limit_mm_per_prompt=x)[0] for x in (None, limits))
    assert full - limited == (2 * _meta_tower_numel(cfg) if skipped else 0)


def test_kimi_k25_takes_only_vision_chunks():
    """Kimi K2.5's one modality is vision_chunk (get_supported_mm_limits): {"image": 0,
    "video": 0} leaves its tower; {"vision_chunk": 0} takes it out from 0.16.0."""
    spec = calc.load_preset("kimi-k2.5")
    c = dict(tensor_parallel_size=8)
    w = {
        str(x): prepare(spec, "h200", "vllm", version="0.19.0", limit_mm_per_prompt=x, **c)[4][0]
        for x in (None, {"image": 0, "video": 0}, {"vision_chunk": 0})
    }
    assert w["None"] == w[str({"image": 0, "video": 0})] > w[str({"vision_chunk": 0})]


def test_an_image_limit_bounds_the_profiled_images():
    """0.19.0, Gemma 3 4B at 8,192 batched tokens and max_num_seqs 8: a prompt holds at most
    min(limit, 8,192 // 256) images, so the batch is min(32, 8 x that): 16 at a limit of 2, 32
    unlimited (MultiModalBudget._get_max_items); each image 3 x 896 x 896 pixel values and 256 x
    2,560 embeddings in bf16."""
    spec = calc.from_hf_config(json.loads(CONFIGS["gemma-3-4b"].read_text()))
    kw = dict(version="0.19.0", max_model_len=8192, max_num_batched_tokens=8192, max_num_seqs=8)
    free, two = (
        engine_plan(spec, "h100-sxm", "vllm", limit_mm_per_prompt=x, **kw)
        for x in (None, '{"image": 2}')
    )
    image = (3 * 896 * 896 + 256 * 2560) * 2
    assert free.activation_bytes - two.activation_bytes == (32 - 16) * image


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("x{", "must be JSON"),
        ('{"imag": 1}', "modality must be one of image, video, audio, vision_chunk"),
        ('{"image": -1}', "image must be a count from 0 to 1000000"),
        ('{"image": {"count": 1, "width": 512}}', "the options form is not modelled"),
        ("5", "takes modality: count pairs"),
        ("[" * 20000 + "]" * 20000, "must be JSON"),
    ],
)
def test_bad_limits_are_refused_by_name(value, message):
    with pytest.raises(ValueError, match=message):
        engine_config("vllm", version="0.34.0", limit_mm_per_prompt=value)


def test_a_logs_limits_are_read():
    from calc.serving.logs import parse_log

    line = "non-default args: {'limit_mm_per_prompt': {'image': 2, 'audio': 0}, 'max_num_seqs': 1}"
    assert parse_log(line)["limit_mm_per_prompt"] == {"image": 2, "audio": 0}


def test_skip_mm_profiling_leaves_the_images_out_of_the_profile(capsys):
    """--skip-mm-profiling (0.10.1 on): profile_run logs "Skipping memory profiling for
    multimodal encoder and encoder cache." and encodes no dummy images; the tower is loaded."""
    from calc.cli import main
    from calc.serving.logs import parse_log

    spec = calc.from_hf_config(json.loads(CONFIGS["gemma-3-4b"].read_text()))
    kw = dict(version="0.19.0", max_model_len=8192, max_num_batched_tokens=8192)
    full, skip = (
        engine_plan(spec, "h100-sxm", "vllm", skip_mm_profiling=f, **kw) for f in (False, True)
    )
    assert full.activation_bytes - skip.activation_bytes == 32 * (3 * 896 * 896 + 256 * 2560) * 2
    assert full.weights_bytes == skip.weights_bytes
    with pytest.raises(ValueError, match="'skip_mm_profiling' is a vLLM flag from 0.10.1"):
        engine_config("vllm", version="0.10.0", skip_mm_profiling=True)
    assert parse_log("non-default args: {'skip_mm_profiling': True}")["skip_mm_profiling"]
    argv = ["plan", "gemma-3-4b", "--gpu", "h100-sxm", "--engine", "sglang", "--skip-mm-profiling"]
    assert main(argv) == 2 and "'--skip-mm-profiling' is a vLLM setting" in capsys.readouterr().err
