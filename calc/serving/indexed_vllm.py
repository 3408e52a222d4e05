"""vLLM >= 0.18.0: the attention backend picks DeepSeek-V3.2's / GLM-5's cache format and block.

Read in the PyPI sdists 0.18.0, 0.19.0, 0.20.0, 0.21.0, 0.22.0, 0.22.1, 0.23.0, 0.24.0, 0.25.0,
0.26.0, 0.27.0, 0.28.0, 0.29.0, 0.30.0, 0.31.0, 0.32.0 and 0.33.0 (each boundary below in the
releases on either side of it):
- the backend (platforms/cuda.py _get_backend_priorities, the first valid one for use_sparse):
  sm90: FLASHMLA_SPARSE (0.18 on), FLASH_ATTN_MLA_SPARSE before it (0.25 on, bf16 caches only:
  flashattn_mla_sparse.py supports_combination), FLASHINFER_MLA_SPARSE_SM90 after them (0.30 on,
  head 576; flashinfer_mla_sparse_sm90.py: auto, bfloat16, fp8, fp8_e4m3). sm100: FLASHINFER_MLA
  _SPARSE first when the cache is fp8 (0.19 on: "Prefer FlashInfer for fp8 kv cache") or when
  the heads per rank (num_heads // tp, MLAAttention's num_heads) are <= 16, else FLASHMLA_SPARSE
  first; 0.33 puts FLASH_ATTN_MLA_SPARSE_FA4 (bf16 only) ahead at <= 16 heads, same bytes.
- validity: FlashMLASparseBackend.supported_kv_cache_dtypes auto, bfloat16, fp8_ds_mla, fp8
  (not fp8_e4m3 / fp8_e5m2), capability 9 or 10; FlashInferMLASparseBackend auto, float16,
  bfloat16, fp8, fp8_e4m3, capability 10, supports_combination: qk_nope_head_dim == 128 (0.18),
  in [128, 192] (0.19 on). No sparse backend takes fp8_e5m2.
- the format: FLASHMLA_SPARSE turns any fp8 cache into "fp8_ds_mla" (mla_attention.py
  MLAAttention.__init__; 0.25 on _canonicalize_sparse_mla_kv_cache_dtype), 656 B a token
  (MLAAttentionSpec page_size_bytes; 0.30 on state_content_bytes {"fp8_ds_mla": 656}); the
  FlashInfer backends keep standard fp8, 576 x 1 B ("Using standard fp8 KV cache format"); bf16
  caches 576 x 2 B. "bfloat16" becomes "auto" for DeepseekV32ForCausalLM (models/config.py).
  GLM-5: GlmMoeDsaForCausalLM.verify_and_update_config turns "auto" into "fp8_e4m3" on sm100
  from 0.32.0 ("Using fp8 kv-cache for GlmMoeDsaForCausalLM on SM10x"; 0.29 - 0.31 only set DCP
  defaults).
- the indexer keys: DeepseekV32IndexerCache, MLAAttentionSpec(head_size = index_head_dim +
  index_head_dim // 128 x 4, uint8) in every release (deepseek_v2.py; 0.30 on with
  cache_role INDEXER, models/deepseek_v32/attention.py); the Indexer is built before the MLA
  layer, so its cache is the first attention layer.
- the block (platforms/interface.py update_block_size_for_backend, vLLM's default 16 not asked
  for): the first layer's backend's preferred size, DeepseekV32IndexerBackend's kernel block 64
  on CUDA (indexer.py), up to 0.30; from 0.31 the smallest size every backend supports, 64 again
  (indexer [64]; FlashMLA sparse 64; FlashInfer sparse 32, 64). A --block-size given is kept
  (CacheConfig.user_specified_block_size) and must be a multiple of 64 (supports_block_size).
- grouping: both specs are MLAAttentionSpec of one block size: one UniformTypeKVCacheSpecs group
  (kv_cache_utils.get_kv_cache_groups; 0.33 kv_cache_planning.py), as before 0.18.
"""

from __future__ import annotations

from calc.serving.hardware import cuda_capability
from calc.spec import ModelSpec

VLLM_BACKEND_PICKS_FROM = (0, 18, 0)
FP8_FIRST_ON_SM100_FROM = (0, 19, 0)  # cuda.py: FlashInfer sparse first for an fp8 cache
FLASHINFER_NOPE_192_FROM = (0, 19, 0)  # qk_nope_head_dim in [128, 192] (0.18: == 128)
SM90_FLASH_ATTN_FROM = (0, 25, 0)  # FLASH_ATTN_MLA_SPARSE ahead of FLASHMLA_SPARSE (bf16)
SM90_FLASHINFER_FROM = (0, 30, 0)  # FLASHINFER_MLA_SPARSE_SM90 (fp8_e4m3 on Hopper)
GLM_SM100_FP8_FROM = (0, 32, 0)  # GlmMoeDsaForCausalLM: "auto" -> "fp8_e4m3" on sm100
FLASHINFER_MAX_HEADS = 16  # cuda.py: "Prefer FlashInfer at low head counts"
VLLM_DEFAULT_BLOCK = 16  # CacheConfig.DEFAULT_BLOCK_SIZE: read as "no --block-size"
INDEXER_KERNEL_BLOCK = 64  # DeepseekV32IndexerBackend.get_supported_kernel_block_sizes (CUDA)


