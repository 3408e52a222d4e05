"""--kv-cache-dtype auto on checkpoints that declare an fp8 KV cache (calc.serving.kv_auto), the
expected dtypes written out from the engines' source by release:

- vLLM utils/torch_utils.py resolve_kv_cache_dtype_string / get_kv_cache_quant_algo_string: absent
  from the 0.13.0 sdist, in 0.14.0 (torch_utils.py:239-291) to 0.34.0: a modelopt quant_method's
  kv_cache_scheme ({"dynamic": false, num_bits 8, type float} -> fp8_e4m3, another dict ->
  "auto") or kv_cache_quant_algo "FP8" -> fp8_e4m3; compressed-tensors' kv_cache_scheme in
  Attention.__init__: fp8 over any dtype 0.16.0 - 0.21.0, only over "auto" from 0.22.0;
- SGLang configure_kv_cache_dtype (model_runner.py 0.5.3, mem_cache/kv_cache_dtype.py 0.5.16+):
  quant_config.kv_cache_quant_algo == "FP8" -> float8_e4m3fn, set by ModelOptFp8Config from
  0.5.4 (a flat kv_cache_quant_algo only from 0.5.15), ModelOptFp4Config from 0.5.3 (not a flat
  kv_cache_quant_algo in 0.5.9 - 0.5.14), CompressedTensorsConfig from 0.5.19.
The fixtures: tests/fixtures/quant_configs (SOURCES.json names each Hub file).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from calc.presets import resolve_model
from calc.quant import parse_quantization_config
from calc.serving.plan import engine_plan

FIX = Path(__file__).parent / "fixtures" / "quant_configs"
GIB = 2**30
# Llama-3.1-70B at TP 4: 80 layers x 2 KV heads a rank x 128 x K, V: 40,960 values a token
VALUES = 80 * 2 * 128 * 2


def _spec(qc: dict):
    q = parse_quantization_config(qc, dtype="bf16")
    return resolve_model("llama-3.1-70b").model_copy(update={"quantization": q})


def nested_fp8():
    # nvidia/Llama-3.1-70B-Instruct-FP8's hf_quant_config.json: quantization.kv_cache_quant_algo
    return _spec(json.loads((FIX / "llama-3.1-70b-instruct-fp8.hf_quant_config.json").read_text()))


def flat_fp8(**kv):
    # the same declaration in a config.json's quantization_config (flat)
    return _spec({"quant_method": "modelopt", "quant_algo": "FP8", **kv})


def plan(spec, engine, version, **kw):
    kw.setdefault("available_kv_gib", 20)
    return engine_plan(spec, "h100-sxm", engine, version=version, tensor_parallel_size=4, **kw)


def tokens(kv_bytes):  # 20 GiB of whole vLLM blocks / SGLang rows (page 1), + SGLang's page row
    return 20 * GIB // (VALUES * kv_bytes)


@pytest.mark.parametrize(
    "engine, version, kv",
    [("vllm", "0.13.0", "bf16"), ("vllm", "0.14.0", "fp8_e4m3"), ("vllm", "0.34.0", "fp8_e4m3"),
     ("sglang", "0.5.3", "bf16"), ("sglang", "0.5.4", "fp8_e4m3"), ("sglang", "0.5.23", "fp8_e4m3")],
)  # fmt: skip
def test_nested_modelopt_fp8(engine, version, kv):
    p = plan(nested_fp8(), engine, version)
    assert p.kv_cache_dtype == kv
    assert p.gpu_kv_cache_tokens == tokens(1 if kv.startswith("fp8") else 2)


def test_an_explicit_dtype_is_kept():
    p = plan(nested_fp8(), "vllm", "0.14.0", kv_cache_dtype="bf16")
    assert (p.kv_cache_dtype, p.gpu_kv_cache_tokens) == ("bf16", tokens(2))
    p = plan(nested_fp8(), "sglang", "0.5.23", kv_cache_dtype="bf16")
    assert (p.kv_cache_dtype, p.gpu_kv_cache_tokens) == ("bf16", tokens(2))


@pytest.mark.parametrize(
    "version, kv", [("0.5.4", "bf16"), ("0.5.14", "bf16"), ("0.5.15", "fp8_e4m3")]
)
def test_sglang_flat_kv_cache_quant_algo_of_fp8_weights(version, kv):
    # ModelOptFp8Config reads a flat kv_cache_quant_algo from 0.5.15 only
    p = plan(flat_fp8(kv_cache_quant_algo="FP8"), "sglang", version)
    assert p.kv_cache_dtype == kv
    assert plan(flat_fp8(kv_cache_quant_algo="FP8"), "vllm", "0.14.0").kv_cache_dtype == "fp8_e4m3"


def test_a_modelopt_scheme_needs_dynamic_false_in_vllm():
    scheme = {"num_bits": 8, "type": "float"}
    no_dynamic = flat_fp8(kv_cache_scheme=scheme)
    assert plan(no_dynamic, "vllm", "0.14.0").kv_cache_dtype == "bf16"  # its warning, auto
    assert plan(no_dynamic, "sglang", "0.5.4").kv_cache_dtype == "fp8_e4m3"  # {float, 8}
    static = flat_fp8(kv_cache_scheme={**scheme, "dynamic": False})
    assert plan(static, "vllm", "0.14.0").kv_cache_dtype == "fp8_e4m3"


def ct_spec(**kv):
    """RedHatAI's Llama-3.1-8B w8a8 config with a static per-tensor kv_cache_scheme (the shape
    of its FP8-KV exports), `kv` changing it."""
    qc = json.loads((FIX / "redhatai-meta-llama-3.1-8b-instruct-quantized.w8a8.json").read_text())
    qc = qc.get("quantization_config", qc)
    scheme = {"num_bits": 8, "type": "float", "strategy": "tensor", "dynamic": False, **kv}
    q = parse_quantization_config({**qc, "kv_cache_scheme": {"symmetric": True, **scheme}})
    return resolve_model("llama-3.1-8b").model_copy(update={"quantization": q})


def test_compressed_tensors_kv_cache_scheme():
    spec = ct_spec()

    def kv_dtype(engine, version, **kw):
        p = engine_plan(spec, "h100-sxm", engine, version=version, available_kv_gib=20, **kw)
        return p.kv_cache_dtype

    assert kv_dtype("vllm", "0.14.0") == "bf16"
    assert kv_dtype("vllm", "0.16.0", kv_cache_dtype="bf16") == "fp8"  # over the given dtype
    assert kv_dtype("vllm", "0.22.0", kv_cache_dtype="bf16") == "bf16"
    assert kv_dtype("vllm", "0.22.0") == "fp8"
    assert kv_dtype("sglang", "0.5.18") == "bf16"
    assert kv_dtype("sglang", "0.5.19") == "fp8_e4m3"


def test_sglang_prints_the_resolved_dtype():
    p = plan(nested_fp8(), "sglang", "0.5.23")
    k = (tokens(1) + 1) * 80 * 2 * 128 / GIB  # rows x layers x heads x head_dim x 1 B
    line = f"KV Cache is allocated. dtype: torch.float8_e4m3fn, #tokens: {tokens(1)}, "
    assert p.log_lines[1] == line + f"K size: {k:.2f} GB, V size: {k:.2f} GB"


def test_a_modelopt_nvfp4_kv_declaration():
    # vLLM: MODELOPT_TO_VLLM_KV_CACHE_DTYPE_MAP has "nvfp4" from 0.20.0 (before: a warning and
    # auto), a {float, 4} scheme too, with no `dynamic` test; 0.20.x has no backend for it and
    # 0.25+ runs it on the SM100 family (calc.serving.vllm_nvfp4); SGLang never (FP8 only)
    spec = _spec(
        {"quant_method": "modelopt", "quant_algo": "NVFP4", "kv_cache_quant_algo": "NVFP4"}
    )
    assert plan(spec, "vllm", "0.19.0").kv_cache_dtype == "bf16"
    with pytest.raises(ValueError, match="no attention backend that runs it"):
        plan(spec, "vllm", "0.20.0")
    kw = dict(version="0.25.0", tensor_parallel_size=4, available_kv_gib=20, block_size=16)
    p = engine_plan(spec, "b200", "vllm", **kw)
    assert p.kv_cache_dtype == "nvfp4"
    page = 16 * 2 * 144  # a layer's block: 16 tokens x 2 KV heads a rank x (72 + 72) B
    assert (p.page_bytes, p.num_gpu_blocks) == (page, 20 * GIB // (80 * page))
    assert plan(spec, "sglang", "0.5.23").kv_cache_dtype == "bf16"
    scheme = _spec({"quant_method": "modelopt", "quant_algo": "NVFP4",
                    "kv_cache_scheme": {"num_bits": 4, "type": "float"}})  # fmt: skip
    assert engine_plan(scheme, "b200", "vllm", **kw).kv_cache_dtype == "nvfp4"
    with pytest.raises(ValueError, match="kv_cache_scheme.*8- or 4-bit float"):
        flat_fp8(kv_cache_scheme={"num_bits": 2, "type": "float"})


@pytest.mark.parametrize(
    "declared, version, kv",
    [("kv_cache_quant_algo", "0.5.3", "fp8_e4m3"), ("kv_cache_quant_algo", "0.5.8", "fp8_e4m3"),
     ("kv_cache_quant_algo", "0.5.9", "bf16"), ("kv_cache_quant_algo", "0.5.14", "bf16"),
     ("kv_cache_quant_algo", "0.5.15", "fp8_e4m3"), ("kv_cache_scheme", "0.5.9", "fp8_e4m3")],
)  # fmt: skip
def test_sglang_modelopt_nvfp4_weights(declared, version, kv):
    # ModelOptFp4Config: a flat kv_cache_quant_algo, except 0.5.9 - 0.5.14 (the scheme only)
    value = "FP8" if declared == "kv_cache_quant_algo" else {"num_bits": 8, "type": "float"}
    spec = _spec({"quant_method": "modelopt", "quant_algo": "NVFP4", declared: value})
    assert plan(spec, "sglang", version).kv_cache_dtype == kv


def test_vllm_prints_cache_configs_fp8_line():
    # config/cache.py _validate_cache_dtype: "Using fp8 ... scaling factor." to 0.19.1 (the
    # 0.14.0 - 0.19.1 sdists), the dtype by name and no period from 0.20.0; the auto-resolved fp8
    # reaches CacheConfig too (arg_utils.py create_engine_config)
    tail = (
        " data type to store kv cache. It reduces the GPU memory footprint and boosts the "
        "performance. Meanwhile, it may cause accuracy drop without a proper scaling factor"
    )
    assert plan(nested_fp8(), "vllm", "0.14.0").log_lines[0] == "Using fp8" + tail + "."
    assert plan(nested_fp8(), "vllm", "0.20.0").log_lines[0] == "Using fp8_e4m3" + tail
    assert not plan(nested_fp8(), "vllm", "0.13.0").log_lines[0].startswith("Using")


@pytest.mark.parametrize(
    "gpu, version, kv, printed",
    [("mi300x", "0.5.6.post1", "fp8_e5m2", "torch.float8_e5m2fnuz"),
     ("mi355x", "0.5.6.post1", "fp8_e4m3", "torch.float8_e4m3fnuz"),
     ("mi355x", "0.5.6.post2", "fp8_e4m3", "torch.float8_e4m3fn"),
     ("mi300x", "0.5.6.post2", "fp8_e5m2", "torch.float8_e4m3fnuz"),
     ("h100-sxm", "0.5.6.post2", "fp8_e5m2", "torch.float8_e5m2")],
)  # fmt: skip
def test_sglang_names_the_cache_dtype_by_platform_and_release(gpu, version, kv, printed):
    # configure_kv_cache_dtype: ROCm's float8_*fnuz to 0.5.6.post1, fp8_dtype from 0.5.6.post2
    # (is_fp8_fnuz: "gfx94" in the arch: MI300X gfx942, MI355X gfx950), logged as
    # "Using KV cache dtype: ..." in 0.5.3rc2 - 0.5.12 (model_runner.py)
    p = engine_plan(
        "llama-3.1-8b", gpu, "sglang", version=version, available_kv_gib=20,
        kv_cache_dtype=kv, mem_fraction_static=0.8,
    )  # fmt: skip
    assert f"Using KV cache dtype: {printed}" in p.log_lines
    later = engine_plan(
        "llama-3.1-8b", gpu, "sglang", version="0.5.13", available_kv_gib=20,
        kv_cache_dtype=kv, mem_fraction_static=0.8,
    )  # fmt: skip
    assert not any(x.startswith("Using KV cache dtype") for x in later.log_lines)


def test_vllm_refuses_a_compressed_tensors_kv_scheme_it_cannot_run():
    # validate_kv_cache_scheme (compressed_tensors.py, 0.10.2 - 0.34.0 sdists): 8-bit float only
    spec = ct_spec(type="int")
    with pytest.raises(ValueError, match="num_bits=8, type=float, however received"):
        engine_plan(spec, "h100-sxm", "vllm", version="0.22.0", available_kv_gib=20)


def test_an_fp8_config_declaring_a_kv_cache_is_refused_by_name():
    # SGLang 0.5.18+'s Fp8Config reads a flat kv_cache_quant_algo (layers/quantization/fp8.py),
    # vLLM's does not: kvcalc does not guess which engine's reading applies
    qc = json.loads((FIX / "qwen3-30b-a3b-fp8.config.json").read_text())["quantization_config"]
    with pytest.raises(ValueError, match="kv_cache_quant_algo.*not modelled with quant_method fp8"):
        parse_quantization_config({**qc, "kv_cache_quant_algo": "FP8"})
