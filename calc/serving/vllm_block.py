"""vLLM's default KV-cache block when --block-size is not given, by release and GPU vendor, for a
model without MLA (the MLA backends' blocks: calc.serving.vllm_mla_block, which reads
default_block for the release's base), and the line vLLM logs when the backend changes it.

- up to 0.33.0: CacheConfig.DEFAULT_BLOCK_SIZE 16 (vllm/config/cache.py; the FlashAttention,
  FlashInfer and Triton backends keep it: calc/serving/defaults.py).
- 0.34.0: DEFAULT_BLOCK_SIZE = 64 (vllm/config/cache.py line 185 of the 0.34.0 sdist). Platform.
  update_block_size_for_backend (platforms/interface.py, Phase 1, unchanged from 0.33.0) then
  asks the backend for get_preferred_block_size(64) when the user gave none:
  - NVIDIA: FlashAttention (MultipleOf(16)), FlashInfer ([16, 32, 64]) and Triton (MultipleOf(16))
    keep 64, so nothing is logged;
  - AMD: platforms/rocm.py _get_backend_priorities puts ROCM_ATTN first (VLLM_ROCM_USE_AITER
    off, no KV connector), and 0.34.0's RocmAttentionBackend.get_preferred_block_size returns
    16 ("Keep the native kernel for default-sized runs"), logged as "Setting kv cache block size
    to 16 for ROCM_ATTN backend(s)." (interface.py: `if preferred != DEFAULT_BLOCK_SIZE`).
  Not modelled: FlashAttention 4's own kernel blocks (128 for head size 256 on SM10x, 64 for an
  fp8 cache at head size 512 on SM90), in 0.33.0 as in 0.34.0; RDNA GPUs' Triton preference.
- A linear layer's state raises the block in multiples of max(kernel block, block_size)
  (Platform._align_hybrid_block_size: `kernel_block_alignment_size = max(min(supported kernel
  blocks), cache_config.block_size)`, read in the 0.25.1, 0.33.0 and 0.34.0 sdists; kvcalc
  applies it from 0.25.1 and the kernel's 16 alone before, where it was not read; the two agree
  for a 16-token block): calc.serving.layout_record.KVLayout.block_size.
"""

from __future__ import annotations

BLOCK_64_FROM = (0, 34, 0)
KERNEL_FROM_BLOCK_FROM = (0, 25, 1)
ROCM_ATTN_LINE = "Setting kv cache block size to 16 for ROCM_ATTN backend(s)."


def default_block(version: tuple[int, ...]) -> int:
    """CacheConfig.DEFAULT_BLOCK_SIZE of the release."""
    return 64 if tuple(version[:3]) >= BLOCK_64_FROM else 16


def vllm_default_block(
    version: tuple[int, ...], vendor: str, backend: str | None = None
) -> tuple[int, str | None]:
    """(block, the line vLLM logs or None) for a model without MLA and no --block-size;
    `backend`: --attention-backend (Intel: calc.serving.vllm_xpu.xpu_default_block)."""
    base = default_block(version)
    if base == 64 and vendor == "AMD":
        return 16, ROCM_ATTN_LINE
    if vendor == "Intel":
        from calc.serving.vllm_xpu import xpu_default_block

        return xpu_default_block(version, base, backend)
    return base, None
