"""DeepSeek-V3.2 (model_type deepseek_v32): the lightning indexer's parameters, cache and FLOPs,
and SGLang's NSA pool, against independent sources written out here.

Sources: the checkpoint's config.json (tests/fixtures/deepseek_v32/, from
https://huggingface.co/deepseek-ai/DeepSeek-V3.2-Exp); transformers 5.x modeling_deepseek_v32.py
(DeepseekV32Indexer: wq_b, wk, k_norm, weights_proj), built here on the meta device; SGLang's
NSATokenToKVPool (python/sglang/srt/mem_cache/memory_pool.py: index_k_with_scale_buffer of
(size + page_size + 1) // page_size pages x page_size x (128 + 128 // 128 x 4) bytes) and
ModelRunner's fp8 latent of kv_lora_rank + kv_lora_rank // 128 x 4 + qk_rope_head_dim x 2
bytes; the start-up lines quoted in sglang PR #11309.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import calc
from calc.attention import attention_flops_decode
from calc.hf import from_hf_config
from calc.params import param_breakdown
from calc.serving.engine import parse_version
from calc.serving.layout import kv_layout, nsa_token_bytes
from calc.serving.plan import engine_plan
from calc.spec import ModelSpec

GIB = 2**30
CONFIG = Path(__file__).parent / "fixtures" / "deepseek_v32" / "DeepSeek-V3.2-Exp.config.json"


@pytest.fixture(scope="module")
def spec() -> ModelSpec:
    return from_hf_config(CONFIG, name="deepseek-v3.2-exp")


def test_indexer_fields_are_read(spec):
    assert (spec.index_n_heads, spec.index_head_dim, spec.index_topk) == (64, 128, 2048)
    assert spec.attention_counts == {"indexed_attention": 61}


def test_indexer_parameters_written_out(spec):
    # wq_b: q_lora_rank -> 64 x 128; wk: hidden -> 128; weights_proj: hidden -> 64; k_norm:
    # LayerNorm(128) weight + bias; 61 layers
    per_layer = 1536 * 64 * 128 + 7168 * 128 + 7168 * 64 + 2 * 128
    assert per_layer == 13_959_424
    assert param_breakdown(spec)["attn/indexer"] == 61 * per_layer


def test_full_size_params_match_transformers_on_meta(spec):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("transformers.models.deepseek_v32")
    data = json.loads(CONFIG.read_text())
    data.pop("quantization_config")  # the bf16 module tree: numel does not depend on it
    data.pop("model_type")
    config = transformers.AutoConfig.for_model("deepseek_v32", **data)
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(config)
    named = dict(model.named_parameters())
    assert calc.param_count(spec) == sum(p.numel() for p in named.values())
    indexer = sum(p.numel() for n, p in named.items() if ".indexer." in n)
    assert param_breakdown(spec)["attn/indexer"] == indexer


def test_transformers_cache_convention_counts_the_indexer_key(spec):
    # DynamicIndexedLayer: the latent (512) and rope key (64) plus the indexer key (128)
    bf16 = calc.kv_cache_layer_bytes(spec, 1, 1, "bf16", convention="transformers")
    assert bf16 == [(512 + 64 + 128) * 2] * 61


def test_decode_flops_written_out(spec):
    # MLA over min(context, 2048) keys (naive per-head products, 128 heads of 192 / 128) plus
    # the indexer over every key: 2 x 64 x (128 + 1)
    ctx = 10_000
    mla = 2 * 128 * (128 + 64) + 2 * 128 * 128
    want = 61 * (mla * 2048 + 2 * 64 * (128 + 1) * ctx)
    assert attention_flops_decode(spec, ctx) == want


def test_nsa_bytes_from_sglang_source(spec):
    assert nsa_token_bytes(spec, "fp8_e4m3") == (512 + 512 // 128 * 4 + 64 * 2, 128 + 4)
    assert nsa_token_bytes(spec, "bf16") == ((512 + 64) * 2, 132)


@pytest.mark.parametrize(
    "version, tokens, printed, whole",
    [
        # main before #11309: "KV size: 54.52 GB", "including index is actually 65.49 GB"
        ("0.5.3", 1_462_784, 54.52, 65.49),
        # with #11309: "KV size: 43.67 GB" includes the indexer keys
        ("0.5.3.post1", 975_424, 43.67, 43.67),  # first release with #11309 (a4b424c)
    ],
)
def test_nsa_pool_matches_the_pr_logs(spec, version, tokens, printed, whole):
    v = parse_version(version)
    lay = kv_layout(spec, 8, 1, "fp8_e4m3", "sglang", v)
    latent = (tokens + 64) * 656 * 61
    index = (tokens + 64 + 1) // 64 * 64 * 132 * 61
    assert lay.sglang_pool_bytes(tokens, 64) == latent + index
    assert round(lay.sglang_pool_bytes(tokens, 64, logged=True) / GIB, 2) == printed
    assert round((latent + index) / GIB, 2) == whole
    # profile_max_num_token's cell: the indexer key counted from #11309 on
    assert lay.cell_bytes() == (656 + (132 if v >= (0, 5, 3, 1) else 0)) * 61


def test_sglang_plan_given_memory(spec):
    p = engine_plan(
        spec, "h100-sxm", "sglang", version="0.5.3.post1", mem_fraction_static=0.8, page_size=64,
        kv_cache_dtype="fp8_e4m3", tensor_parallel_size=8, available_kv_gib=40,
    )  # fmt: skip
    assert p.gpu_kv_cache_tokens == 40 * GIB // ((656 + 132) * 61) // 64 * 64


def test_nsa_refusals(spec):
    # SGLang sets page_size 64 itself (tests/test_serving_dsa_sglang.py); the layout still
    # refuses another page for the NSA pool
    lay = kv_layout(spec, 8, 1, "fp8_e4m3", "sglang", (0, 5, 3, 1))
    with pytest.raises(ValueError, match="'page_size' must be 64 for SGLang's NSA pool"):
        lay.check_page(1)
    with pytest.raises(ValueError, match="DeepseekV32ForCausalLM'\\] are not supported"):
        kv_layout(spec, 8, 1, "fp8_e4m3", "vllm", (0, 10, 2))  # vLLM before 0.11.0


@pytest.mark.parametrize(
    "change, message",
    [
        ({"index_topk": None}, "'index_topk' must be set: 61 layers are indexed_attention"),
        ({"q_lora_rank": None}, "'q_lora_rank' must be set: indexed_attention is MLA"),
        ({"index_head_dim": 32}, "'index_head_dim' must be >= qk_rope_head_dim=64"),
        (
            {"layer_types": [["full_attention", 61]]},
            "'index_n_heads' is an indexer size and needs indexed_attention layers",
        ),
    ],
)
def test_inconsistent_indexer_fields_are_refused(spec, change, message):
    with pytest.raises(ValueError, match=message):
        spec.replace(**change)
