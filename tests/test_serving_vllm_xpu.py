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
KV = dict(kv_cache_memory_bytes="500M", enforce_eager=True)


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
    p = plan(gpu="h100-sxm", max_model_len=5120)
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
                    kv_cache_memory_bytes="750M")  # fmt: skip
    # 786,432,000 // (16 x 36 x 2 x 128 x 2 x 2 B) = 1,333 blocks of 16 tokens
    assert p.num_gpu_blocks == 1333 and p.gpu_kv_cache_tokens == 21328


def test_a_derived_plan_on_intel_is_refused():
    with pytest.raises(ValueError, match="XPU worker's memory profile is not modelled"):
        engine_plan("qwen2.5-3b", ARC, "vllm", version="0.21.0")
    # 32,768 tokens of 36,864 B are 1.125 GiB: 2 GiB hold one
    assert engine_plan("qwen2.5-3b", ARC, "vllm", version="0.21.0", available_kv_gib=2.0).fits


def test_0_34_on_intel_is_refused():
    with pytest.raises(ValueError, match="on an Intel GPU: the XPU backends' preferred block"):
        plan("0.34.0")