def _is_glm(spec: ModelSpec) -> bool:
    return spec.family in ("glm", "glm_moe_dsa")  # GlmMoeDsaForCausalLM


def vllm_dsa_backend(spec: ModelSpec, version, gpu: str, kv_cache_dtype: str, tp: int):
    """(backend, latent format) vLLM >= 0.18 serves an indexed model with: format "fp8_ds_mla"
    (656 B a token), "fp8" (576 B) or "bf16" (576 x 2 B); `kv_cache_dtype` in kvcalc's
    spelling (auto, bf16, fp8, fp8_e4m3, fp8_e5m2), `tp` the tensor-parallel size."""
    v = tuple(version[:3])
    cc = cuda_capability(gpu)
    if cc is None or cc[0] not in (9, 10):
        raise ValueError(
            f"'gpu' must be an sm90 or sm100 preset for vLLM's sparse MLA backends "
            f"(DeepSeek-V3.2 / GLM-5; FlashMLASparse supports_compute_capability 9, 10): got "
            f"{gpu!r} ({'unknown capability' if cc is None else f'sm{cc[0]}{cc[1]}'})"
        )
    sm100 = cc[0] == 10
    kv = kv_cache_dtype
    if kv == "auto" and sm100 and _is_glm(spec) and v >= GLM_SM100_FP8_FROM:
        kv = "fp8_e4m3"
    quantized = kv.startswith("fp8")
    nope = spec.qk_nope_head_dim
    nope_ok = nope in ((128, 192) if v >= FLASHINFER_NOPE_192_FROM else (128,))
    flashinfer = sm100 and nope_ok and kv != "fp8_e5m2"
    flashmla = kv in ("auto", "bf16", "fp8")
    heads = spec.num_attention_heads // tp  # MLAAttention num_heads: num_local_heads
    if sm100:
        fp8_first = quantized and v >= FP8_FIRST_ON_SM100_FROM
        order = ["flashinfer", "flashmla"] if fp8_first or heads <= FLASHINFER_MAX_HEADS else []
        order = order or ["flashmla", "flashinfer"]
    else:
        order = ["flashmla"] + (["flashinfer"] if v >= SM90_FLASHINFER_FROM else [])
        # FlashInferMLASparseSM90Backend.supports_combination: kv_lora_rank 512, rope 0 or 64
        shape = spec.kv_lora_rank == 512 and spec.qk_rope_head_dim in (0, 64)
        flashinfer = kv != "fp8_e5m2" and v >= SM90_FLASHINFER_FROM and shape
    valid = {"flashinfer": flashinfer, "flashmla": flashmla}
    pick = next((b for b in order if valid[b]), None)
    if pick is None:
        raise ValueError(
            f"'kv_cache_dtype' {kv_cache_dtype!r} has no valid vLLM {'.'.join(map(str, v))} "
            f"sparse MLA backend on sm{cc[0]}{cc[1]} (qk_nope_head_dim {nope}): FLASHMLA_SPARSE "
            "takes auto, bfloat16, fp8; FLASHINFER_MLA_SPARSE fp8, fp8_e4m3 (sm100, "
            "qk_nope_head_dim 128 / 192; sm90 from 0.30) (No valid attention backend found)"
        )
    if not quantized:  # FLASH_ATTN_MLA_SPARSE(_FA4) too keep 576 x 2 B
        if not sm100 and v >= SM90_FLASH_ATTN_FROM:
            return "FLASH_ATTN_MLA_SPARSE", "bf16"
        return ("FLASHMLA_SPARSE" if pick == "flashmla" else "FLASHINFER_MLA_SPARSE"), "bf16"
    if pick == "flashmla":
        return "FLASHMLA_SPARSE", "fp8_ds_mla"
    return "FLASHINFER_MLA_SPARSE" + ("" if sm100 else "_SM90"), "fp8"


def vllm_dsa_block(block_size: int) -> int:
    """The block vLLM >= 0.18 uses: 64 for its default (16: no --block-size), else the one
    given, which must be a multiple of the indexer's kernel block (64)."""
    if block_size == VLLM_DEFAULT_BLOCK:
        return INDEXER_KERNEL_BLOCK
    if block_size % INDEXER_KERNEL_BLOCK:
        raise ValueError(
            f"'block_size' must be a multiple of {INDEXER_KERNEL_BLOCK} for vLLM's DeepSeek-V3.2 "
            "indexer cache (DeepseekV32IndexerBackend kernel block; 16, vLLM's default, is read "
            f"as not given and becomes 64): got {block_size}"
        )
    return block_size
