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


def _plan(model, **kw):  # vLLM 0.11.0 unless the test names another release
    return engine_plan(model, "h100-sxm", max_model_len=8192, **{"version": "0.11.0", **kw})


def _marlin_minus_stored(h, i, hp, ip):
    # vLLM Mxfp4MoEMethod.create_weights (quantization/mxfp4.py): per expert w13_weight
    # [2 Ip, Hp / 2] u8, w13_weight_scale [2 Ip, Hp / 32] u8, w13_bias [2 Ip] bf16, w2_weight
    # [Hp, Ip / 2] u8, w2_weight_scale [Hp, Ip / 32] u8, w2_bias [Hp] bf16; the Marlin backend
    # rounds Hp up to 256 and Ip up to 128 ("n % 256 == 0 and k % 128 == 0").
    def one(h, i):
        return 2 * i * h // 2 + 2 * i * h // 32 + 2 * i * 2 + h * i // 2 + h * i // 32 + h * 2

    return one(hp, ip) - one(h, i)


def test_gpt_oss_20b_mxfp4_tp1_is_the_checkpoint_marlin_padding_and_a_fp32_rope():
    # openai/gpt-oss-20b's safetensors index: total_size 13,761,264,768 (fixture index.json).
    # vLLM 0.11.0 on an H100 (sm90, no triton_kernels in its wheel) runs the experts on Marlin:
    # 24 layers x 32 experts, hidden 2880 -> 3072, intermediate 2880 -> 2944. gpt_oss.py asks
    # get_rope for float32: 131072 x 64 x 4 B. The vocabulary, 201088 = 3142 x 64, is not padded.
    pad = 24 * 32 * _marlin_minus_stored(2880, 2880, 3072, 2944)
    p = _plan(resolve_model(GPT_OSS_20B))
    assert p.weights_bytes == 13_761_264_768 + pad + 131072 * 64 * 4
    # SGLang keeps the checkpoint's bytes and a bf16 table (its mxfp4 path is not modelled)
    sg = engine_plan(resolve_model(GPT_OSS_20B), "h100-sxm", "sglang", max_model_len=8192)
    assert sg.weights_bytes == 13_761_264_768 + 131072 * 64 * 2
    # Ampere: Marlin in every release; Hopper from 0.12.0 (the PyPI sdist of 0.12.0 bundles
    # triton_kernels, cmake/external_projects/triton_kernels.cmake; 0.11.1 and 0.11.2 neither
    # bundle nor require it, so get_mxfp4_backend still picks Marlin there): Triton, another
    # layout (tests/test_serving_mxfp4.py); Blackwell: other backends, refused by name
    a100 = engine_plan(resolve_model(GPT_OSS_20B), "a100-80gb", max_model_len=8192)
    assert a100.weights_bytes == p.weights_bytes
    assert _plan(resolve_model(GPT_OSS_20B), version="0.11.2").weights_bytes == p.weights_bytes
    assert _plan(resolve_model(GPT_OSS_20B), version="0.12.0").weights_bytes < p.weights_bytes
    with pytest.raises(ValueError, match="FlashInfer"):
        engine_plan(resolve_model(GPT_OSS_20B), "b200", max_model_len=8192)
    with pytest.raises(ValueError, match="'version' must be at least 0.10.1"):
        _plan(resolve_model(GPT_OSS_20B), version="0.10.0")


def test_gpt_oss_120b_h100_weights_match_the_vllm_0_10_1_log():
    # vllm#23278 (vLLM 0.10.1, one H100, Marlin warning printed): "Model loading took 65.9651
    # GiB". From openai/gpt-oss-120b's config.json: 36 layers, 128 experts, hidden = expert
    # width = 2880, 64 q / 8 KV heads of 64, vocab 201088 (untied head), biases, sinks.
    attn = (5120 * 2880 + 5120) + (2880 * 4096 + 2880) + 64 + 2 * 2880  # qkv, o, sinks, norms
    router = 128 * 2880 + 128
    experts = 128 * (2 * 2944 * 3072 * (1 / 2 + 1 / 32) + 2 * 2944 * 2)  # Marlin-padded w13
    experts += 128 * (3072 * 2944 * (1 / 2 + 1 / 32) + 3072 * 2)  # and w2
    total = 36 * (2 * (attn + router) + experts) + 2 * 201088 * 2880 * 2 + 2880 * 2
    total += 131072 * 64 * 4  # the fp32 YaRN cos/sin table
    spec = resolve_model("gpt-oss-120b").model_copy(
        update={"quantization": resolve_model(GPT_OSS_20B).quantization}
    )
    p = engine_plan(spec, "h100-sxm", available_kv_gib=1.0, version="0.10.1")
    assert p.weights_bytes == total
    assert abs(p.weights_bytes / 2**30 - 65.9651) / 65.9651 < 0.001  # -0.06 %: 37 MiB short


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
    stored = 24 * layer + 2 * table + 2880 * 2  # + final norm
    sg = engine_plan(resolve_model(GPT_OSS_20B), "h100-sxm", "sglang", tensor_parallel_size=2)
    assert sg.weights_bytes == stored + 131072 * 64 * 2
    # vLLM: FusedMoE's 1440-wide shard -> 1536 (Marlin, 128), hidden 2880 -> 3072
    pad = 24 * 32 * _marlin_minus_stored(2880, 1440, 3072, 1536)
    vl = _plan(resolve_model(GPT_OSS_20B), tensor_parallel_size=2)
    assert vl.weights_bytes == stored + pad + 131072 * 64 * 4


