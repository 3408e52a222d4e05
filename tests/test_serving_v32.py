"""DeepSeek-V3.2 under vLLM: its KV-cache groups, blocks, tokens and refusals, and the indexer's
weights per rank, against vLLM's released source written out here.

Sources (PyPI sdists of vllm 0.11.0, 0.11.1, 0.12.0, 0.14.0, 0.16.0 and 0.17.0, unpacked):
- vllm/v1/worker/gpu_model_runner.py get_kv_cache_spec: per decoder layer an MLAAttentionSpec for
  the latent (head_size 512 + 64 = 576, cache_dtype_str = the cache dtype) and, from
  vllm/model_executor/models/deepseek_v2.py DeepseekV32IndexerCache, one for the indexer keys
  (head_size 128 + 128 // 128 * 4 = 132, torch.uint8).
- vllm/v1/kv_cache_interface.py MLAAttentionSpec.page_size_bytes: block_size * 656 for
  "fp8_ds_mla", else block_size * num_kv_heads (1) * head_size * dtype bytes;
  UniformTypeKVCacheSpecs.page_size_bytes: the sum over its layers.
- vllm/v1/core/kv_cache_utils.py: get_kv_cache_groups -> UniformTypeKVCacheSpecs.from_specs (all
  MLAAttentionSpec, one block size): one group of 122 layers; get_kv_cache_config_from_groups:
  num_blocks = available_memory // page_size_bytes, "GPU KV cache size" = num_blocks // 1 * 64;
  get_max_concurrency_for_kv_cache_config: num_blocks / cdiv(L, 64);
  check_enough_kv_cache_memory: needed = sum over layers of cdiv(L, 64) * page.
- vllm/platforms/cuda.py: hasattr(hf_config, "index_topk") -> block_size forced to 64.
- vllm/model_executor/models/config.py DeepseekV32ForCausalLM: fp8* -> "fp8_ds_mla" (0.11.0:
  "auto" too), "bfloat16" -> "auto".
- vllm/model_executor/models/deepseek_v2.py Indexer: wq_b, wk, weights_proj ReplicatedLinear,
  weights_proj with quant_config=None; DeepseekV2Model: topk_indices_buffer of
  max_num_batched_tokens x index_topk int32 on the GPU.
- vllm/model_executor/models/registry.py: DeepseekV32ForCausalLM first in 0.11.0.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from calc.hf import from_hf_config
from calc.quant.sharding import stored_bytes_per_gpu
from calc.serving.grid import engine_plan_grid
from calc.serving.layout import kv_layout
from calc.serving.plan import engine_plan
from calc.serving.quant_weights import plan_weights
from calc.serving.shard_layers import layer_rank_params
from calc.spec import ModelSpec

GIB = 2**30
CONFIG = Path(__file__).parent / "fixtures" / "deepseek_v32" / "DeepSeek-V3.2-Exp.config.json"
L = 61  # num_hidden_layers
FP8_PAGE = 64 * 656 + 64 * 132  # one block of one decoder layer: latent + indexer keys
BF16_PAGE = 64 * 576 * 2 + 64 * 132


def cdiv(a, b):
    return -(-a // b)


@pytest.fixture(scope="module")
def spec() -> ModelSpec:
    return from_hf_config(CONFIG, name="deepseek-v3.2-exp")


def plan(spec, **kw):
    kw.setdefault("tensor_parallel_size", 8)
    kw.setdefault("max_model_len", 32768)
    return engine_plan(spec, "h200", "vllm", **kw)


@pytest.mark.parametrize(
    "version, kv, page",
    [
        ("0.11.0", "auto", FP8_PAGE),  # 0.11.0: "auto" becomes fp8_ds_mla
        ("0.11.0", "bf16", BF16_PAGE),  # "bfloat16" becomes "auto": the model's bf16
        ("0.11.1", "auto", BF16_PAGE),  # from 0.11.1 "auto" stays bf16
        ("0.11.1", "fp8", FP8_PAGE),
        ("0.14.0", "fp8_e5m2", FP8_PAGE),  # any fp8* becomes fp8_ds_mla
        ("0.17.0", "fp8_e4m3", FP8_PAGE),
        ("0.17.0", "auto", BF16_PAGE),
    ],
)
def test_one_group_of_latent_and_indexer_pages(spec, version, kv, page):
    p = plan(spec, version=version, kv_cache_dtype=kv, available_kv_gib=40)
    assert p.kv_groups == 1
    assert p.page_bytes == page
    blocks = int(40 * GIB) // (page * L)  # available // UniformTypeKVCacheSpecs page
    assert p.num_gpu_blocks == blocks
    assert p.gpu_kv_cache_tokens == blocks * 64
    assert p.max_concurrency == blocks / cdiv(32768, 64)


def test_fp8_written_out(spec):
    # 40 GiB // (61 x 64 x (656 + 132) = 3,076,352 B) = 13,961 blocks of 64 tokens
    p = plan(spec, version="0.11.1", kv_cache_dtype="fp8", available_kv_gib=40)
    assert 61 * 64 * (656 + 132) == 3_076_352
    assert (p.num_gpu_blocks, p.gpu_kv_cache_tokens) == (13_961, 893_504)
    assert "GPU KV cache size: 893,504 tokens" in p.log_lines


@pytest.mark.parametrize("block_size", [16, 32, 128])
def test_block_size_forced_to_64(spec, block_size):
    forced = plan(spec, version="0.11.1", kv_cache_dtype="fp8", available_kv_gib=40)
    asked = plan(
        spec, version="0.11.1", kv_cache_dtype="fp8", available_kv_gib=40, block_size=block_size
    )
    assert asked.gpu_kv_cache_tokens == forced.gpu_kv_cache_tokens
    assert asked.page_bytes == FP8_PAGE
    assert asked.log_lines[0] == "Forcing kv cache block size to 64 for FlashMLASparse backend."
    at_64 = plan(spec, version="0.11.1", kv_cache_dtype="fp8", available_kv_gib=40, block_size=64)
    assert not at_64.log_lines[0].startswith("Forcing")


def test_max_model_len_refused_in_vllm_words(spec):
    # one request of 163840 tokens: cdiv(163840, 64) = 2560 blocks x 61 x 64 x 788 B = 7.33 GiB
    p = plan(spec, version="0.11.1", kv_cache_dtype="fp8", available_kv_gib=5,
             max_model_len=163840)  # fmt: skip
    needed = 2560 * 61 * FP8_PAGE
    longest = int(5 * GIB) // (61 * FP8_PAGE) * 64
    assert p.refusal == (
        f"To serve at least one request with the models's max seq len (163840), "
        f"({needed / GIB:.2f} GiB KV cache is needed, which is larger than the available KV "
        f"cache memory (5.00 GiB). Based on the available memory, the estimated maximum model "
        f"length is {longest}. Try increasing `gpu_memory_utilization` or decreasing "
        "`max_model_len` when initializing the engine."
    )
    assert longest == 111_680


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"version": "0.10.2"}, r"Model architectures \['DeepseekV32ForCausalLM'\] are not sup"),
        # from 0.18 no sparse backend lists fp8_e5m2 (test_serving_v32_backends.py)
        ({"version": "0.18.0", "kv_cache_dtype": "fp8_e5m2"}, "has no valid vLLM 0.18.0 sparse"),
        # fp16 is a vLLM choice from 0.18.0 (CacheDType), not a sparse MLA backend's
        (
            {"version": "0.18.0", "kv_cache_dtype": "fp16"},
            "'kv_cache_dtype' must be one of auto, bf16, fp8, fp8_e4m3",
        ),
        ({"kv_cache_dtype": "fp16"}, "must be one of auto, fp8, fp8_e4m3, fp8_e5m2, bf16 for"),
    ],
)
def test_refusals(spec, settings, message):
    settings = {"version": "0.11.1", **settings}
    with pytest.raises(ValueError, match=message):
        plan(spec, available_kv_gib=40, **settings)


def test_pipeline_parallel_refused(spec):
    # up to 0.16 each worker divides its memory by the whole model's UniformTypeKVCacheSpecs
    # page (get_kv_cache_configs keeps the global group's spec), from 0.17 by its own
    with pytest.raises(ValueError, match="vLLM's DeepSeek-V3.2 caches with pipeline parallel"):
        kv_layout(spec, 8, 2, "fp8_e4m3", "vllm", (0, 11, 1))


def test_head_size_other_than_576_refused(spec):
    other = spec.replace(kv_lora_rank=256)
    with pytest.raises(ValueError, match="'kv_lora_rank' \\+ 'qk_rope_head_dim' must be 576"):
        kv_layout(other, 8, 1, "fp8_e4m3", "vllm", (0, 11, 1))


def test_indexer_replicated_per_rank(spec):
    # wq_b 1536 x 8192, wk 7168 x 128, weights_proj 7168 x 64, k_norm 2 x 128: whole on each rank
    whole = 1536 * 64 * 128 + 7168 * 128 + 7168 * 64 + 2 * 128
    for tp in (1, 8):
        params = layer_rank_params(spec, 0, tp)
        assert params["attn/indexer"] + params["attn/indexer:vectors"] == whole


def test_indexer_stored_bytes_per_gpu(spec):
    # the fp8 checkpoint: wq_b and wk fp8 with one scale per 128 x 128 block, weights_proj and
    # k_norm bf16; the same bytes on every GPU at any tp
    fp8 = 1536 * 8192 + 7168 * 128
    scales = (8192 // 128) * (1536 // 128) + (128 // 128) * (7168 // 128)
    bf16 = (7168 * 64 + 2 * 128) * 2
    for tp in (1, 8):
        got = stored_bytes_per_gpu(spec, tp)
        assert got["attn/indexer:packed"] == L * fp8
        assert got["attn/indexer"] == L * bf16
        assert got["attn/indexer:scales"] == L * scales * 1  # ue8m0 scales: 1 byte


def test_topk_indices_buffer_counted_in_model_loading(spec):
    p = plan(spec, version="0.11.1", kv_cache_dtype="fp8", available_kv_gib=40)
    from calc.serving.plan import prepare

    config = prepare(spec, "h200", "vllm", version="0.11.1", tensor_parallel_size=8,
                     max_model_len=32768)[2]  # fmt: skip
    weights, _ = plan_weights(spec, config, "bf16", 8, 1, 1, None, "h200")
    assert config.max_num_batched_tokens == 8192
    assert p.weights_bytes - weights[0] == 8192 * 2048 * 4


def test_grid_rows_equal_plans(spec):
    gib = [20.0, 40.0, 60.5]
    grid = engine_plan_grid(
        spec, "h200", "vllm", version="0.11.1", kv_cache_dtype="fp8", tensor_parallel_size=8,
        max_model_len=32768, available_kv_gib=gib,
    )  # fmt: skip
    for row, x in zip(grid.itertuples(), gib, strict=True):
        p = plan(spec, version="0.11.1", kv_cache_dtype="fp8", available_kv_gib=x)
        assert row.gpu_kv_cache_tokens == p.gpu_kv_cache_tokens
        assert np.isclose(row.max_concurrency, p.max_concurrency)


def test_cli_plan(spec, capsys):
    from calc import cli

    assert cli.main(["plan", str(CONFIG), "--gpu", "h200", "--gpus", "8", "--tp", "8", "--engine", "vllm",
          "--engine-version", "0.11.1", "--kv", "fp8", "--seq", "32768",
          "--available-kv-gib", "40"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "GPU KV cache size: 893,504 tokens" in out
