"""vLLM on Intel GPUs (XPU): what its platform changes in the KV-cache layout, and what kvcalc
does not model there.

Read in the PyPI sdists 0.14.0 - 0.34.0 (vllm/platforms/xpu.py XPUPlatform.
update_block_size_for_backend):
- from 0.20.0, after the base platform has raised the attention block for a linear layer's
  state (calc.serving.layout_record.KVLayout.hybrid_block_size), a model whose layers use the
  GDN_ATTN backend (Gated DeltaNet: Qwen3-Next, Qwen3.5) gets the block rounded up to a multiple
  of 64 ("special fix for GDN since kernel only supports block size dividable by 64"); the mamba
  page is rescaled to the new block, so the state pads to the larger attention page, and align
  mode's mamba_block_size follows. 0.20.0 - 0.31.0 log one line, "[XPU]Setting attention block
  size to N tokens to ensure multiple of 64, set mamba_page_size_padded to P bytes accordingly,
  before was Q bytes."; 0.32.0 on two ("... multiple of 64." and "[XPU]Scaled
  mamba_page_size_padded from Q to P bytes accordingly.").
- the attention backend (XPUPlatform.get_attn_backend_cls): FLASH_ATTN unless
  --attention-backend TRITON_ATTN is given (or the model runs in float32, or VLLM_BATCH_INVARIANT,
  or a multimodal prefix-LM model: Triton or the Triton / FlashAttention composite; kvcalc
  refuses the first and the last as not modelled). From 0.20.0 FlashAttentionBackend.
  get_preferred_block_size on XPU is max(default, 64) (v1/attention/backends/flash_attn.py;
  absent in 0.19.1), so with no --block-size the block is 64, logged "Setting kv cache block
  size to 64 for FLASH_ATTN backend." ("backend(s)." from 0.31.0; nothing from 0.34.0, whose
  default is 64 already); Triton keeps the default (16; 64 from 0.34.0). From 0.32.0 the XPU
  FlashAttention advertises MultipleOf(64) kernel blocks (get_supported_kernel_block_sizes;
  absent in 0.31.0), which the hybrid alignment takes (max(kernel, block_size)), so a Gated
  DeltaNet block is a multiple of 64 before XPU's rounding, which then changes nothing.
- The XPU worker's memory profile (torch.xpu's memory statistics) is not modelled: an Intel
  plan takes its memory from --kv-cache-memory-bytes or a logged --available-kv-gib.

Checked against three public start-up logs on an Arc B580 (benchmarks/engine_logs/
vllm-xpu-*.toml, a source build at 3ca6ca2 between 0.20 and 0.21).
"""

from __future__ import annotations

VENDOR = "Intel"
GDN_MULTIPLE = 64
GDN_MULTIPLE_FROM = (0, 20, 0)
TWO_LINES_FROM = (0, 32, 0)
BACKENDS = ("FLASH_ATTN", "TRITON_ATTN")  # the --attention-backend choices kvcalc plans on XPU
PREFERRED_64_FROM = (0, 20, 0)
PLURAL_LINE_FROM = (0, 31, 0)
KERNEL_64_FROM = (0, 32, 0)


def xpu_backend(backend: str | None) -> str:
    return backend or "FLASH_ATTN"


def xpu_default_block(version: tuple[int, ...], base: int, backend: str | None):
    """(block, line) with no --block-size (module docstring); `base`: DEFAULT_BLOCK_SIZE."""
    v = tuple(version[:3])
    if xpu_backend(backend) != "FLASH_ATTN" or v < PREFERRED_64_FROM or base >= 64:
        return base, None
    s = "(s)" if v >= PLURAL_LINE_FROM else ""
    return 64, f"Setting kv cache block size to 64 for FLASH_ATTN backend{s}."


def xpu_kernel_block(vendor: str, version: tuple[int, ...], backend: str | None) -> int:
    """The smallest kernel block the hybrid alignment sees on this vendor (16 off XPU)."""
    on = vendor == VENDOR and xpu_backend(backend) == "FLASH_ATTN"
    return 64 if on and tuple(version[:3]) >= KERNEL_64_FROM else 16


def check_xpu(spec, vendor: str, backend: str | None, model_dtype: str) -> None:
    """The XPU backend choices kvcalc does not model (module docstring)."""
    if vendor != VENDOR or backend is not None:
        return
    if model_dtype == "fp32":
        raise ValueError(
            "vLLM on an Intel GPU in float32 falls back to Triton Attention: give "
            "'attention_backend' TRITON_ATTN (--attention-backend)"
        )
    if spec.vision is not None and spec.vision.kind == "siglip":
        raise ValueError(
            "vLLM on an Intel GPU: a multimodal prefix-LM model (Gemma 3) takes Triton or the "
            "Triton / FlashAttention composite, not modelled: give 'attention_backend'"
        )


def check_xpu_derivable(vendor: str) -> None:
    """A derived plan on an Intel GPU is refused (the module docstring)."""
    if vendor == VENDOR:
        raise ValueError(
            "vLLM on an Intel GPU: the XPU worker's memory profile is not modelled, so the "
            "available memory cannot be derived: set 'kv_cache_memory_bytes' "
            "(--kv-cache-memory-bytes) or plan from a logged 'available_kv_gib' (--available-kv-gib)"
        )


def xpu_block_multiple(spec, vendor: str, version: tuple[int, ...]) -> int:
    """The multiple XPUPlatform rounds the attention block to (1: none)."""
    gdn = "linear_attention" in spec.attention_counts
    on = vendor == VENDOR and gdn and tuple(version[:3]) >= GDN_MULTIPLE_FROM
    return GDN_MULTIPLE if on else 1


def check_xpu_layout(lay, configured_block: int) -> None:
    """Where the state page equals the base attention page exactly, vLLM leaves
    mamba_page_size_padded unset and XPU's rounding does not rescale it: not modelled."""
    base = lay.hybrid_block_size(configured_block)
    raised = lay.block_size(configured_block) != base
    if raised and lay.page_bytes(base) == lay.state_bytes:
        raise ValueError(
            "vLLM on an Intel GPU: the linear layers' state fills the attention page exactly "
            f"at block {base}, so XPU's rounding to {GDN_MULTIPLE} leaves the state page "
            "unpadded: not modelled"
        )


def xpu_lines(lay, configured_block: int, version: tuple[int, ...]) -> list[str]:
    """XPUPlatform's line(s) when it raises the block."""
    base = lay.hybrid_block_size(configured_block)
    new = lay.block_size(configured_block)
    if new == base:
        return []
    before, after = lay.page_bytes(base), lay.page_bytes(new)
    head = f"[XPU]Setting attention block size to {new} tokens to ensure multiple of {GDN_MULTIPLE}"
    if tuple(version[:3]) >= TWO_LINES_FROM:
        return [
            f"{head}.",
            f"[XPU]Scaled mamba_page_size_padded from {before} to {after} bytes accordingly.",
        ]
    return [
        f"{head}, set mamba_page_size_padded to {after} bytes accordingly, before was {before} "
        "bytes."
    ]
