"""vLLM's --kv-cache-dtype nvfp4 (calc.serving.vllm_nvfp4), the expected values written out from the
vLLM sdists:

- the page: block_size x KV heads x 2 x (D // 2 + D // 16) uint8 (nvfp4_kv_cache_full_dim,
  utils/torch_utils.py; AttentionSpec.real_page_size_bytes 0.21 - 0.27, FlashInferBackend.
  customize_spec 0.28+): Llama-3.1-8B (8 KV heads of 128): 72 B a head for K, 72 for V;
- FlashInfer runs it on the SM100 family from 0.21 (0.25 - 0.31: only there, else "No valid
  attention backend found"; 0.23 - 0.24: "--kv-cache-dtype nvfp4 requires sm100f, ..." off it),
  and from 0.32 on majors 8 / 9 / 12 through its FA2 path (flashinfer.py supports_kv_cache_dtype,
  _nvfp4_kv_on_fa2, supports_combination);
- config/cache.py's INFO line "Using nvfp4 data type to store kv cache. ...".
"""

from __future__ import annotations

import pytest

from calc.cli.main import main
from calc.presets import resolve_model
from calc.serving.plan import engine_plan

GIB = 2**30
HEAD = 128 // 2 + 128 // 16  # 72 B: 64 of fp4 values, 8 of fp8 scales
assert HEAD == 72


def plan(gpu="b200", version="0.34.0", model="llama-3.1-8b", **kw):
    kw.setdefault("available_kv_gib", 20)
    return engine_plan(
        model, gpu, "vllm", version=version, kv_cache_dtype="nvfp4", max_model_len=8192, **kw
    )


@pytest.mark.parametrize("gpu, version", [("b200", "0.25.0"), ("h100-sxm", "0.32.0")])
def test_the_page_is_fp4_values_and_fp8_scales(gpu, version):
    p = plan(gpu, version, block_size=16)
    page = 16 * 8 * 2 * HEAD  # a block of one layer: 18,432 B (bf16: 65,536 B)
    assert p.page_bytes == page == 18432
    blocks = 20 * GIB // (32 * page)
    assert (p.num_gpu_blocks, p.gpu_kv_cache_tokens) == (blocks, blocks * 16)
    assert p.kv_cache_dtype == "nvfp4"
    assert p.log_lines[0] == (
        "Using nvfp4 data type to store kv cache. It reduces the GPU memory footprint and "
        "boosts the performance. Meanwhile, it may cause accuracy drop without a proper "
        "scaling factor"
    )


@pytest.mark.parametrize(
    "gpu, version, message",
    [("b200", "0.20.0", "no attention backend that runs it"),
     ("h100-sxm", "0.22.0", "off the SM100 family is not modelled"),
     ("h100-sxm", "0.24.0", "--kv-cache-dtype nvfp4 requires sm100f, please try a different"),
     ("h100-sxm", "0.31.0", "No valid attention backend found"),
     ("rtx-5090", "0.31.0", "No valid attention backend found"),
     ("t4", "0.34.0", "No valid attention backend found"),
     ("mi300x", "0.34.0", "No valid attention backend found")],
)  # fmt: skip
def test_where_no_backend_runs_it(gpu, version, message):
    kw = {"gpu_memory_utilization": 0.9} if gpu == "mi300x" else {}
    with pytest.raises(ValueError, match=message):
        plan(gpu, version, **kw)


def test_the_fa2_path_and_the_models_it_refuses():
    assert plan("rtx-5090", "0.32.0").gpu_kv_cache_tokens > 0  # SM120 from 0.32
    assert plan("a100-80gb", "0.32.0").gpu_kv_cache_tokens > 0  # SM80
    with pytest.raises(ValueError, match="The DCP prefill wrapper cannot read NVFP4"):
        plan("h100-sxm", "0.34.0", tensor_parallel_size=2, decode_context_parallel_size=2)
    # gpt-oss: head_size 64, checked before its sinks (supports_combination's order)
    with pytest.raises(ValueError, match="fa2 prefill misreads an NVFP4 KV cache at head_size 64"):
        plan("h100-sxm", "0.34.0", model="gpt-oss-20b")
    sinks = resolve_model("llama-3.1-8b").replace(attention_sinks=True)
    with pytest.raises(ValueError, match="the sink prefill wrapper cannot read an NVFP4"):
        plan("h100-sxm", "0.34.0", model=sinks)
    with pytest.raises(ValueError, match="nvfp4 KV cache is not supported with MLA"):
        plan("b200", "0.34.0", model="deepseek-v3", tensor_parallel_size=8)


@pytest.mark.parametrize(
    ("version", "block", "padded"),
    [("0.32.0", 2784, None), ("0.34.0", 2816, "1.15%")],
)
def test_a_gated_deltanet_hybrid_raises_the_block_for_the_packed_page(version, block, padded):
    """platforms/interface.py's hybrid alignment takes the attention page of one token from
    FlashInferBackend.customize_spec (0.28 on; real_page_size_bytes' nvfp4 branch 0.21 - 0.27):
    the packed 2 x 4 KV heads x (256 // 2 + 256 // 16) = 1,152 B a layer for Qwen3.5-27B, not
    256 B a head. Its Gated DeltaNet state: conv (3, 128 x 16 x 2 + 128 x 48) bf16 = 61,440 B and
    the fp32 (48, 128, 128) state 3,145,728 B, 3,207,168 B = 2,784 x 1,152 exactly. 0.32.0 (block
    16): 16 x cdiv(3,207,168, 16 x 1,152) = 2,784 tokens, no padding; 0.34.0 (block 64):
    64 x cdiv(3,207,168, 64 x 1,152) = 2,816, the state page padded to 2,816 x 1,152 = 3,244,032 B
    (+1.15 %). The 48 linear layers make 3 groups of 16 beside the 16 attention layers, so a block
    is 16 pages: 10 GiB // (16 x page) blocks."""
    p = plan("rtx-5090", version, model="qwen3.5-27b", available_kv_gib=10)
    page = block * 1152
    assert any(f"Setting attention block size to {block} tokens" in x for x in p.log_lines)
    assert any(f"Padding mamba page size by {padded}" in x for x in p.log_lines) == bool(padded)
    assert p.num_gpu_blocks == 10 * 2**30 // (16 * page)


def test_sglang_and_old_vllm_refuse_the_name():
    with pytest.raises(ValueError, match="its --kv-cache-dtype choices"):  # SGLang's from 0.5.16
        engine_plan("llama-3.1-8b", "b200", "sglang", version="0.5.14", kv_cache_dtype="nvfp4")
    with pytest.raises(ValueError, match="its --kv-cache-dtype choices"):
        engine_plan("llama-3.1-8b", "b200", "vllm", version="0.19.0", kv_cache_dtype="nvfp4")


def test_cli(capsys):
    argv = ["plan", "llama-3.1-8b", "--gpu", "b200", "--engine", "vllm", "--kv", "nvfp4"]
    assert main([*argv, "--available-kv-gib", "20", "--seq", "8192"]) == 0
    assert "Using nvfp4 data type to store kv cache" in capsys.readouterr().out
    assert main([*argv, "--gpu", "h100-sxm", "--engine-version", "0.31.0"]) == 2
    assert "No valid attention backend found" in capsys.readouterr().err
