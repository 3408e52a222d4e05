"""vLLM's decode context parallelism (calc.serving.vllm_dcp), the expected values written out from
vLLM's source (PyPI sdists 0.10.2 - 0.33.0):
- FullAttentionSpec.max_memory_usage_bytes (MLAAttentionSpec inherits it): a rank stores
  cdiv(max_model_len, dcp) tokens of a request, so a request needs cdiv(cdiv(L, dcp), block)
  blocks and "Maximum concurrency" is blocks / that;
- kv_cache_utils._report_kv_cache_config: "GPU KV cache size" = blocks // groups x block x dcp
  with "Multiplying the GPU KV cache size by the dcp_world_size N." (0.10.2 - 0.11.x) or "...
  by the cp_world_size N (pcp_world_size 1 * dcp_world_size N)." (0.12 - 0.20); from 0.21
  int(concurrency x L), no multiply line.
The Kimi-K2-Thinking recipe's two start-up logs (8 x H200, 46.80 GiB each) are engine-log
cases (benchmarks/engine_logs/vllm-recipes-kimi-k2-thinking-h200-tp8*.toml).
"""

from __future__ import annotations

import pytest

from calc.plan_core import cdiv
from calc.serving.grid import engine_plan_grid
from calc.serving.plan import engine_plan

GIB = 2**30
# Kimi K2 (MLA): one 512 + 64 latent a token and layer, bf16, 61 layers, on every TP rank alike
MLA_BLOCK = 16 * (512 + 64) * 2 * 61  # bytes of one 16-token block of every layer


def kimi(version, dcp, gpu="a100-80gb", **kw):
    # an A100 (sm80): no FlashMLA, so the configured 16-token block stays in every release
    kw.setdefault("available_kv_gib", 46.80)
    return engine_plan("kimi-k2", gpu, "vllm", version=version, tensor_parallel_size=8,
                       decode_context_parallel_size=dcp, **kw)  # fmt: skip


