"""vLLM's KV-cache block for dense MLA models (calc.serving.vllm_mla_block), the expected values
read in vLLM's source release by release (platforms/cuda.py check_and_update_config to 0.17;
platforms/interface.py update_block_size_for_backend and the MLA backends' preferred block
sizes from 0.18), and two published logs:
- vLLM ~0.11.1 on 8 x H200, Kimi-K2-Thinking (vllm-project/recipes, Kimi-K2-Think.md): 46.80 GiB
  gives "GPU KV cache size: 715,072 tokens" = 11,173 x 64 (and, with DCP 8, 8 x 11,174 x 64);
- vLLM 0.19.0 on an H100, DeepSeek-V2-Lite-Chat (llm-d-planner): 94,097 blocks, 1,505,552
  tokens = 94,097 x 16 (FLASH_ATTN_MLA's 16 from 0.18).
"""

from __future__ import annotations

import pytest

from calc.serving.evidence import evaluate, load_cases
from calc.serving.plan import engine_plan
from calc.serving.vllm_mla_block import vllm_mla_block

GIB = 2**30
LATENT = (512 + 64) * 2 * 61  # Kimi K2: one bf16 latent a token and layer, 61 layers
CASES = {c["id"]: c for c in load_cases("benchmarks/engine_logs")}
H, B2, B3, A, SM120 = (9, 0), (10, 0), (10, 3), (8, 0), (12, 0)


@pytest.mark.parametrize(
    "version, cc, kv, given, want",
    [
        ((0, 7, 3), H, "auto", None, (16, None)),  # no MLA rule before 0.8.0
        ((0, 8, 0), H, "auto", None, (64, "FlashMLA")),
        ((0, 8, 0), B2, "auto", None, (16, None)),  # Blackwell unhandled until 0.10.1
        ((0, 10, 1), B2, "auto", None, (128, "CUTLASS_MLA")),
        ((0, 11, 0), B3, "auto", None, (16, None)),  # is_device_capability(100): 10.0 only
        ((0, 11, 0), H, "auto", 128, (64, "FlashMLA")),  # "!= 64": a given 128 overwritten
        ((0, 11, 1), H, "auto", 128, (128, None)),  # "% 64 != 0" from 0.11.1
        ((0, 11, 1), H, "auto", 16, (64, "FlashMLA")),
        ((0, 13, 0), B3, "auto", None, (128, "CUTLASS_MLA")),  # capability family from 0.13
        ((0, 16, 0), B2, "auto", None, (64, "FlashInferMLA")),  # FlashInfer MLA from 0.15
        ((0, 16, 0), B2, "auto", 32, (32, None)),  # "!= 32 and % 64 != 0"
        ((0, 16, 0), A, "auto", None, (16, None)),
        ((0, 16, 0), SM120, "auto", None, (16, None)),
        ((0, 18, 0), H, "auto", None, (16, None)),  # FLASH_ATTN_MLA prefers 16: no line
        ((0, 18, 0), H, "fp8", None, (64, "FLASHMLA")),  # FLASH_ATTN_MLA takes no fp8 cache
        ((0, 18, 0), B2, "auto", None, (32, "FLASHINFER_MLA")),
        ((0, 18, 0), B2, "auto", 128, (128, None)),  # a given block is kept from 0.18
        ((0, 33, 0), B3, "fp8", None, (32, "FLASHINFER_MLA")),
        ((0, 33, 0), SM120, "auto", None, (16, None)),  # TRITON_MLA
    ],
)
def test_block_by_release_and_gpu(version, cc, kv, given, want):
    block, line = vllm_mla_block(version, cc, kv, given, 128)
    assert block == want[0]
    if want[1] is None:
        assert line is None
    elif version < (0, 18, 0):
        assert line == f"Forcing kv cache block size to {block} for {want[1]} backend."
    else:
        tail = "backend(s)." if version >= (0, 31, 0) else "backend."
        assert line == f"Setting kv cache block size to {block} for {want[1]} {tail}"


def test_other_nope_head_dims_on_blackwell():
    # FlashInfer MLA takes qk_nope_head_dim 128 only in 0.15 - 0.17 (64 or 128 in 0.18, + 192
    # from 0.19); otherwise CUTLASS_MLA's 128
    assert vllm_mla_block((0, 16, 0), B2, "auto", None, 192)[0] == 128
    assert vllm_mla_block((0, 18, 0), B2, "auto", None, 192)[0] == 128
    assert vllm_mla_block((0, 19, 0), B2, "auto", None, 192)[0] == 32


def test_b300_between_0_11_1_and_0_12_has_no_common_kernel_block():
    with pytest.raises(ValueError, match=r"^No common block size for 16\.$"):
        vllm_mla_block((0, 12, 0), B3, "auto", None, 128)
    assert vllm_mla_block((0, 12, 0), B3, "auto", 128, 128) == (128, None)


def test_plans_count_blocks_of_the_forced_size():
    # Kimi K2 at tp 8, 46.80 GiB: H200 on 0.11.0 counts 64-token blocks, an A100 16-token ones
    avail = int(46.80 * GIB)
    h = engine_plan("kimi-k2", "h200", "vllm", version="0.11.0", tensor_parallel_size=8,
                    available_kv_gib=46.80)  # fmt: skip
    assert h.log_lines[0] == "Forcing kv cache block size to 64 for FlashMLA backend."
    assert h.num_gpu_blocks == avail // (64 * LATENT)
    assert h.gpu_kv_cache_tokens == avail // (64 * LATENT) * 64 == 715072
    assert h.max_concurrency == pytest.approx(avail // (64 * LATENT) / (131072 // 64))
    a = engine_plan("kimi-k2", "a100-80gb", "vllm", version="0.11.0", tensor_parallel_size=8,
                    available_kv_gib=46.80)  # fmt: skip
    assert a.gpu_kv_cache_tokens == avail // (16 * LATENT) * 16
    assert not a.log_lines[0].startswith("Forcing")
    # a given --block-size on 0.18: kept
    g = engine_plan("kimi-k2", "b200", "vllm", version="0.18.0", tensor_parallel_size=8,
                    available_kv_gib=46.80, block_size=128)  # fmt: skip
    assert g.gpu_kv_cache_tokens == avail // (128 * LATENT) * 128


@pytest.mark.parametrize(
    "cid", ["vllm-recipes-kimi-k2-thinking-h200-tp8", "vllm-recipes-kimi-k2-thinking-h200-tp8-dcp8"]
)
def test_recipe_logs_count_64_token_blocks(cid):
    (check,) = [c for c in evaluate(CASES[cid]) if c.figure == "GPU KV cache size, tokens"]
    lo, hi = check.kvcalc
    dcp = 8 if cid.endswith("dcp8") else 1
    assert lo % (64 * dcp) == 0 and hi % (64 * dcp) == 0
    assert check.verdict == "in interval"


def test_deepseek_v2_lite_on_0_19_counts_16_token_blocks():
    case = CASES["llmd-019-deepseek-v2-lite-chat-tp1-8192"]
    assert case["logged"]["gpu_kv_cache_tokens"] == 94097 * 16
    checks = {c.figure: c for c in evaluate(case)}
    assert checks["maximum concurrency"].verdict == "exact"
