"""SGLang's --kv-cache-dtype fp4_e2m1 (calc.serving.sglang_fp4), the expected values written out
from the PyPI wheels 0.5.4.post3 - 0.5.20 (model_executor/pool_configurator.py
_compute_cell_size, mem_cache/memory_pool.py MHATokenToKVPoolFP4 / MLATokenToKVPoolFP4 and
get_kv_size_bytes, mem_cache/kv_cache_dtype.py).

fp4 values two to a byte and one uint8 scale per 16 of them, per token:
- DeepSeek-V3 (MLA, 61 layers, latent 512 + 64): 576 // 2 + 576 // 16 = 288 + 36 = 324 B a
  layer in the cell, 19,764 B a token; "KV size" counts the 288 B of values only.
- Llama-3.1-8B (32 layers, 8 KV heads of 128): K 8 x 64 + 8 x 8 = 576 B a layer, V the same,
  36,864 B a token; "K size" counts the 512 B of K's values only.
"""

from __future__ import annotations

import pytest

from calc.serving.plan import engine_plan

GIB = 2**30


def plan(model="llama-3.1-8b", version="0.5.10", gpu="b200", **kw):
    kw.setdefault("available_kv_gib", 20)
    return engine_plan(model, gpu, "sglang", version=version, kv_cache_dtype="fp4_e2m1", **kw)


@pytest.mark.parametrize("version", ["0.5.4.post3", "0.5.10", "0.5.15.post1"])
def test_deepseek_v3_latent_pool(version):
    p = plan("deepseek-v3", version, tensor_parallel_size=8)
    cell = 61 * (288 + 36)
    tokens = 20 * GIB // cell // 64 * 64  # trtllm_mla's 64-token pages on a B200
    assert p.page_bytes == cell and p.gpu_kv_cache_tokens == tokens
    kv = (tokens + 64) * 288 * 61
    assert p.log_lines[-2].endswith(f"#tokens: {tokens}, KV size: {kv / GIB:.2f} GB")
    assert "FP4 (E2M1) KV Cache might lead to a accuracy drop!" in p.log_lines


def test_llama_pool_and_its_lines():
    p = plan(version="0.5.13")
    cell = 32 * 2 * (8 * 64 + 8 * 8)
    tokens = 20 * GIB // cell // 64 * 64  # trtllm_mha's pages
    k = (tokens + 64) * 32 * 8 * 64
    assert p.page_bytes == cell and p.gpu_kv_cache_tokens == tokens
    assert (
        f"KV Cache is allocated. dtype: torch.float4_e2m1fn_x2, #tokens: {tokens}, K size: "
        f"{k / GIB:.2f} GB, V size: {k / GIB:.2f} GB" in p.log_lines
    )
    old = plan(version="0.5.12")  # "Using KV cache dtype" to 0.5.12, no dtype in the pool line
    assert "Using KV cache dtype: torch.float4_e2m1fn_x2" in old.log_lines


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        (dict(version="0.5.18"), "--kv-cache-dtype=fp4_e2m1 is deprecated. Use --kv-cache-dtype"),
        (dict(version="0.5.21"), "its --kv-cache-dtype choices"),
        (dict(version="0.5.4.post2"), "its --kv-cache-dtype choices"),
        (dict(version="0.5.6"), "a standard attention model before 0.5.6.post1"),
        (dict(gpu="h100-sxm"), "a GPU outside the SM100 family"),
        (dict(model="gemma-3-27b"), "sliding_attention layers"),
        (dict(model="deepseek-v3.2", tensor_parallel_size=8), "DeepSeek DSA only supports bf16"),
    ],
)
def test_refusals(kw, message):
    with pytest.raises(ValueError, match=message):
        plan(**kw)


def test_vllm_has_no_such_choice():
    with pytest.raises(ValueError, match="the choices kvcalc models"):
        engine_plan("llama-3.1-8b", "b200", "vllm", kv_cache_dtype="fp4_e2m1")