def test_mla_tokens_and_concurrency_with_dcp():
    blocks = int(46.80 * GIB) // MLA_BLOCK
    L = 131072
    for version, line in [
        ("0.11.0", "Multiplying the GPU KV cache size by the dcp_world_size 8."),
        (
            "0.12.0",
            "Multiplying the GPU KV cache size by the cp_world_size 8 (pcp_world_size 1 "
            "* dcp_world_size 8).",
        ),  # fmt: skip
        (
            "0.20.0",
            "Multiplying the GPU KV cache size by the cp_world_size 8 (pcp_world_size 1 "
            "* dcp_world_size 8).",
        ),  # fmt: skip
    ]:
        p = kimi(version, 8)
        assert p.num_gpu_blocks == blocks, version
        assert p.gpu_kv_cache_tokens == blocks * 16 * 8
        assert p.max_concurrency == pytest.approx(blocks / cdiv(cdiv(L, 8), 16))
        i = p.log_lines.index(f"GPU KV cache size: {blocks * 16 * 8:,} tokens")
        assert p.log_lines[i - 1] == line
    one = kimi("0.11.0", 1)
    assert one.gpu_kv_cache_tokens == blocks * 16
    assert one.max_concurrency == pytest.approx(blocks / (L // 16))
    assert not any(x.startswith("Multiplying") for x in one.log_lines)


def test_from_0_21_the_token_line_is_concurrency_times_length():
    blocks, L = int(46.80 * GIB) // MLA_BLOCK, 131072
    p = kimi("0.21.0", 8)
    conc = blocks / cdiv(cdiv(L, 8), 16)
    assert p.gpu_kv_cache_tokens == int(conc * L)
    assert not any(x.startswith("Multiplying") for x in p.log_lines)


def test_one_request_check_counts_a_rank_share():
    # 0.5 GiB holds 0.5 GiB // 1,124,352 B = 477 blocks: 7,632 tokens a rank; with dcp 8 a
    # request of 131,072 tokens needs cdiv(16,384, 16) = 1,024 blocks: refused, and the longest
    # that fits is 477 x 16 x 8 = 61,056 tokens
    blocks = int(0.5 * GIB) // MLA_BLOCK
    p = kimi("0.18.0", 8, available_kv_gib=0.5)
    assert blocks == 477 and p.refusal is not None
    assert f"({1024 * MLA_BLOCK / GIB:.2f} GiB KV cache is needed" in p.refusal
    assert f"the estimated maximum model length is {477 * 16 * 8}." in p.refusal
    assert kimi("0.18.0", 8, available_kv_gib=0.5, max_model_len=61056).refusal is None


def test_gqa_with_dcp_from_0_12():
    # Llama 3.1 405B at tp 16: 8 KV heads, each on 2 ranks: one head a rank,
    # 126 layers x 16 tokens x 128 x K, V x 2 B a block
    block = 126 * 16 * 128 * 2 * 2
    blocks, L = int(20 * GIB) // block, 8192
    p = engine_plan("llama-3.1-405b", "h100-sxm", "vllm", version="0.18.0",
                    tensor_parallel_size=16, decode_context_parallel_size=2,
                    available_kv_gib=20, max_model_len=L)  # fmt: skip
    assert (p.num_gpu_blocks, p.gpu_kv_cache_tokens) == (blocks, blocks * 16 * 2)
    assert p.max_concurrency == pytest.approx(blocks / cdiv(L // 2, 16))


@pytest.mark.parametrize(
    "model, version, tp, dcp, kw, message",
    [
        ("kimi-k2", "0.10.1", 8, 2, {}, "needs vLLM 0.10.2 or later"),
        ("kimi-k2", "0.18.0", 8, 3, {}, "tp_size=8 must be divisible bydcp_size=3."),
        ("kimi-k2", "0.14.0", 8, 3, {}, "must divide tensor_parallel_size=8: got 3"),
        ("llama-3.1-405b", "0.11.0", 16, 2, {}, "needs MLA before vLLM 0.12.0"),
        (
            "llama-3.1-70b",
            "0.18.0",
            8,
            2,
            {},
            "tensor parallel size 8 must be greater than total num kv heads 8",
        ),  # fmt: skip
        (
            "llama-3.1-405b",
            "0.18.0",
            16,
            4,
            {},
            "(tensor parallel size 16 // total num kv heads 8) = 2, but got 4",
        ),  # fmt: skip
        ("kimi-k2", "0.24.0", 8, 8, {"kv_cache_dtype": "fp8"}, "DCP not support fp8 kvcache now."),
        ("gpt-oss-120b", "0.25.0", 8, 2, {}, "DCP not support hybrid attn now."),
        ("gpt-oss-120b", "0.26.0", 8, 2, {}, "modelled for full-attention and MLA caches only"),
        ("mistral-7b-v0.1", "0.18.0", 8, 2, {}, "DCP not support sliding window."),
    ],
)
def test_refusals_in_the_engine_words(model, version, tp, dcp, kw, message):
    with pytest.raises(ValueError) as e:
        engine_plan(model, "h100-sxm", "vllm", version=version, tensor_parallel_size=tp,
                    decode_context_parallel_size=dcp, available_kv_gib=20, **kw)  # fmt: skip
    assert message in str(e.value)


def test_q_heads_per_kv_head_must_divide():
    # 18 q heads over 2 KV heads (9 a KV head) at tp 6: dcp 3 divides 9, dcp 2 does not
    from calc.presets import load_preset

    spec = load_preset("qwen2.5-7b").replace(
        num_attention_heads=18, num_key_value_heads=2, hidden_size=2304, intermediate_size=6144
    )
    kw = dict(tensor_parallel_size=6, available_kv_gib=20, version="0.18.0")
    with pytest.raises(ValueError, match=r"q per kv attn heads \(9\) must be divisible by dcp"):
        engine_plan(spec, "h100-sxm", "vllm", decode_context_parallel_size=2, **kw)
    p = engine_plan(spec, "h100-sxm", "vllm", decode_context_parallel_size=3, **kw)
    assert p.refusal is None


def test_fp8_mla_cache_with_dcp_from_0_25():
    p = kimi("0.25.0", 8, kv_cache_dtype="fp8")
    blocks = int(46.80 * GIB) // (MLA_BLOCK // 2)
    assert p.num_gpu_blocks == blocks


def test_grid_rows_equal_the_plan_with_dcp():
    rows = engine_plan_grid("kimi-k2", "a100-80gb", "vllm", version="0.18.0",
                            tensor_parallel_size=8, decode_context_parallel_size=8,
                            available_kv_gib=[10.0, 46.8], max_model_len=[4096, 131072])  # fmt: skip
    for row in rows.itertuples():
        p = kimi("0.18.0", 8, available_kv_gib=row.available_kv_cache_gib,
                 max_model_len=row.max_model_len)  # fmt: skip
        assert row.gpu_kv_cache_tokens == p.gpu_kv_cache_tokens
        assert row.max_concurrency == pytest.approx(p.max_concurrency)


def test_cli_flag(capsys):
    from calc.cli import main

    args = ["plan", "kimi-k2", "--gpu", "a100-80gb", "--gpus", "8", "--engine", "vllm",
            "--engine-version", "0.11.0", "--available-kv-gib", "46.8"]  # fmt: skip
    assert main([*args, "-dcp", "8"]) == 0
    out = capsys.readouterr().out
    assert "Multiplying the GPU KV cache size by the dcp_world_size 8." in out
    assert main([*args, "--decode-context-parallel-size", "3"]) == 2
    assert "must divide tensor_parallel_size=8: got 3" in capsys.readouterr().err
    sg = ["plan", "kimi-k2", "--gpu", "h200", "--gpus", "8", "--engine", "sglang", "-dcp", "2"]
    assert main(sg) == 2
    assert "is a vLLM setting" in capsys.readouterr().err
