"""vLLM on Intel GPUs (calc/serving/vllm_xpu.py): XPUPlatform.update_block_size_for_backend
rounds a Gated DeltaNet model's block up to a multiple of 64 (vllm/platforms/xpu.py, 0.20.0 -
0.34.0 sdists; absent in 0.19.0). Arithmetic written out for Qwen3.5-4B (presets/models/
qwen3.5-4b.toml): a full-attention token is 4 KV heads x 256 x 2 (K, V) x 2 B = 4,096 B; a
Gated DeltaNet state is (2 x 16 x 128 + 32 x 128) x 3 x 2 B of conv state + 32 x 128 x 128 x 4 B
of fp32 SSM state = 49,152 + 2,097,152 = 2,146,304 B. The base platform raises the block to
16 x cdiv(2,146,304, 16 x 4,096) = 528; XPU to 576. The logged figures are the public Arc B580
runs of benchmarks/engine_logs/vllm-xpu-b580-qwen3.5-4b-kvmem-*.toml."""

import pytest

from calc.serving.hardware import resolve_hardware
from calc.serving.plan import engine_plan

ARC = resolve_hardware("h100-sxm").model_copy(update={"name": "arc-b580", "vendor": "Intel"})
# the logs' --attention-backend TRITON_ATTN: Triton's 16-token kernel blocks
KV = dict(kv_cache_memory_bytes="500M", enforce_eager=True, attention_backend="TRITON_ATTN")


def plan(version="0.21.0", gpu=ARC, **kw):
    return engine_plan("qwen3.5-4b", gpu, "vllm", version=version, **{**KV, **kw})


@pytest.mark.parametrize(
    "L, blocks, tokens, conc", [(5120, 9 + 3, 11520, 2.25), (1024, 2 + 3, 5529, 5.4)]
)
def test_the_arc_b580_logs(L, blocks, tokens, conc):
    # 524,288,000 // (8 layers a group x 576 x 4,096 B) = 27 blocks; a request takes
    # cdiv(L, 576) full-attention blocks and one of each of the 3 state groups
    p = plan(max_model_len=L)
    assert p.page_bytes == 576 * 4096 and p.num_gpu_blocks == 27
    assert p.max_concurrency == 27 / blocks == conc
    assert p.gpu_kv_cache_tokens == tokens


def test_nvidia_keeps_the_base_block():
    p = plan(gpu="h100-sxm", max_model_len=5120, attention_backend=None)
    assert p.page_bytes == 528 * 4096
    assert p.num_gpu_blocks == 524288000 // (8 * 528 * 4096) == 30


def test_the_lines_say_what_xpu_did():
    lines = plan(max_model_len=5120).log_lines
    # the base platform's two lines keep its 528 (padding: 100 x (528 x 4096 - 2146304) / 2146304)
    assert lines[0].startswith("Setting attention block size to 528 tokens")
    assert f"Padding mamba page size by {100 * (528 * 4096 - 2146304) / 2146304:.2f}%" in lines[1]
    assert lines[2] == (
        "[XPU]Setting attention block size to 576 tokens to ensure multiple of 64, set "
        f"mamba_page_size_padded to {576 * 4096} bytes accordingly, before was {528 * 4096} bytes."
    )
    # 0.32.0 on: two lines
    new = plan("0.32.0", max_model_len=5120).log_lines
    assert "[XPU]Setting attention block size to 576 tokens to ensure multiple of 64." in new
    assert (
        f"[XPU]Scaled mamba_page_size_padded from {528 * 4096} to {576 * 4096} bytes accordingly."
    ) in new


def test_before_0_20_no_rounding():
    # 0.19.x has no GDN rule in platforms/xpu.py
    assert plan("0.19.0", max_model_len=5120).page_bytes == 528 * 4096


def test_a_model_without_gdn_layers_is_not_rounded():
    p = engine_plan("qwen2.5-3b", ARC, "vllm", version="0.21.0", max_model_len=16384,
                    kv_cache_memory_bytes="750M", attention_backend="TRITON_ATTN")  # fmt: skip
    # 786,432,000 // (16 x 36 x 2 x 128 x 2 x 2 B) = 1,333 blocks of 16 tokens
    assert p.num_gpu_blocks == 1333 and p.gpu_kv_cache_tokens == 21328


