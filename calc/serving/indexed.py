"""DeepSeek-V3.2's indexed layers (MLA + lightning indexer) in the engines' KV caches.

SGLang (NSATokenToKVPool, python/sglang/srt/mem_cache/memory_pool.py): see `nsa_token_bytes`.

vLLM, read in the PyPI sdists 0.11.0 - 0.17.0 (each file named below is the same in 0.11.0,
0.11.1, 0.11.2, 0.12.0, 0.13.0, 0.14.0, 0.16.0 and 0.17.0 where it matters here):
- the architecture: registry.py maps DeepseekV32ForCausalLM to deepseek_v2's model from 0.11.0
  (absent in 0.10.2, which refuses "Model architectures [...] are not supported for now.").
- every decoder layer has two cache layers (v1/worker/gpu_model_runner.py get_kv_cache_spec):
  the MLA latent, MLAAttentionSpec(head_size = kv_lora_rank + qk_rope_head_dim = 576, num_kv_heads
  1, cache_dtype_str = cache_config.cache_dtype), and the indexer's keys, DeepseekV32IndexerCache
  (deepseek_v2.py) with MLAAttentionSpec(head_size = index_head_dim + index_head_dim // 128 x 4
  = 132, dtype uint8): fp8 keys and one fp32 scale per 128 of them, whatever the cache dtype.
- the latent's page (v1/kv_cache_interface.py MLAAttentionSpec.page_size_bytes): block_size x
  656 for cache_dtype "fp8_ds_mla" (FlashMLA's format: 512 fp8 values, 4 fp32 scales, 64 bf16
  rope values; a literal, whatever kv_lora_rank), else block_size x 576 x dtype bytes. The sparse
  backend (v1/attention/backends/mla/flashmla_sparse.py) supports head size 576 only.
- the cache dtype (model_executor/models/config.py DeepseekV32ForCausalLM.verify_and_update_config):
  "fp8*" becomes "fp8_ds_mla" and "bfloat16" becomes "auto"; 0.11.0 also turned "auto" into
  "fp8_ds_mla" (from 0.11.1 "auto" stays the model dtype, bf16).
- the block size (platforms/cuda.py check_and_update_config): hasattr(hf_config, "index_topk")
  forces block_size 64 ("Forcing kv cache block size to 64 for FlashMLASparse backend."),
  whatever was asked (0.17.0: unless the FlashInferMLASparse backend is chosen, not modelled).
- grouping (v1/core/kv_cache_utils.py get_kv_cache_groups): both specs are MLAAttentionSpec of
  one block size, so UniformTypeKVCacheSpecs.from_specs puts all 2 x L cache layers in one group
  whose page is the sum of the layers' pages; num_blocks = available // that page,
  "GPU KV cache size" = num_blocks x 64, one request needs cdiv(max_model_len, 64) blocks.
From 0.18.0 the fp8 format and block size are chosen by the attention backend instead
(model_executor/layers/attention/mla_attention.py): calc.serving.indexed_vllm, read up to 0.33.0.
"""

from __future__ import annotations

from calc.dtypes import canonical_dtype, dtype_bits
from calc.spec import ModelSpec

# SGLang's NSATokenToKVPool (python/sglang/srt/mem_cache/memory_pool.py): pages of 64 tokens
# (asserted on CUDA; ServerArgs sets page_size 64 for DeepSeek DSA: calc.serving.indexed_sglang),
# fp8 blocks of 128 values with one fp32 scale each, the rope part kept in bf16
# (rope_storage_dtype). The indexer keys: (size + page_size + 1) // page_size pages, read in the
# 0.5.10 - 0.5.17 wheels (DSATokenToKVPool from 0.5.13); 0.5.18 moves them to IndexKeyCache,
# outside the partial wheel trees read: not re-read there.
NSA_PAGE_SIZE = 64
NSA_QUANT_BLOCK = 128

