"""vLLM 0.19.0's weights for RedHatAI's compressed-tensors (W8A8 int8, FP8-dynamic) and GPTQ
(w4a16) checkpoints, against llm-d-planner's H100 start-up logs.

Logged figures: https://github.com/llm-d-incubation/llm-d-planner at commit
d3121e059da88662db39a926a3ead964be97359b, accuracy/results/v0.19.0/logs/<name>.log, the lines
"Model loading took X GiB" and "Available KV cache memory: X GiB" (written out below, file by
file). The checkpoints' quantization_config: tests/fixtures/quant_configs/redhatai-*.json,
reconstructed from the model cards, compressed-tensors' presets and the logs' "Using scheme"
lines (SOURCES.json says how). Tensor shapes: vllm 0.19.0 sdist, written out in each test.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from calc.presets import load_preset
from calc.quant import parse_quantization_config
from calc.serving.evidence import evaluate, load_cases
from calc.serving.load_events import LinearAlloc, _layer_tensors
from calc.serving.plan import engine_plan
from calc.serving.quant_tensors import vllm_linear_tensors
from calc.spec import ModelSpec

ROOT = Path(__file__).parent.parent
QC = ROOT / "tests" / "fixtures" / "quant_configs"
CASES = {c["id"]: c for c in load_cases(ROOT / "benchmarks" / "engine_logs")}
GIB = 2**30

# (case, log file, "Model loading took" GiB, "Available KV cache memory" GiB), from each log
LOGGED = [
    ("llmd-019-qwen25-7b-w8a8-tp1-8192",
     "w8a8-redhatai-qwen2-5-7b--h100-80gb--tp1pp1dp1--8192.log", 8.14, 64.64),
    ("llmd-019-qwen25-7b-fp8dyn-tp1-8192",
     "fp8dyn-redhatai-qwen2-5---h100-80gb--tp1pp1dp1--8192.log", 8.14, 64.64),
    ("llmd-019-llama31-8b-w8a8-tp1-8192-fp16",
     "w8a8-redhatai-llam--h100-80gb--tp1pp1dp1--8192-dtf16.log", 8.49, 64.60),
    ("llmd-019-llama31-8b-w4a16-tp1-8192-fp16",
     "w4a16-redhatai-lla--h100-80gb--tp1pp1dp1--8192-dtf16.log", 5.38, 67.71),
    ("llmd-019-mistral-small31-w8a8-tp1-8192",
     "w8a8-mistral-small-24b--h100-80gb--tp1pp1dp1--8192.log", 24.07, 48.73),
    ("llmd-019-mistral-small31-w8a8-tp2-8192",
     "w8a8-mistral-small-24b--h100-80gb--tp2pp1dp1--8192.log", 12.11, 59.02),
    ("llmd-019-llama33-70b-fp8dyn-tp2-8192",
     "fp8dyn-llama-3-3-70b--h100-80gb--tp2pp1dp1--8192.log", 33.88, 37.28),
    ("llmd-019-llama33-70b-fp8dyn-tp4-8192",
     "fp8dyn-llama-3-3-70b--h100-80gb--tp4pp1dp1--8192.log", 16.96, 54.09),
    ("llmd-019-llama33-70b-w8a8-tp2-8192",
     "redhatai-llama-3-3-70b-i--h100-80gb--tp2pp1dp1--8192.log", 33.88, 37.28),
]  # fmt: skip


def _figure(checks, name):
    return next(c.kvcalc for c in checks if c.figure == name)


@pytest.mark.parametrize(("cid", "log", "weights", "available"), LOGGED)
def test_weights_within_half_a_percent_and_available_memory_within_two(
    cid, log, weights, available
):
    assert CASES[cid]["url"].endswith(log)  # the case quotes this log
    checks = evaluate(CASES[cid])
    assert abs(_figure(checks, "weights_gib") / weights - 1) < 0.005
    assert abs(_figure(checks, "available_kv_cache_gib") / available - 1) < 0.02


def _spec(preset: str, fixture: str, dtype: str, **overrides) -> ModelSpec:
    qc = json.loads((QC / fixture).read_text())["quantization_config"]
    spec = load_preset(preset)
    q = parse_quantization_config(qc, dtype=dtype)
    return ModelSpec(**(spec.model_dump(exclude={"quantization"}) | overrides), quantization=q)


def test_w8a8_layer_is_int8_weights_fp32_channel_scales_and_model_dtype_vectors():
    # compressed_tensors_w8a8_int8.py create_weights: weight int8 [out, in], weight_scale
    # float32 [out, 1] (CHANNEL); dynamic symmetric activations add nothing, and
    # CutlassInt8ScaledMMLinearKernel only transposes the weight (a view). Llama-3.1-8B on one
    # GPU: qkv 4096 + 2 x 1024 rows, o 4096, gate_up 2 x 14336, down 4096 (in 14336); the two
    # RMSNorms (4096 each) in fp16, as the run was served (--dtype float16).
    spec = _spec("llama-3.1-8b", "redhatai-meta-llama-3.1-8b-instruct-quantized.w8a8.json", "fp16")
    from calc.serving.quant_tensors import vllm_checkpoint_rank_bytes  # noqa: F401

    def quant(key, lins, out, inp):
        s = spec.quantization.scheme
        t = vllm_linear_tensors(
            s, out, inp, widths=len(lins), act_bytes=2, in_full=lins[0].in_features,
            row_parallel=False, capability=(9, 0),
        )  # fmt: skip
        return LinearAlloc(tuple(t))

    first, rest = _layer_tensors(spec, 0, 1, 1, 2, quant)
    assert [n for n, _ in first] == [6144 * 4096, 6144 * 4, 4096 * 4096, 4096 * 4]
    # the layer's vectors are taken as one tensor (load_events.py: < 512 B apart either way)
    assert [n for n, _ in rest] == [28672 * 4096, 28672 * 4, 4096 * 14336, 4096 * 4, 8192 * 2]


def test_gptq_marlin_tensors_on_hopper_and_none_elsewhere():
    # gptq_marlin.py GPTQMarlinLinearMethod.create_weights, 4-bit (pack 8), group 128, fp16:
    # qweight int32 [in / 8, out], g_idx int32 [in], qzeros int32 [in / 128, out / 8],
    # scales fp16 [in / 128, out]. Llama-3.1-8B's down_proj on one GPU: in 14336, out 4096.
    spec = _spec("llama-3.1-8b", "redhatai-meta-llama-3.1-8b-instruct-quantized.w4a16.json", "fp16")
    s = spec.quantization.scheme
    kw = dict(widths=1, act_bytes=2, in_full=14336, row_parallel=True)
    got = vllm_linear_tensors(s, 4096, 14336, capability=(9, 0), **kw)
    assert got == [14336 // 8 * 4096 * 4, 14336 * 4, 112 * 512 * 4, 112 * 4096 * 2]
    # Machete needs compute capability 9.0 (machete.py can_implement); Marlin's repack is not
    # written out, so an A100 falls back to the checkpoint's bytes
    assert vllm_linear_tensors(s, 4096, 14336, capability=(8, 0), **kw) is None


def test_w4a16_act_order_either_way_inside_the_logged_figure():
    # desc_act's value is not in the sources (SOURCES.json): with act order Machete keeps its
    # argsort permutation (int32 [in], machete.py process_weights_after_loading), one per linear
    # (in: 4096 qkv, 4096 o, 4096 gate_up, 14336 down; 32 layers). "Model loading took 5.38 GiB"
    # is 5.375 - 5.385 GiB; both readings must lie in it.
    base = _spec("llama-3.1-8b", "redhatai-meta-llama-3.1-8b-instruct-quantized.w4a16.json", "fp16")
    got = {}
    for act in (False, True):
        q = parse_quantization_config(
            {"quant_method": "gptq", "bits": 4, "group_size": 128, "sym": True, "desc_act": act},
            dtype="fp16",
        )
        spec = ModelSpec(**base.model_dump(exclude={"quantization"}), quantization=q)
        got[act] = engine_plan(spec, "h100-sxm", max_model_len=8192).weights_bytes
        assert 5.375 <= got[act] / GIB < 5.385
    perm = 32 * (4096 + 4096 + 4096 + 14336) * 4
    assert abs(got[True] - got[False] - perm) <= 4 * 2**20  # up to allocator rounding


def test_w8a8_without_quantized_activations_is_not_the_w8a8_path():
    # compressed-tensors W8A16 (no input_activations) is served by CompressedTensorsWNA16 in vLLM,
    # not W8A8Int8: input_bits stays None and the W8A8 tensors are not used
    q = parse_quantization_config(
        {"quant_method": "compressed-tensors", "format": "int-quantized",
         "config_groups": {"g": {"targets": ["Linear"], "weights": {
             "num_bits": 8, "type": "int", "strategy": "channel", "symmetric": True}}}},
    )  # fmt: skip
    assert q.scheme.input_bits is None
    kw = dict(widths=1, act_bytes=2, in_full=64, row_parallel=False, capability=(9, 0))
    assert vllm_linear_tensors(q.scheme, 128, 64, **kw) is None


def test_mixed_schemes_in_one_fused_module_are_refused():
    # vLLM fuses q/k/v into qkv_proj and requires one scheme for all its shards
    qc = json.loads((QC / "redhatai-qwen2.5-7b-instruct-quantized.w8a8.json").read_text())
    qc = qc["quantization_config"] | {"ignore": ["lm_head", "re:.*k_proj$"]}
    spec = load_preset("qwen2.5-7b")
    q = parse_quantization_config(qc)
    spec = ModelSpec(**spec.model_dump(exclude={"quantization"}), quantization=q)
    with pytest.raises(ValueError, match="'quantization_config' must give every part"):
        engine_plan(spec, "h100-sxm", max_model_len=8192)


def test_kernel_choice_by_gpu():
    # CompressedTensorsW8A8Fp8.get_min_capability is 89 (below it vLLM serves fp8 weights with
    # the weight-only W8A16 Marlin scheme, not written out: None); W8A8Int8's is 75
    fp8 = _spec("qwen2.5-7b", "redhatai-qwen2.5-7b-instruct-fp8-dynamic.json", "bf16")
    int8 = _spec("qwen2.5-7b", "redhatai-qwen2.5-7b-instruct-quantized.w8a8.json", "bf16")
    kw = dict(widths=1, act_bytes=2, in_full=3584, row_parallel=True)
    assert vllm_linear_tensors(fp8.quantization.scheme, 3584, 3584, capability=(9, 0), **kw) == [
        3584 * 3584,
        3584 * 4,
    ]
    assert vllm_linear_tensors(fp8.quantization.scheme, 3584, 3584, capability=(8, 0), **kw) is None
    assert vllm_linear_tensors(int8.quantization.scheme, 3584, 3584, capability=(8, 0), **kw) == [
        3584 * 3584,
        3584 * 4,
    ]
    # Machete refuses act order when the input is split (machete.py can_implement): Marlin then
    g = parse_quantization_config(
        {"quant_method": "gptq", "bits": 4, "group_size": 128, "sym": True, "desc_act": True},
        dtype="fp16",
    ).scheme
    row = dict(widths=1, act_bytes=2, in_full=14336, row_parallel=True, capability=(9, 0))
    assert vllm_linear_tensors(g, 4096, 7168, **row) is None
    assert vllm_linear_tensors(g, 4096, 14336, **row) is not None