def test_bnb_int8_llama_pp2_splits_the_layers():
    # Llama-3.1-8B bitsandbytes int8 (fixture): 32 alike layers, 16 a rank; the last rank holds
    # the lm_head (128256 x 4096) and the final norm, every rank the rope table, all in the
    # config's torch_dtype float32 (4 B). The config's rope_scaling is linear, factor 8: vLLM's
    # LinearScalingRotaryEmbedding has max_position x factor rows (0.19.0 sdist,
    # layers/rotary_embedding/linear_scaling_rope.py max_len = max_position_embeddings * factor).
    spec = resolve_model(FIX / "llama-3.1-8b-networks-bnb-int8" / "config.json")
    table, rope, norm = 128256 * 4096 * 4, 131072 * 8 * 128 * 4, 4096 * 4
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
    # the linears' second byte, less scales; the bf16 plan is allocator-counted
    # (calc.serving.allocator): every tensor here is a multiple of 512 B or 2 MiB, and each
    # attention layer adds 7 fp32 scalars of one 512 B block (vllm 0.19.0 sdist,
    # model_executor/layers/attention/attention.py set_default_quant_scales); the runtime-fp8
    # figure is not allocator-counted yet.
    assert bf16 - expected == 32 * linear - 32 * 16 + 32 * 7 * 512


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
         "--engine", "vllm", "--engine-version", "0.11.0", "--seq", "8192"],
        capture_output=True, text=True, cwd=ROOT, check=False,
    )  # fmt: skip
    pad = 24 * 32 * _marlin_minus_stored(2880, 2880, 3072, 2944)  # Marlin on the H100
    gib = (13_761_264_768 + pad + 131072 * 64 * 4) / 2**30
    assert f"Model loading took {gib:.4f} GiB" in out.stdout, out.stdout + out.stderr


def test_fbgemm_fp8_llama_405b_tp8_per_rank():
    # meta-llama/Llama-3.1-405B-Instruct-FP8 keeps every self_attn and the MLPs of the first and
    # last layers in bf16 (Llama 3 paper, sec. 6.2: FFN-only FP8, not in the first and last
    # layers; its modules_to_not_convert holds full names such as "model.layers.0.mlp.down_proj",
    # "model.layers.125.mlp.down_proj", "model.layers.0.self_attn.k_proj").
    from calc.quant import parse_quantization_config
    from calc.spec import ModelSpec

    keep = [f"model.layers.{i}.self_attn.{m}_proj" for i in range(126) for m in "qkvo"]
    keep += [f"model.layers.{i}.mlp.{m}_proj" for i in (0, 125) for m in ("gate", "up", "down")]
    qc = {"quant_method": "fbgemm_fp8", "activation_scale_ub": 1200.0}
    q = parse_quantization_config(qc | {"modules_to_not_convert": keep})
    assert (q.scheme.strategy, q.scheme.scale_dtype) == ("channel", "fp32")
    with pytest.raises(ValueError, match="'activation_scale_ub' must be a positive number"):
        parse_quantization_config(qc | {"activation_scale_ub": "big"})
    spec = resolve_model("llama-3.1-405b")
    spec = ModelSpec(**spec.model_dump(exclude={"quantization"}), quantization=q)
    # vLLM FBGEMMFp8LinearMethod.create_weights, one TP-8 rank: fp8 weight (out / 8, in) or
    # (out, in / 8), fp32 weight_scale (rows of this rank, 1), fp32 input_scale_ub scalar.
    # Llama-3.1-405B: 126 layers, hidden 16384, 128 q / 8 KV heads of 128, MLP 53248, vocab
    # 128256 (= 2004 x 64), untied.
    attn = ((2048 + 128 + 128) * 16384 + 16384 * 2048) * 2  # qkv_proj, o_proj in bf16
    mlp8 = 2 * 6656 * 16384 + 16384 * 6656  # gate_up_proj, down_proj in fp8
    mlp8 += 2 * 6656 * 4 + 16384 * 4  # weight scales (down_proj's 16384 rows on every rank)
    mlp8 += 3 * 4  # input_scale_ub per checkpoint module (vLLM's fused gate_up holds one: 4 B)
    mlp16 = 3 * 6656 * 16384 * 2
    norms = 2 * 16384 * 2
    total = 126 * (attn + norms) + 124 * mlp8 + 2 * mlp16
    total += 2 * 128256 // 8 * 16384 * 2 + 16384 * 2 + 131072 * 128 * 2  # tables, norm, rope
    p = engine_plan(spec, "h100-sxm", available_kv_gib=1.0, tensor_parallel_size=8)
    assert p.weights_bytes == total


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


def test_weight_dtype_is_the_engines_dtype_and_none_is_the_checkpoints():
    """A quantized checkpoint's unquantized tensors load in vLLM's --dtype: unset ("auto"), the
    config's torch_dtype (this fixture: float32); given, that dtype (never silently replaced)."""
    spec = resolve_model(FIX / "llama-3.1-8b-networks-bnb-int8" / "config.json")
    auto = engine_plan(spec, "h100-sxm", max_model_len=8192, available_kv_gib=10)
    fp32 = engine_plan(
        spec, "h100-sxm", max_model_len=8192, available_kv_gib=10, weight_dtype="fp32"
    )
    bf16 = engine_plan(
        spec, "h100-sxm", max_model_len=8192, available_kv_gib=10, weight_dtype="bf16"
    )
    assert auto.weights_bytes == fp32.weights_bytes > bf16.weights_bytes
    with pytest.raises(ValueError, match="'weight_dtype' int4"):
        engine_plan(spec, "h100-sxm", max_model_len=8192, weight_dtype="int4")
