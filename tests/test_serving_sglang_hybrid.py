"""SGLang's pools for hybrid models (calc.serving.sglang_hybrid), the expected values written out
from SGLang's source, release by release:

- mamba_cache_per_req (python/sglang/srt/configs/mamba_utils.py Mamba2CacheParams, Qwen3-Next's
  Mamba2StateShape.create): per linear layer conv_dim / tp x (kernel - 1) bf16 elements, conv_dim
  = 2 x key heads x dk + value heads x dv, plus value heads / tp x dk x dv float32 elements;
- handle_max_mamba_cache (model_runner.py @ b0d25e72c v0.5.2, baf277a9b v0.5.3.post2 in the
  kvcache-ai/sglang_awq history; model_runner_kv_cache_mixin.py in the 0.5.7 / 0.5.9 wheels;
  mem_cache/kv_cache_configurator.py in the 0.5.16, 0.5.17 and 0.5.23 wheels):
    0.5.2: max_mamba_cache_size = --max-running-requests or 512;
    0.5.3.post2 - 0.5.16: int(rest x r / (1 + r) // per_req), r = 0.9;
    0.5.17 on: int((rest x r / (1 + r) - per_req) // per_req), and (size + 1) x per_req charged;
  then max_total_num_tokens = (rest - the charged state) // cell, the cell over the 12 full
  layers (profile_max_num_token: mambaish_config.full_attention_layer_ids);
- MambaPool: size + 1 slots a layer, logged in GiB to two decimals (memory_pool.py);
- Llama 4: one token pool over all 48 layers up to 0.5.7 (is_hybrid_model needs
  --hybrid-kvcache-ratio); from 0.5.8 is_hybrid_swa_model lists Llama4ForConditionalGeneration
  and set_num_tokens_hybrid_swa shares T x 48 token-layers: full = int(T x 48 / (0.8 x 36 +
  12)), swa = int(full x 0.8) (model_runner_kv_cache_mixin.py in the 0.5.8 wheel).
"""

from __future__ import annotations

import numpy as np
import pytest
from gdn_small import SMALL

from calc.serving.grid import engine_plan_grid
from calc.serving.plan import engine_plan

GIB = 2**30
# SMALL (tests/gdn_small.py): 3 linear + 1 full layer; 4 key heads, 8 value heads, dk 64,
# dv 32, kernel 4; 2 KV heads of 64
SMALL_CONV = (2 * 4 * 64 + 8 * 32) * (4 - 1) * 2  # 4608 B a layer
SMALL_SSM = 8 * 64 * 32 * 4  # 65536 B a layer
SMALL_PER_REQ = (SMALL_CONV + SMALL_SSM) * 3  # 210432
SMALL_CELL = 2 * 64 * 1 * 2 * 2  # one full layer, K and V, bf16: 512


def sg(model, version, avail_gib, **kw):
    kw.setdefault("tensor_parallel_size", 1)
    return engine_plan(
        model, "h100-sxm", "sglang", version=version, available_kv_gib=avail_gib, **kw
    )