VLLM_V32_FROM = (0, 11, 0)  # registry.py: DeepseekV32ForCausalLM
VLLM_GLM_DSA_FROM = (0, 16, 0)  # registry.py: GlmMoeDsaForCausalLM (GLM-5), deepseek_v2.py
VLLM_V32_UNTIL = (0, 18, 0)  # from here the backend picks format and block: indexed_vllm.py
VLLM_V32_AUTO_IS_FP8_UNTIL = (0, 11, 1)  # 0.11.0: "auto" -> "fp8_ds_mla"
VLLM_SPARSE_BLOCK = 64  # platforms/cuda.py: forced for FlashMLASparse
VLLM_SPARSE_HEAD = 576  # FlashMLASparseBackend.get_supported_head_sizes
FP8_DS_MLA_BYTES = 656  # MLAAttentionSpec.page_size_bytes: block_size * 656
VLLM_INDEXER_QUANT_BLOCK = 128  # deepseek_v2.py Indexer.quant_block_size
# `vllm serve --kv-cache-dtype` choices (config/cache.py CacheDType, 0.11.0 - 0.17.0) in kvcalc's
# spelling: auto, bfloat16, fp8, fp8_e4m3, fp8_e5m2 (fp8_inc is Intel Gaudi's)
VLLM_V32_KV_DTYPES = ("auto", "bf16", "fp8", "fp8_e4m3", "fp8_e5m2")


def nsa_token_bytes(spec: ModelSpec, kv_dtype: str) -> tuple[int, int]:
    """(latent, indexer key) bytes of one token in one indexed layer of SGLang's NSA pool.

    Latent (ModelRunner.calculate_mla_kv_cache_dim with NSATokenToKVPool): fp8 stores the
    kv_lora_rank values in fp8, one fp32 scale per 128 of them and the rope key in bf16
    (512 + 16 + 128 = 656 B for DeepSeek-V3.2); other dtypes kv_lora_rank + qk_rope_head_dim
    values of that dtype. Indexer key: index_head_dim fp8 values and one fp32 scale per 128
    (uint8 buffer; 132 B), whatever the cache dtype."""
    r, rope = spec.kv_lora_rank, spec.qk_rope_head_dim
    bits = dtype_bits(kv_dtype)
    for field, n in (("kv_lora_rank", r), ("index_head_dim", spec.index_head_dim)):
        if n % NSA_QUANT_BLOCK:
            raise ValueError(
                f"'{field}' must be a multiple of {NSA_QUANT_BLOCK} for SGLang's NSA pool: got {n}"
            )
    latent = r + r // NSA_QUANT_BLOCK * 4 + rope * 2 if bits == 8 else (r + rope) * bits // 8
    d = spec.index_head_dim
    return latent, d + d // NSA_QUANT_BLOCK * 4


def check_vllm_v32_version(version: tuple[int, ...]) -> None:
    """vLLM releases that serve DeepSeek-V3.2 (and GLM-5, GlmMoeDsaForCausalLM), or a
    ValueError."""
    if tuple(version[:3]) < VLLM_V32_FROM:
        raise ValueError(
            "Model architectures ['DeepseekV32ForCausalLM'] are not supported for now. "
            "(vLLM before 0.11.0)"
        )


def vllm_v32_kv_dtype(kv_cache_dtype: str, version: tuple[int, ...], model_dtype: str) -> str:
    """The cache dtype vLLM (below 0.18.0) stores DeepSeek-V3.2's latent in, in kvcalc's
    spelling: "fp8_e4m3" for vLLM's "fp8_ds_mla" (any fp8 setting; "auto" too in 0.11.0), else
    the model dtype ("auto" and "bfloat16" both become "auto")."""
    check_vllm_v32_version(version)
    _check_kv_choice(kv_cache_dtype)
    auto_fp8 = tuple(version[:3]) < VLLM_V32_AUTO_IS_FP8_UNTIL
    if kv_cache_dtype.startswith("fp8") or (kv_cache_dtype == "auto" and auto_fp8):
        return "fp8_e4m3"
    return _check_model_dtype(model_dtype)