def test_a_derived_plan_on_intel_is_refused():
    with pytest.raises(ValueError, match="XPU worker's memory profile is not modelled"):
        engine_plan("qwen2.5-3b", ARC, "vllm", version="0.21.0")
    # 32,768 tokens of 36,864 B are 1.125 GiB: 2 GiB hold one
    assert engine_plan("qwen2.5-3b", ARC, "vllm", version="0.21.0", available_kv_gib=2.0).fits


def test_xpu_flash_attention_prefers_64_token_blocks():
    """XPU's default backend, FLASH_ATTN: get_preferred_block_size is max(default, 64) from
    0.20.0 (v1/attention/backends/flash_attn.py), so no --block-size gives 64-token blocks,
    logged "Setting kv cache block size to 64 for FLASH_ATTN backend." ("backend(s)." from
    0.31.0; nothing from 0.34.0, whose default is 64): 786,432,000 // (64 x 36 layers x 2 x
    128 x 2 x 2 B) = 333 blocks for Qwen2.5-3B's 750M."""
    for version, line in (
        ("0.21.0", "Setting kv cache block size to 64 for FLASH_ATTN backend."),
        ("0.31.0", "Setting kv cache block size to 64 for FLASH_ATTN backend(s)."),
        ("0.34.0", None),
    ):
        p = engine_plan("qwen2.5-3b", ARC, "vllm", version=version, max_model_len=16384,
                        kv_cache_memory_bytes="750M")  # fmt: skip
        assert p.num_gpu_blocks == 786_432_000 // (64 * 36 * 2 * 128 * 2 * 2) == 333
        assert (
            (line in p.log_lines) if line else not any("block size to 64" in x for x in p.log_lines)
        )
    old = engine_plan("qwen2.5-3b", ARC, "vllm", version="0.19.0", max_model_len=16384,
                      kv_cache_memory_bytes="750M")  # fmt: skip
    assert old.num_gpu_blocks == 1333  # 0.19.x: the default 16


def test_from_0_32_the_hybrid_alignment_takes_xpu_flash_attentions_64():
    """0.32.0 on: XPU's FlashAttention advertises MultipleOf(64) kernel blocks, so the base
    platform raises Qwen3.5-4B's block to 64 x cdiv(2,146,304, 64 x 4,096) = 576 itself (its
    padding line for 576), and XPU's rounding has nothing left to do: no [XPU] line."""
    for version in ("0.32.0", "0.34.0"):
        p = plan(version, max_model_len=5120, attention_backend=None)
        assert p.page_bytes == 576 * 4096 and p.num_gpu_blocks == 27
        assert any(x.startswith("Setting attention block size to 576 tokens") for x in p.log_lines)
        pad = f"Padding mamba page size by {100 * (576 * 4096 - 2146304) / 2146304:.2f}%"
        assert any(pad in x for x in p.log_lines)
        assert not any(x.startswith("[XPU]") for x in p.log_lines)


def test_backends_kvcalc_does_not_model_on_intel():
    with pytest.raises(ValueError, match="float32 falls back to Triton Attention"):
        engine_plan("qwen2.5-3b", ARC, "vllm", version="0.21.0", weight_dtype="fp32",
                    kv_cache_memory_bytes="750M", max_model_len=4096)  # fmt: skip
    with pytest.raises(ValueError, match="multimodal prefix-LM model"):
        engine_plan("gemma-3-4b", ARC, "vllm", version="0.21.0", kv_cache_memory_bytes="750M",
                    max_model_len=4096)  # fmt: skip


def test_the_gdn_checkpoint_alignment_is_flashinfers_only():
    """0.33.0's _resolve_gdn_prefill_backend picks FlashInfer only on CUDA
    (model_executor/layers/mamba/gdn/qwen_gdn_linear_attn.py), whose checkpoint alignment (64)
    the block then takes: an H100 aligns Qwen3.5-4B's align-mode block to 64, an MI300X (Triton
    or AITER FlyDSL) keeps the 16-token kernel block's raise, 528."""
    kw = dict(kv_cache_memory_bytes="500M", max_model_len=5120, enable_prefix_caching=True)
    h100, mi300x = (
        engine_plan("qwen3.5-4b", g, "vllm", version="0.33.0", **kw) for g in ("h100-sxm", "mi300x")
    )
    assert h100.page_bytes == 576 * 4096 and mi300x.page_bytes == 528 * 4096
