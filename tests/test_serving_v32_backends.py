"""DeepSeek-V3.2 and GLM-5 under vLLM 0.18.0 - 0.33.0: the sparse MLA backend the release picks
sets the latent's format, against vLLM's released source written out here.

Sources (PyPI sdists of vllm 0.18.0 ... 0.33.0, unpacked):
- vllm/platforms/cuda.py _get_backend_priorities (use_mla): sm90 [..., FLASHMLA_SPARSE] (0.18),
  [..., FLASH_ATTN_MLA_SPARSE, FLASHMLA_SPARSE] (0.25), + FLASHINFER_MLA_SPARSE_SM90 last for
  head 576 (0.30); sm100 [..., FLASHINFER_MLA_SPARSE, FLASHMLA_SPARSE] when num_heads <= 16
  (0.18) or the cache is fp8 (0.19 on, "Prefer FlashInfer for fp8 kv cache"), else FlashMLA
  first. num_heads is MLAAttention's, num_attention_heads // tp.
- flashmla_sparse.py FlashMLASparseBackend: kv dtypes auto, bfloat16, fp8_ds_mla, fp8; page
  656 B a token for fp8_ds_mla ("FP8 with scale" format: 512 fp8 + 4 fp32 scales + 64 bf16).
  flashinfer_mla_sparse.py: kv dtypes auto, float16, bfloat16, fp8, fp8_e4m3, sm100 only,
  qk_nope_head_dim == 128 (0.18), in [128, 192] (0.19 on); standard fp8 keeps 576 x 1 B.
  flashinfer_mla_sparse_sm90.py (0.30 on): auto, bfloat16, fp8, fp8_e4m3, sm90.
- model_executor/layers/attention/mla_attention.py: FLASHMLA_SPARSE turns fp8 into fp8_ds_mla.
- model_executor/models/config.py GlmMoeDsaForCausalLM (0.32.0 on): "auto" -> "fp8_e4m3" on
  sm100.
- indexer keys: DeepseekV32IndexerCache, 128 + 128 // 128 x 4 = 132 B a token (uint8).
- block: platforms/interface.py update_block_size_for_backend: the default 16 becomes the
  preferred size of DeepseekV32IndexerBackend (kernel block 64), the first layer (0.18 - 0.30),
  or the smallest size every backend takes (0.31 on): 64. A given --block-size is kept.
Corroboration, not a full log: LMCache issue #3339 (GLM-5-FP8 on vLLM 0.21.0) prints "GPU KV Cache
Dimensions: [158][4372, 64, 132]": indexer-key layers of 64-token blocks of 132 B (no available
memory or "GPU KV cache size" line is quoted, so it checks no count).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from calc.hf import from_hf_config
from calc.presets import load_preset
from calc.serving.indexed_vllm import vllm_dsa_backend
from calc.serving.plan import engine_plan

GIB = 2**30
CONFIG = Path(__file__).parent / "fixtures" / "deepseek_v32" / "DeepSeek-V3.2-Exp.config.json"
INDEX = 128 + 128 // 128 * 4  # 132
DS_MLA = 512 + 4 * 4 + 64 * 2  # 656
FP8 = 576  # standard fp8: kv_lora_rank + qk_rope_head_dim bytes
BF16 = 576 * 2


@pytest.fixture(scope="module")
def v32():
    return from_hf_config(CONFIG, name="deepseek-v3.2-exp")


@pytest.fixture(scope="module")
def glm5():
    return load_preset("glm-5")  # qk_nope_head_dim 192, 64 heads, 78 layers


def plan(spec, version, gpu, kv, tp=8, **kw):
    return engine_plan(
        spec, gpu, "vllm", version=version, kv_cache_dtype=kv, tensor_parallel_size=tp,
        max_model_len=32768, available_kv_gib=40, **kw,
    )  # fmt: skip


@pytest.mark.parametrize(
    "version, gpu, kv, tp, latent",
    [
        ("0.18.0", "h200", "fp8", 8, DS_MLA),  # sm90: FlashMLA sparse, fp8 -> fp8_ds_mla
        ("0.33.0", "h200", "fp8", 8, DS_MLA),  # FLASH_ATTN_MLA_SPARSE refuses fp8
        ("0.33.0", "h200", "auto", 8, BF16),
        ("0.30.0", "h200", "fp8_e4m3", 8, FP8),  # FlashMLA lacks fp8_e4m3: FlashInfer SM90
        ("0.18.0", "b200", "fp8", 8, FP8),  # 128 / 8 = 16 heads <= 16: FlashInfer, nope 128
        ("0.18.0", "b200", "fp8", 4, DS_MLA),  # 32 heads: FlashMLA first
        ("0.19.0", "b200", "fp8", 4, FP8),  # fp8: FlashInfer first whatever the heads
        ("0.33.0", "b200", "auto", 4, BF16),
    ],
)
def test_v32_latent_by_backend(v32, version, gpu, kv, tp, latent):
    p = plan(v32, version, gpu, kv, tp)
    assert p.page_bytes == 64 * (latent + INDEX)
    blocks = int(40 * GIB) // (61 * 64 * (latent + INDEX))
    assert (p.num_gpu_blocks, p.gpu_kv_cache_tokens) == (blocks, blocks * 64)


@pytest.mark.parametrize(
    "version, gpu, kv, latent",
    [
        ("0.18.0", "b200", "fp8", DS_MLA),  # qk_nope_head_dim 192: FlashInfer invalid in 0.18
        ("0.19.0", "b200", "fp8", FP8),  # [128, 192] from 0.19
        ("0.31.0", "b200", "auto", BF16),
        ("0.32.0", "b200", "auto", FP8),  # GlmMoeDsaForCausalLM: auto -> fp8_e4m3 on sm100
        ("0.32.0", "h200", "auto", BF16),  # ... on sm100 only
    ],
)
def test_glm5_latent_by_backend(glm5, version, gpu, kv, latent):
    assert plan(glm5, version, gpu, kv).page_bytes == 64 * (latent + INDEX)


def test_written_out(v32):
    # 0.33.0, H200, fp8: 40 GiB // (61 x 64 x (656 + 132) = 3,076,352 B) = 13,961 blocks
    p = plan(v32, "0.33.0", "h200", "fp8")
    assert (p.num_gpu_blocks, p.gpu_kv_cache_tokens) == (13_961, 893_504)
    # 0.28.0 on print both figures on one line (kv_cache_utils.update_kv_cache_capacity)
    assert p.log_lines[-1].startswith("GPU KV cache size: 893,504 tokens, Maximum concurrency")
    # B200 at TP 8 on 0.19+: FlashInfer's standard fp8, 61 x 64 x (576 + 132) = 2,764,032 B
    p = plan(v32, "0.19.0", "b200", "fp8")
    assert (p.num_gpu_blocks, p.gpu_kv_cache_tokens) == (15_538, 994_432)


def test_block_size(v32):
    p = plan(v32, "0.33.0", "h200", "fp8", block_size=128)  # kept (user_specified_block_size)
    assert p.page_bytes == 128 * (DS_MLA + INDEX)
    assert p.gpu_kv_cache_tokens == int(40 * GIB) // (61 * 128 * (DS_MLA + INDEX)) * 128
    assert not any(line.startswith("Forcing") for line in p.log_lines)  # 0.17's message
    with pytest.raises(ValueError, match="'block_size' must be a multiple of 64 .* got 32"):
        plan(v32, "0.33.0", "b200", "fp8", block_size=32)


@pytest.mark.parametrize(
    "version, gpu, kv, message",
    [
        ("0.29.0", "h200", "fp8_e4m3", "has no valid vLLM 0.29.0 sparse MLA backend on sm90"),
        ("0.33.0", "b200", "fp8_e5m2", "has no valid vLLM 0.33.0 sparse MLA backend on sm100"),
        ("0.33.0", "a100-80gb", "auto", r"'gpu' must be an sm90 or sm100 preset .*\(sm80\)"),
    ],
)
def test_refusals(v32, version, gpu, kv, message):
    with pytest.raises(ValueError, match=message):
        plan(v32, version, gpu, kv)


def test_glm5_registered_from_0_16(glm5):
    # registry.py: "GlmMoeDsaForCausalLM": ("deepseek_v2", ...) in the 0.16.0 sdist, not 0.14.1
    with pytest.raises(ValueError, match=r"\['GlmMoeDsaForCausalLM'\] are not supported"):
        plan(glm5, "0.14.1", "h200", "auto")
    assert plan(glm5, "0.16.0", "h200", "auto").page_bytes == 64 * (BF16 + INDEX)


def test_backend_names(v32, glm5):
    assert vllm_dsa_backend(v32, (0, 25, 0), "h200", "auto", 8)[0] == "FLASH_ATTN_MLA_SPARSE"
    assert vllm_dsa_backend(v32, (0, 24, 0), "h200", "auto", 8)[0] == "FLASHMLA_SPARSE"
    assert vllm_dsa_backend(glm5, (0, 33, 0), "b200", "fp8", 8) == ("FLASHINFER_MLA_SPARSE", "fp8")
    assert vllm_dsa_backend(v32, (0, 30, 0), "h100-sxm", "fp8_e4m3", 8) == (
        "FLASHINFER_MLA_SPARSE_SM90",
        "fp8",
    )