def _check_kv_choice(kv_cache_dtype: str) -> None:
    if kv_cache_dtype not in VLLM_V32_KV_DTYPES:
        raise ValueError(
            f"'kv_cache_dtype' must be one of {', '.join(VLLM_V32_KV_DTYPES)} for "
            f"DeepSeek-V3.2 under vLLM (--kv-cache-dtype choices): got {kv_cache_dtype!r}"
        )


def _check_model_dtype(model_dtype: str) -> str:
    dtype = canonical_dtype(model_dtype)
    if dtype != "bf16":  # FlashMLASparseBackend.get_supported_dtypes: [torch.bfloat16]
        raise ValueError(
            f"the model dtype must be bf16 for vLLM's FlashMLASparse backend (DeepSeek-V3.2, "
            f"get_supported_dtypes): got {dtype}"
        )
    return dtype


def vllm_sparse_token_bytes(spec: ModelSpec, kv_dtype: str, fmt: str = "") -> tuple[int, int]:
    """(latent, indexer key) bytes of one token in one layer of vLLM's DeepSeek-V3.2 cache:
    656 (`fmt` "fp8_ds_mla", every 8-bit cache below 0.18), 576 (standard fp8, the FlashInfer
    backends) or 576 x dtype bytes, and index_head_dim + index_head_dim // 128 x 4."""
    head = spec.kv_lora_rank + spec.qk_rope_head_dim
    if head != VLLM_SPARSE_HEAD:
        raise ValueError(
            f"'kv_lora_rank' + 'qk_rope_head_dim' must be {VLLM_SPARSE_HEAD} for vLLM's "
            f"FlashMLASparse backend (get_supported_head_sizes): got {head}"
        )
    bits = dtype_bits(kv_dtype)
    ds_mla = bits == 8 and fmt in ("", "fp8_ds_mla")
    latent = FP8_DS_MLA_BYTES if ds_mla else head * bits // 8
    d = spec.index_head_dim
    return latent, d + d // VLLM_INDEXER_QUANT_BLOCK * 4


def vllm_dsa_settings(spec: ModelSpec, config, gpu: str, model_dtype: str):
    """(kv dtype, latent format, config with the block vLLM uses) for an indexed model: below
    0.18 `vllm_v32_kv_dtype` and the forced block (the layout's); from 0.18 the backend's
    choice (calc.serving.indexed_vllm)."""
    from calc.serving.indexed_vllm import vllm_dsa_backend, vllm_dsa_block

    v = config.version_tuple
    if spec.family in ("glm", "glm_moe_dsa") and v < VLLM_GLM_DSA_FROM:
        raise ValueError(
            "Model architectures ['GlmMoeDsaForCausalLM'] are not supported for now. (vLLM "
            "before 0.16.0: registry.py has it in 0.16.0, not in 0.14.1; 0.15 not read)"
        )
    if v < VLLM_V32_UNTIL:
        kd = vllm_v32_kv_dtype(config.kv_cache_dtype, v, model_dtype)
        return kd, ("fp8_ds_mla" if dtype_bits(kd) == 8 else "bf16"), config
    _check_kv_choice(config.kv_cache_dtype)
    _check_model_dtype(model_dtype)  # FlashInfer's fp16 is not modelled
    _, fmt = vllm_dsa_backend(spec, v, gpu, config.kv_cache_dtype, config.tensor_parallel_size)
    block = vllm_dsa_block(config.block_size)
    kd = "bf16" if fmt == "bf16" else "fp8_e4m3"
    return kd, fmt, config.model_copy(update={"block_size": block})


def vllm_v32_load_bytes(spec: ModelSpec, max_num_batched_tokens: int) -> int:
    """Device memory vLLM's DeepSeek-V3.2 model allocates while loading, beside its weights:
    DeepseekV2Model.__init__'s topk_indices_buffer, torch.empty(max_num_batched_tokens,
    index_topk, dtype=torch.int32, device="cuda") (vllm 0.11.0 - 0.17.0 sdists,
    model_executor/models/deepseek_v2.py), which "Model loading took" counts."""
    return max_num_batched_tokens * spec.index_topk * 4
