"""vLLM's --mm-encoder-tp-mode data (calc.serving.vllm_towers, calc.vision): the vision tower's
parallel linears take disable_tp and are whole on every TP rank (0.10.2 - 0.34.0 sdists:
mllama4.py, qwen3_vl.py via qwen3_5.py, kimi_k25.py; config/model.py's fallback for models
without supports_encoder_tp_data).

Expected values: the tower + projector's numel of transformers' model on the meta device
(tests/test_vision.py's count) x 2 B; the tower leaves the weights with --language-model-only,
so data mode's weights less those are the tower as each rank then holds it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_vision import _meta_vision_numel

import calc
from calc.serving.engine import engine_config
from calc.serving.plan import engine_plan, prepare

FIX = Path(__file__).parent / "fixtures"
QWEN = FIX / "checkpoints" / "hub-configs" / "qwen3.5-27b.json"
LLAMA4 = FIX / "hf" / "modern" / "llama-4-scout.json"
GEMMA = FIX / "hf" / "modern" / "gemma-3-4b.json"


def _rank0(spec, version="0.34.0", **kw) -> int:
    return prepare(spec, "h200", "vllm", version=version, max_model_len=8192, **kw)[4][0]


def test_qwen3_5_data_mode_holds_the_whole_tower_on_each_rank():
    cfg = json.loads(QWEN.read_text())
    spec = calc.from_hf_config(cfg)
    for tp in (2, 4):
        data = _rank0(spec, tensor_parallel_size=tp, mm_encoder_tp_mode="data")
        text = _rank0(spec, tensor_parallel_size=tp, language_model_only=True)
        assert data - text == 2 * _meta_vision_numel(cfg)
        assert data > _rank0(spec, tensor_parallel_size=tp)  # weights mode splits the tower


def test_llama4_keeps_its_projector_split():
    """Llama4MultiModalProjector.linear_1 (vision_output_dim 4,096 -> hidden 5,120) is a
    ColumnParallelLinear without disable_tp: at TP 4 each rank holds a quarter of it."""
    cfg = json.loads(LLAMA4.read_text())
    spec = calc.from_hf_config(cfg)
    kw = dict(version="0.20.0", tensor_parallel_size=4)
    data = _rank0(spec, mm_encoder_tp_mode="data", **kw)
    text = _rank0(spec, language_model_only=True, **kw)
    projector = 4096 * 5120
    assert data - text == 2 * (_meta_vision_numel(cfg) - projector + projector // 4)


def test_gemma3_falls_back_to_weights_with_vllms_warning():
    spec = calc.from_hf_config(json.loads(GEMMA.read_text()))
    kw = dict(version="0.34.0", tensor_parallel_size=2, max_model_len=8192)
    data = engine_plan(spec, "h200", "vllm", mm_encoder_tp_mode="data", **kw)
    assert data.weights_bytes == engine_plan(spec, "h200", "vllm", **kw).weights_bytes
    assert data.log_lines[0] == (
        "This model does not support `--mm-encoder-tp-mode data`. Falling back to "
        "`--mm-encoder-tp-mode weights`."
    )


def test_the_flag_by_release_the_cli_and_the_log(capsys):
    from calc.cli import main
    from calc.serving.logs import parse_log

    with pytest.raises(ValueError, match="'mm_encoder_tp_mode' is a vLLM flag from 0.10.2"):
        engine_config("vllm", version="0.10.1", mm_encoder_tp_mode="data")
    with pytest.raises(ValueError, match="mm_encoder_tp_mode"):
        engine_config("vllm", version="0.34.0", mm_encoder_tp_mode="tensor")
    argv = ["plan", "qwen3.5-27b", "--gpu", "h200", "--tp", "4", "--gpus", "4", "--engine"]
    assert main([*argv, "vllm", "--mm-encoder-tp-mode", "data", "--seq", "8192"]) == 0
    capsys.readouterr()
    assert main([*argv, "sglang", "--mm-encoder-tp-mode", "data"]) == 2
    assert "'--mm-encoder-tp-mode' is a vLLM setting" in capsys.readouterr().err
    assert parse_log("non-default args: {'mm_encoder_tp_mode': 'data'}")["mm_encoder_tp_mode"] == (
        "data"
    )


def test_siglip_positions_split_over_tp_up_to_0_13():
    """Gemma 3's SigLIP position_embedding: a VocabParallelEmbedding up to 0.13.0 (siglip.py),
    an nn.Embedding from 0.14.0: (896 // 14)^2 = 4,096 rows of 1,152 (a multiple of 64, so no
    padding), at TP 2 2,048 a rank; TP 1 holds them all in both."""
    spec = calc.from_hf_config(json.loads(GEMMA.read_text()))
    tp2 = dict(tensor_parallel_size=2)
    assert _rank0(spec, "0.14.0", **tp2) - _rank0(spec, "0.13.0", **tp2) == 2048 * 1152 * 2
    assert _rank0(spec, "0.14.0") == _rank0(spec, "0.13.0")


def test_moonvit_falls_back_to_data_parallel_when_tp_splits_its_heads_unevenly():
    """Kimi K2.5's MoonViT (16 heads) from 0.26.0: is_vit_use_data_parallel(num_heads) keeps it
    whole on every rank when TP does not divide the heads (models/vision.py), logging why; at
    TP 32 each rank holds the whole tower (2 x its meta-device numel); before 0.26.0 vLLM's
    divide() fails at start-up. kimi-k2.5's preset: 64 text heads, so TP 32 splits the text."""
    cfg = json.loads((FIX / "hf" / "modern" / "kimi-k2.5.json").read_text())
    spec = calc.from_hf_config(cfg)
    kw = dict(tensor_parallel_size=32, max_model_len=8192, available_kv_gib=10)
    p = engine_plan(spec, "h200", "vllm", version="0.26.0", **kw)
    text = engine_plan(spec, "h200", "vllm", version="0.26.0", language_model_only=True, **kw)
    assert p.weights_bytes - text.weights_bytes == 2 * _meta_vision_numel(cfg)
    assert p.log_lines[0] == (
        "The number of vision attention heads is not divisible by the tensor parallel size. "
        "Falling back to data parallelism for the vision encoder."
    )
    with pytest.raises(ValueError, match="does not divide the vision encoder's 16 heads"):
        engine_plan(spec, "h200", "vllm", version="0.25.1", **kw)
