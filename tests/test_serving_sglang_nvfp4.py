"""SGLang's --kv-cache-dtype nvfp4 (calc.serving.sglang_nvfp4), the expected values written out
from the PyPI wheels 0.5.16 - 0.5.23 (layers/quantization/fp4_kv_cache_quant_method.py
NVFP4KVCacheMethod.create_buffers / compute_cell_size, model_executor/pool_configurator.py
_compute_cell_size, mem_cache/memory_pool.py get_kv_size_bytes, arg_groups/kv_cache_hook.py).

Llama-3.1-8B at TP 1 (32 layers, 8 KV heads of 128): a layer's K is 8 x 128 // 2 = 512 B of fp4
values and 8 x 128 // 16 = 64 B of fp8 scales a token, V the same: 32 x 2 x 576 = 36,864 B a
token. The shared fp8 dequant workspace adds 8 x 128 B for K and again for V: 38,912 B.
"""

from __future__ import annotations

import pytest

from calc.cli.main import main
from calc.serving.plan import engine_plan

GIB = 2**30
LAYERS = 32 * 2 * (8 * 128 // 2 + 8 * 128 // 16)  # 36,864 B a token: values + scales
WORKSPACE = 2 * 8 * 128  # 2,048 B a token, K and V, shared by the layers


def plan(gpu="b200", version="0.5.23", model="llama-3.1-8b", **kw):
    kw.setdefault("available_kv_gib", 20)
    return engine_plan(model, gpu, "sglang", version=version, kv_cache_dtype="nvfp4", **kw)


@pytest.mark.parametrize(
    ("gpu", "version", "cell"),
    [
        ("b200", "0.5.23", LAYERS),  # SM100: trtllm_mha prefills and decodes, native scales
        ("rtx-pro-6000", "0.5.23", LAYERS + WORKSPACE),  # SM120: FlashInfer's fp8 prefill
        ("b200", "0.5.20", LAYERS + WORKSPACE),  # 0.5.16 - 0.5.20: the workspace always
        ("b200", "0.5.16", LAYERS + WORKSPACE),
    ],
)
def test_the_pool_and_its_lines(gpu, version, cell):
    p = plan(gpu, version)
    # page 64 (trtllm_mha): rest // cell rounded down to whole pages
    tokens = 20 * GIB // cell // 64 * 64
    assert p.gpu_kv_cache_tokens == tokens and p.page_bytes == cell
    k = (tokens + 64) * cell // 2  # K's values, scales and workspace rows; V the same
    line = (
        f"KV Cache is allocated. dtype: torch.float4_e2m1fn_x2, #tokens: {tokens}, "
        f"K size: {k / GIB:.2f} GB, V size: {k / GIB:.2f} GB"
    )
    assert line in p.log_lines
    assert "NVFP4 KV Cache might lead to an accuracy drop!" in p.log_lines
    hook = [x for x in p.log_lines if x.startswith("NVFP4 prefill dequant dtype")]
    if version >= "0.5.21":
        d = "nvfp4" if gpu == "b200" else "fp8_e4m3"
        assert hook == [
            f"NVFP4 prefill dequant dtype: {d}; prefill input: {d}; decode input: nvfp4."
        ]
    else:
        assert hook == []


def test_sm120_decodes_on_trtllm_mha_with_its_page():
    # SGLang's default on an RTX PRO 6000 is page 1; nvfp4's trtllm_mha decode takes 64
    p = plan("rtx-pro-6000", "0.5.23")
    assert (
        "TensorRT-LLM MHA only supports page_size of 16, 32, 64 or 128, changing page_size "
        "from None to 64." in p.log_lines
    )
    assert p.gpu_kv_cache_tokens % 64 == 0
    assert plan("rtx-pro-6000", "0.5.23", page_size=32).gpu_kv_cache_tokens % 32 == 0


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        (dict(gpu="h100-sxm"), "--kv-cache-dtype=nvfp4 requires Blackwell SM100 or SM120"),
        (dict(gpu="rtx-pro-6000", version="0.5.20"), "SM120 GPU before 0.5.21"),
        (dict(model="deepseek-v3", tensor_parallel_size=8), "an MLA model"),
        (dict(model="gemma-3-27b"), "sliding_attention layers"),
        (dict(model="qwen3-next-80b-a3b", tensor_parallel_size=4), "linear_attention layers"),
    ],
)
def test_what_sglang_refuses_and_what_is_not_modelled(kw, message):
    with pytest.raises(ValueError, match=message):
        plan(**kw)


def test_the_choice_by_release_and_the_other_fp4_caches():
    with pytest.raises(ValueError, match="its --kv-cache-dtype choices"):
        plan(version="0.5.15.post1")
    for name in ("fp4_mx_block16", "mxfp8"):
        with pytest.raises(ValueError, match="the choices kvcalc models"):
            engine_plan("llama-3.1-8b", "b200", "sglang", version="0.5.23", kv_cache_dtype=name)
    with pytest.raises(ValueError, match="its --kv-cache-dtype choices"):  # gone from 0.5.21
        engine_plan("llama-3.1-8b", "b200", "sglang", version="0.5.23", kv_cache_dtype="fp4_e2m1")


def test_derived_and_cli(capsys):
    derived = plan(available_kv_gib=None)
    assert derived.source == "derived" and derived.gpu_kv_cache_tokens > 0
    bf16 = engine_plan("llama-3.1-8b", "b200", "sglang", version="0.5.23")
    assert derived.available_kv_cache_bytes == bf16.available_kv_cache_bytes  # the same budget
    argv = ["plan", "llama-3.1-8b", "--gpu", "b200", "--engine", "sglang", "--kv", "nvfp4"]
    assert main([*argv, "--available-kv-gib", "20"]) == 0
    assert "dtype: torch.float4_e2m1fn_x2" in capsys.readouterr().out
    assert main([*argv, "--gpu", "h100-sxm"]) == 2
    assert "requires Blackwell SM100 or SM120" in capsys.readouterr().err