def test_small_model_ratio_split_with_padding_slot():
    rest = 1 * GIB
    budget = rest * 0.9 / 1.9
    slots = int((budget - SMALL_PER_REQ) // SMALL_PER_REQ)
    assert slots == 2416
    tokens = (rest - (slots + 1) * SMALL_PER_REQ) // SMALL_CELL
    assert tokens == 1103765
    p = sg(SMALL, "0.5.23", 1.0, max_model_len=4096)
    assert (p.gpu_kv_cache_tokens, p.max_mamba_cache_size) == (tokens, 2416)
    conv, ssm = (slots + 1) * 3 * SMALL_CONV / GIB, (slots + 1) * 3 * SMALL_SSM / GIB
    assert p.log_lines[1] == (
        f"Mamba Cache is allocated. max_mamba_cache_size: 2416, conv_state size: {conv:.2f}GB, "
        f"ssm_state size: {ssm:.2f}GB "
    )
    k = (tokens + 1) * 2 * 64 * 1 * 2 / GIB  # tokens + page_size rows, one layer
    assert p.log_lines[2] == (  # 0.5.13+ name the dtype (memory_pool.py _finalize_allocation_log)
        f"KV Cache is allocated. dtype: torch.bfloat16, #tokens: {tokens}, K size: {k:.2f} GB, "
        f"V size: {k:.2f} GB"
    )
    assert p.max_concurrency == pytest.approx(tokens / 4096)


def test_small_model_releases():
    rest = 1 * GIB
    slots = int(rest * 0.9 / 1.9 // SMALL_PER_REQ)  # no padding slot before 0.5.17
    assert slots == 2417
    for v in ("0.5.3.post2", "0.5.8", "0.5.16"):
        p = sg(SMALL, v, 1.0)
        assert p.gpu_kv_cache_tokens == (rest - slots * SMALL_PER_REQ) // SMALL_CELL, v
        # after configure_kv_cache_dtype's line to 0.5.12 (model_runner.py), not after
        i = 2 if v != "0.5.16" else 1
        assert "max_mamba_cache_size: 2417," in p.log_lines[i]
    # 0.5.2: the radix cache forced off, 512 states, and no size in the line
    p = sg(SMALL, "0.5.2", 1.0)
    assert p.gpu_kv_cache_tokens == (rest - 512 * SMALL_PER_REQ) // SMALL_CELL == 1886720
    conv, ssm = 513 * 3 * SMALL_CONV / GIB, 513 * 3 * SMALL_SSM / GIB
    assert p.log_lines[1] == (
        f"Mamba Cache is allocated. conv_state size: {conv:.2f}GB, ssm_state size: {ssm:.2f}GB "
    )
    p = sg(SMALL, "0.5.2", 1.0, max_running_requests=64, max_model_len=4096)
    assert p.gpu_kv_cache_tokens == (rest - 64 * SMALL_PER_REQ) // SMALL_CELL
    assert p.max_concurrency == 64


def test_given_size_and_radix_cache_by_release():
    rest = 1 * GIB
    # 0.5.7 on: a given size is kept; 0.5.17 on it also pays the padding slot
    p = sg(SMALL, "0.5.7", 1.0, max_mamba_cache_size=100, max_model_len=4096)
    assert p.gpu_kv_cache_tokens == (rest - 100 * SMALL_PER_REQ) // SMALL_CELL
    # 0.5.7 reserves 3 + 2 states a running request (model_runner_kv_cache_mixin.py in the
    # 0.5.7 wheel: MAMBA_CACHE_V2_ADDITIONAL_RATIO_OVERLAP without speculative decoding)
    assert p.max_concurrency == 100 // 5
    p = sg(SMALL, "0.5.17", 1.0, max_mamba_cache_size=100)
    assert p.gpu_kv_cache_tokens == (rest - 101 * SMALL_PER_REQ) // SMALL_CELL
    # 0.5.3.post2 - 0.5.6.post2: the ratio overwrites it unless the radix cache is off
    with pytest.raises(ValueError, match="'max_mamba_cache_size' is overwritten .* got 100"):
        sg(SMALL, "0.5.5", 1.0, max_mamba_cache_size=100)
    p = sg(SMALL, "0.5.5", 1.0, max_mamba_cache_size=100, disable_radix_cache=True)
    assert p.gpu_kv_cache_tokens == (rest - 100 * SMALL_PER_REQ) // SMALL_CELL
    # radix cache off, no --max-running-requests: 512 up to 0.5.8, the ratio from 0.5.9
    p = sg(SMALL, "0.5.8", 1.0, disable_radix_cache=True)
    assert p.gpu_kv_cache_tokens == (rest - 512 * SMALL_PER_REQ) // SMALL_CELL
    p = sg(SMALL, "0.5.9", 1.0, disable_radix_cache=True)
    assert p.gpu_kv_cache_tokens == (rest - 2417 * SMALL_PER_REQ) // SMALL_CELL
    p = sg(SMALL, "0.5.9", 1.0, disable_radix_cache=True, max_running_requests=48)
    assert p.gpu_kv_cache_tokens == (rest - 48 * SMALL_PER_REQ) // SMALL_CELL
    # --mamba-ssm-dtype bfloat16 halves the temporal state; --mamba-full-memory-ratio
    per_req = (SMALL_CONV + SMALL_SSM // 2) * 3
    slots = int((rest * 0.5 / 1.5 - per_req) // per_req)
    p = sg(SMALL, "0.5.23", 1.0, mamba_ssm_dtype="bfloat16", mamba_full_memory_ratio=0.5)
    assert p.gpu_kv_cache_tokens == (rest - (slots + 1) * per_req) // SMALL_CELL


def test_qwen3_next_preset_tp4():
    # tp 4: conv (8192 / 4) x 3 bf16, temporal 8 x 128 x 128 fp32, 36 linear layers
    conv, ssm = 2048 * 3 * 2, 8 * 128 * 128 * 4
    per_req = (conv + ssm) * 36
    assert per_req == 19316736
    rest = 20 * GIB
    slots = int((rest * 0.9 / 1.9 - per_req) // per_req)
    cell = 1 * 256 * 12 * 2 * 2  # 2 KV heads over tp 4: one a rank, 12 full layers
    tokens = (rest - (slots + 1) * per_req) // cell
    assert (slots, tokens) == (525, 920754)
    p = sg("qwen3-next-80b-a3b", "0.5.23", 20.0, tensor_parallel_size=4)
    assert p.log_lines[1:3] == [
        "Mamba Cache is allocated. max_mamba_cache_size: 525, conv_state size: 0.22GB, "
        "ssm_state size: 9.25GB ",
        "KV Cache is allocated. dtype: torch.bfloat16, #tokens: 920754, K size: 5.27 GB, "
        "V size: 5.27 GB",
    ]
    assert p.log_lines[3].startswith("max_total_num_tokens=920754, ")
    assert p.page_bytes == cell
    # the grid path agrees with the single plans
    df = engine_plan_grid(
        "qwen3-next-80b-a3b",
        "h100-sxm",
        "sglang",
        version="0.5.23",
        tensor_parallel_size=4,
        available_kv_gib=[20.0, 30.0],
    )
    single = [sg("qwen3-next-80b-a3b", "0.5.23", g, tensor_parallel_size=4) for g in (20.0, 30.0)]
    assert list(df["gpu_kv_cache_tokens"]) == [s.gpu_kv_cache_tokens for s in single]
    assert np.allclose(df["max_concurrency"], [s.max_concurrency for s in single])


def test_llama4_scout_chunked_layers():
    rest = 20 * GIB
    cell = 1 * 128 * 48 * 2 * 2  # tp 8: one KV head a rank, all 48 layers
    T = rest // cell
    assert T == 873813
    old = sg("llama-4-scout", "0.5.7", 20.0, tensor_parallel_size=8, max_model_len=131072)
    k = (T + 1) * 128 * 48 * 2 / GIB
    assert old.log_lines[1:3] == [  # configure_kv_cache_dtype's line, then the pool's
        "Using KV cache dtype: torch.bfloat16",
        f"KV Cache is allocated. #tokens: {T}, K size: {k:.2f} GB, V size: {k:.2f} GB",
    ]
    new = sg("llama-4-scout", "0.5.8", 20.0, tensor_parallel_size=8, max_model_len=131072)
    full = int(T * 48 / (0.8 * 36 + 12))
    assert (full, int(full * 0.8)) == (1028015, 822412)
    assert new.log_lines[2] == (  # after "Using KV cache dtype"
        # the line as the 0.5.8 wheel's model_runner_kv_cache_mixin.py words it
        "Use sliding window memory pool. full_layer_tokens=1028015, swa_layer_tokens=822412"
    )
    assert new.gpu_kv_cache_tokens == full
    # 0.5.22 on, radix cache off with max_running_requests: a request-capped sliding pool
    with pytest.raises(ValueError, match="'disable_radix_cache' with max_running_requests"):
        sg(
            "llama-4-scout",
            "0.5.22",
            20.0,
            tensor_parallel_size=8,
            disable_radix_cache=True,
            max_running_requests=64,
        )
    p = sg("llama-4-scout", "0.5.21", 20.0, tensor_parallel_size=8, disable_radix_cache=True)
    assert p.gpu_kv_cache_tokens == int(T * 48 / (0.8 * 36 + 12))


def test_refusals():
    with pytest.raises(ValueError, match="from 0.5.2"):
        sg(SMALL, "0.5.1", 1.0)
    with pytest.raises(ValueError, match="'pipeline_parallel_size' > 1 with SGLang's mamba pool"):
        sg("qwen3-next-80b-a3b", "0.5.23", 20.0, tensor_parallel_size=4, pipeline_parallel_size=2)
    with pytest.raises(ValueError, match="must divide linear_num_key_heads=4"):
        sg(
            SMALL.replace(num_key_value_heads=8, num_attention_heads=8),
            "0.5.23",
            1.0,
            tensor_parallel_size=8,
        )
    with pytest.raises(
        ValueError, match="mamba_ssm_dtype\n  Input should be 'float32', 'bfloat16' or 'float16'"
    ):
        sg(SMALL, "0.5.23", 1.0, mamba_ssm_dtype="fp8")
    # 0.5.13 on: no state fits -> SGLang's RuntimeError
    p = sg(SMALL, "0.5.23", 0.0001)
    assert p.refusal.startswith("Not enough GPU memory for hybrid")


def test_cli_prints_the_mamba_pool_line(capsys):
    from calc.cli import main

    argv = ["plan", "qwen3-next-80b-a3b", "--gpu", "h100-sxm", "--gpus", "4", "--engine"]
    rc = main([*argv, "sglang", "--available-kv-gib", "20", "--max-mamba-cache-size", "256"])
    out = capsys.readouterr().out
    assert rc == 0
    # a given size: (256 + 1) x per_req leaves the 20 GiB (0.5.23), the rest // the cell
    per_req, cell = 19316736, 1 * 256 * 12 * 2 * 2
    tokens = (20 * GIB - 257 * per_req) // cell
    ssm = 257 * 36 * 8 * 128 * 128 * 4 / GIB
    assert (
        f"Mamba Cache is allocated. max_mamba_cache_size: 256, conv_state size: 0.11GB, ssm_state size: {ssm:.2f}GB"
        in out
    )
    assert f"KV Cache is allocated. dtype: torch.bfloat16, #tokens: {tokens}," in out
    rc = main([*argv, "vllm", "--disable-radix-cache"])
    assert rc == 2 and "'--disable-radix-cache' is an SGLang setting" in capsys.readouterr().err
