"""The Capacity page's Engine section, vLLM's weight flags: --language-model-only and
--mm-encoder-tp-mode (calc.serving.vllm_towers), --cpu-offload-gb (calc.serving.vllm_offload).
The reference is calc.serving's engine_plan with the same settings; the tower's bytes are
transformers' meta-device numel (tests/test_serving_vllm_towers.py)."""

from __future__ import annotations

import json
from pathlib import Path

from dashboard_util import chart_data, errors, open_page
from test_serving_vllm_towers import _meta_tower_numel

from calc.serving.plan import engine_plan

BASE = {"model": "mistral-small-3.1", "gpu": "h100-sxm", "gpus": "1", "tp": "1"}
CONFIG = Path(__file__).parent / "fixtures" / "hf" / "modern" / "mistral-small-3.1.json"


def test_language_model_only_leaves_the_tower_out_of_the_weights():
    kw = dict(version="0.34.0", available_kv_gib=20, max_model_len=8192)
    weights = {}
    for flag in ("off", "on"):
        at = open_page("capacity", **BASE, engine="vllm", ever="0.34.0", egiven="20", elen="8192",
                     elmo=flag)  # fmt: skip
        assert errors(at) == ""
        weights[flag] = chart_data(at, "engine_memory").set_index("category")["bytes"]["weights"]
    p = engine_plan("mistral-small-3.1", "h100-sxm", "vllm", language_model_only=True, **kw)
    assert weights["on"] == p.weights_bytes
    tower = 2 * _meta_tower_numel(json.loads(CONFIG.read_text()))
    assert weights["off"] - weights["on"] == tower


def test_language_model_only_before_0_17_is_one_error():
    at = open_page("capacity", **BASE, engine="vllm", ever="0.16.0", egiven="20", elmo="on")
    assert "'language_model_only' is a vLLM flag from 0.17.0" in errors(at)


def test_encoder_data_mode_is_the_plans():
    base = {**BASE, "model": "qwen3.5-27b", "gpu": "h200", "gpus": "4", "tp": "4"}
    at = open_page("capacity", **base, engine="vllm", ever="0.34.0", egiven="20", elen="8192",
                   eenc="data")  # fmt: skip
    assert errors(at) == ""
    kw = dict(version="0.34.0", available_kv_gib=20, max_model_len=8192, tensor_parallel_size=4)
    p = engine_plan("qwen3.5-27b", "h200", "vllm", mm_encoder_tp_mode="data", **kw)
    assert chart_data(at, "engine_memory").set_index("category")["bytes"]["weights"] == (
        p.weights_bytes
    )


def test_cpu_offload_is_the_plans():
    base = {**BASE, "model": "llama-3.1-8b", "gpu": "rtx-4090"}
    at = open_page("capacity", **base, engine="vllm", ever="0.20.0", elen="8192", eoff="4")
    assert errors(at) == ""
    p = engine_plan("llama-3.1-8b", "rtx-4090", "vllm", version="0.20.0", max_model_len=8192,
                    cpu_offload_gb=4)  # fmt: skip
    stack = chart_data(at, "engine_memory").set_index("category")["bytes"]
    assert stack["weights"] == p.weights_bytes
    assert "Total CPU offloaded parameters: 4.06 GiB" in at.code[0].value


def test_sglang_cpu_offload_is_the_plans():
    base = {**BASE, "model": "llama-3.1-8b", "gpu": "rtx-4090"}
    at = open_page("capacity", **base, engine="sglang", ever="0.5.23", esoff="4")
    assert errors(at) == ""
    p = engine_plan("llama-3.1-8b", "rtx-4090", "sglang", version="0.5.23", cpu_offload_gb=4)
    assert {m.label: m.value for m in at.metric}["KV tokens"] == f"{p.gpu_kv_cache_tokens:,}"


def test_lora_slots_are_the_plans():
    base = {**BASE, "model": "llama-3.1-8b"}
    at = open_page("capacity", **base, engine="vllm", ever="0.34.0", egiven="20", elen="8192",
                   elora="on", elorn="4", elorr="64")  # fmt: skip
    assert errors(at) == ""
    p = engine_plan("llama-3.1-8b", "h100-sxm", "vllm", version="0.34.0", available_kv_gib=20,
                    max_model_len=8192, enable_lora=True, max_loras=4, max_lora_rank=64)  # fmt: skip
    assert chart_data(at, "engine_memory").set_index("category")["bytes"]["weights"] == (
        p.weights_bytes
    )


def test_lora_rank_left_unset_is_vllms_default_16():
    """LoRAConfig.max_lora_rank defaults to 16 (vllm/config/lora.py, 0.10.0 - 0.34.0): the page
    with LoRA on and no rank chosen plans vLLM's default, not the first of the choices (1)."""
    base = {**BASE, "model": "llama-3.1-8b"}
    at = open_page("capacity", **base, engine="vllm", ever="0.34.0", egiven="20", elen="8192",
                   elora="on")  # fmt: skip
    assert errors(at) == ""
    kw = dict(version="0.34.0", available_kv_gib=20, max_model_len=8192, enable_lora=True)
    p16 = engine_plan("llama-3.1-8b", "h100-sxm", "vllm", max_lora_rank=16, **kw)
    p1 = engine_plan("llama-3.1-8b", "h100-sxm", "vllm", max_lora_rank=1, **kw)
    weights = chart_data(at, "engine_memory").set_index("category")["bytes"]["weights"]
    assert weights == p16.weights_bytes != p1.weights_bytes
