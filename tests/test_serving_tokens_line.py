"""vLLM's "GPU KV cache size: N tokens" line by release, and align mode's block assertion.

- Up to 0.20.x: num_blocks // groups x block (_report_kv_cache_config, the 0.20.0 sdist's
  vllm/v1/core/kv_cache_utils.py:1694-1698).
- From 0.21.0: int(max_concurrency x max_model_len) for every model ("Sourcing this from the
  concurrency calculation handles hybrid layouts correctly", 0.21.0 :1701-1708; 0.24.0's
  get_kv_cache_capacity), max_concurrency = num_blocks / cdiv(bytes a request, bytes a block).
- Mamba cache align mode asserts block_size <= max_num_batched_tokens from 0.17.0 to 0.26.x
  (config/vllm.py: __post_init__ in 0.17.0, validate_block_size in 0.24.0 - 0.26.0; absent in
  0.16.0 and 0.27.0).
Logs: noonghunna/club-3090 issues 612 and 652 (vLLM 0.24.0, RTX 5090, Qwen3.6-35B-A3B, fp8 KV,
prefix caching on, max_model_len 131,072): "Available KV cache memory: 6.01 GiB", "GPU KV cache
size: 569,878 tokens", "Maximum concurrency ... 4.35x" (benchmarks/engine_logs/vllm-club3090-*).
"""

from __future__ import annotations

import pytest

from calc.serving.plan import engine_plan


def cdiv(a, b):
    return -(-a // b)


QWEN36 = dict(  # the logged run's settings
    max_model_len=131072,
    kv_cache_dtype="fp8",
    enable_prefix_caching=True,
    max_num_batched_tokens=8192,
    max_num_seqs=1,
)


def test_hybrid_token_line_is_concurrency_times_len_from_0_21():
    p = engine_plan("qwen3.5-35b-a3b", "rtx-5090", "vllm", version="0.24.0",
                    available_kv_gib=6.01, **QWEN36)  # fmt: skip
    assert p.gpu_kv_cache_tokens == 569_878  # the log
    assert f"{p.max_concurrency:.2f}" == "4.35"
    # the arithmetic: a 2,146,304-B page (2,096 fp8 attention tokens of 1,024 B), 4 groups of 10
    # layers, 300 blocks; a request 63 attention blocks + 3 state groups x 2 ("align")
    blocks = int(6.01 * 2**30) // (2_146_304 * 10)
    assert blocks == p.num_gpu_blocks == 300
    per_request = cdiv(131072, 2096) + 3 * 2
    assert p.gpu_kv_cache_tokens == int(blocks / per_request * 131072)


def test_token_line_before_0_21_is_blocks_per_group_times_block():
    p = engine_plan("qwen3.5-35b-a3b", "rtx-5090", "vllm", version="0.20.0",
                    available_kv_gib=6.01, **QWEN36)  # fmt: skip
    assert p.num_gpu_blocks == 300
    assert p.gpu_kv_cache_tokens == 300 // 4 * 2096


@pytest.mark.parametrize(("version", "block_tokens"), [("0.20.0", True), ("0.21.0", False)])
def test_dense_model_len_not_a_multiple_of_the_block(version, block_tokens):
    # llama-3-8b, one full-attention group: 16-token pages of 32 layers x 2 x 8 x 128 x 2 B
    L = 8_001  # cdiv(8,001, 16) = 501 blocks a request
    p = engine_plan("llama-3-8b", "h100-sxm", "vllm", version=version, max_model_len=L,
                    available_kv_gib=10.0)  # fmt: skip
    blocks = 10 * 2**30 // (16 * 2 * 8 * 128 * 2 * 32)
    assert p.num_gpu_blocks == blocks
    expected = blocks * 16 if block_tokens else int(blocks / cdiv(L, 16) * L)
    assert p.gpu_kv_cache_tokens == expected
    assert blocks * 16 != int(blocks / cdiv(L, 16) * L)  # the two rules differ here


@pytest.mark.parametrize(
    ("version", "refused"),
    [("0.16.0", False), ("0.17.0", True), ("0.24.0", True), ("0.26.0", True), ("0.27.0", False)],
)
def test_align_mode_block_assertion(version, refused):
    # Qwen3-Next (bf16 state: conv 24,576 + recurrent 524,288 values x 2 B = 1,097,728 B; an
    # attention token 2 x 2 x 256 x 2 B = 2,048 B): the block raised to 16 x cdiv(1,097,728,
    # 16 x 2,048) = 544 tokens > max_num_batched_tokens 512
    kw = dict(max_model_len=8192, enable_prefix_caching=True, max_num_batched_tokens=512,
              available_kv_gib=10.0, version=version)  # fmt: skip
    if refused:
        message = f"at least the attention block size 544 in vLLM {version}"
        with pytest.raises(ValueError, match=message):
            engine_plan("qwen3-next-80b-a3b", "h100-sxm", "vllm", **kw)
    else:
        p = engine_plan("qwen3-next-80b-a3b", "h100-sxm", "vllm", **kw)
        assert p.page_bytes == 544 * 2048  # the raised block, not refused


@pytest.mark.parametrize(("version", "lines"), [("0.27.1", 2), ("0.28.0", 1), ("0.33.0", 1)])
def test_the_token_and_concurrency_lines_join_from_0_28(version, lines):
    # 0.27.1's _report_kv_cache_config logs "GPU KV cache size: %s tokens" and "Maximum
    # concurrency for %s tokens per request: %.2fx" apart; 0.28.0's update_kv_cache_capacity
    # (kv_cache_utils.py:1864-1875) logs "GPU KV cache size: %s tokens, Maximum concurrency for
    # %s tokens per request: %.2fx" (0.30.0 on: "%s KV cache size", "GPU" for CUDA devices)
    p = engine_plan("llama-3.1-8b", "h100-sxm", "vllm", version=version, available_kv_gib=6.51,
                    max_model_len=32768)  # fmt: skip
    size = f"GPU KV cache size: {p.gpu_kv_cache_tokens:,} tokens"
    most = f"Maximum concurrency for 32,768 tokens per request: {p.max_concurrency:.2f}x"
    assert p.log_lines[-lines:] == ([size, most] if lines == 2 else [f"{size}, {most}"])
