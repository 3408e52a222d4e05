"""engine_plan with quantized weights: a checkpoint's stored bytes per rank, and vLLM's runtime
fp8. Expected values are written out from the configs (sources cited), not from kvcalc."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from calc.presets import resolve_model
from calc.serving.plan import engine_plan

FIX = Path(__file__).parent / "fixtures" / "checkpoints"
GPT_OSS_20B = FIX / "gpt-oss-20b" / "config.json"
ROOT = Path(__file__).parent.parent


def _plan(model, **kw):
    return engine_plan(model, "h100-sxm", max_model_len=8192, **kw)


def test_gpt_oss_20b_mxfp4_tp1_is_the_checkpoint_plus_the_rope_cache():
    # openai/gpt-oss-20b's safetensors index: total_size 13,761,264,768 (fixture index.json);
    # vLLM adds the rotary cos/sin table: max_position 131072 x head_dim 64 x 2 B (bf16).
    # The vocabulary, 201088 = 3142 x 64, needs no padding.
    p = _plan(resolve_model(GPT_OSS_20B))
    assert p.weights_bytes == 13_761_264_768 + 131072 * 64 * 2


def test_gpt_oss_20b_mxfp4_tp2_per_rank_arithmetic():
    # gpt-oss-20b config.json: 24 layers, hidden 2880, 64 q heads / 8 KV heads of 64, 32 experts
    # of 2880, vocab 201088 (untied head), attention biases, sinks. One TP-2 rank:
    table = 201088 // 2 * 2880 * 2  # embed_tokens and lm_head, half the rows each, bf16
    q = 2048 * 2880 + 2048  # q_proj: 32 heads x 64 rows, + bias
    kv = 2 * (256 * 2880 + 256)  # k_proj, v_proj: 4 KV heads x 64 rows, + bias
    o = 2880 * 2048 + 2880  # o_proj: half the input columns; bias on every rank
    sinks, norms, router = 32, 2 * 2880, 32 * 2880 + 32  # router replicated
    bf16_layer = 2 * (q + kv + o + sinks + norms + router)
    # MXFP4 experts (transformers Mxfp4 layout: 4-bit values, one UE8M0 scale per 32 inputs):
    gate_up = 2880 * 2880 // 2 + 2880 * 2880 // 32 + 2880 * 2  # 5760 rows / 2, + bf16 bias
    down = 2880 * 1440 // 2 + 2880 * 1440 // 32 + 2880 * 2  # 1440 input columns, whole bias
    layer = bf16_layer + 32 * (gate_up + down)
    rope = 131072 * 64 * 2
    expected = 24 * layer + 2 * table + 2880 * 2 + rope  # + final norm
    assert _plan(resolve_model(GPT_OSS_20B), tensor_parallel_size=2).weights_bytes == expected
    sg = engine_plan(resolve_model(GPT_OSS_20B), "h100-sxm", "sglang", tensor_parallel_size=2)
    assert sg.weights_bytes == expected


def test_bnb_int8_llama_pp2_splits_the_layers():
    # Llama-3.1-8B bitsandbytes int8 (fixture): 32 alike layers, 16 a rank; the last rank holds
    # the lm_head (128256 x 4096) and the final norm, every rank the rope table, all in the
    # config's torch_dtype float32 (4 B).
    spec = resolve_model(FIX / "llama-3.1-8b-networks-bnb-int8" / "config.json")
    table, rope, norm = 128256 * 4096 * 4, 131072 * 128 * 4, 4096 * 4
    layers = _plan(spec).weights_bytes - 2 * table - norm - rope
    assert _plan(spec, pipeline_parallel_size=2).weights_bytes == layers // 2 + table + norm + rope


def test_runtime_fp8_llama_3_1_8b():
    # vLLM Fp8LinearMethod, unserialized checkpoint: each LinearBase weight to fp8 (1 B) with
    # one fp32 scale per module (qkv_proj, o_proj, gate_up_proj, down_proj); embed_tokens,
    # lm_head, norms in bf16. Llama-3.1-8B config.json: 32 layers, 4096, 8 KV heads of 128,
    # 14336, vocab 128256 (= 2004 x 64), untied, max_position 131072.
    linear = 2 * 4096 * 4096 + 2 * 1024 * 4096 + 3 * 14336 * 4096
    layer = linear + 4 * 4 + 2 * 4096 * 2
    expected = 32 * layer + 2 * 128256 * 4096 * 2 + 4096 * 2 + 131072 * 128 * 2
    assert _plan("llama-3.1-8b", quantization="fp8").weights_bytes == expected
    bf16 = _plan("llama-3.1-8b").weights_bytes
    assert bf16 - expected == 32 * linear - 32 * 16  # the linears' second byte, less scales


def test_runtime_quantization_refusals():
    with pytest.raises(ValueError, match="'quantization' must be one of fp8"):
        _plan("llama-3.1-8b", quantization="awq")
    with pytest.raises(ValueError, match=r"model config \(mxfp4\) does not match"):
        _plan(resolve_model(GPT_OSS_20B), quantization="fp8")
    with pytest.raises(ValueError, match="'weight_dtype' int4"):
        _plan(resolve_model(GPT_OSS_20B), weight_dtype="int4")


def test_cli_plan_prints_the_checkpoints_weights():
    out = subprocess.run(
        [sys.executable, "-m", "calc", "plan", str(GPT_OSS_20B), "--gpu", "h100-sxm",
         "--engine", "vllm", "--seq", "8192"],
        capture_output=True, text=True, cwd=ROOT, check=False,
    )  # fmt: skip
    gib = (13_761_264_768 + 131072 * 64 * 2) / 2**30
    assert f"Model loading took {gib:.4f} GiB" in out.stdout, out.stdout + out.stderr


def test_sglang_load_weight_line_is_the_quantized_checkpoints_bytes_in_gib():
    # SGLang's "Load weight end. ... mem usage=X GB" divides by 2^30 (GiB, labelled GB). For
    # gpt-oss-20b at TP 1: the index total_size 13,761,264,768 (MXFP4 experts as stored, not
    # the 41.8 GB bf16 model) + the rotary table 131072 x 64 x 2 B = 13,778,041,984 B.
    sg = engine_plan(resolve_model(GPT_OSS_20B), "h100-sxm", "sglang", max_model_len=8192)
    assert sg.weights_bytes == 13_761_264_768 + 131072 * 64 * 2
    assert sg.log_lines[0] == "Load weight end. mem usage=12.83 GB"  # 13,778,041,984 / 2^30
    # bitsandbytes int8 (fixture, float32 base): SGLang and vLLM load the same stored bytes
    spec = resolve_model(FIX / "llama-3.1-8b-networks-bnb-int8" / "config.json")
    bnb = engine_plan(spec, "h100-sxm", "sglang", max_model_len=8192)
    assert bnb.weights_bytes == _plan(spec).weights_bytes
