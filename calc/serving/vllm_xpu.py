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
- 0.34.0's default block (64) goes through the XPU backends' preferred block, which was not read:
  kvcalc refuses Intel GPUs there.
- The XPU worker's memory profile (torch.xpu's memory statistics) is not modelled: an Intel
  plan takes its memory from --kv-cache-memory-bytes or a logged --available-kv-gib.

Checked against three public start-up logs on an Arc B580 (benchmarks/engine_logs/
vllm-xpu-*.toml, a source build at 3ca6ca2 between 0.20 and 0.21).
"""

from __future__ import annotations

from calc.serving.vllm_state_dtype import release

VENDOR = "Intel"
GDN_MULTIPLE = 64
GDN_MULTIPLE_FROM = (0, 20, 0)
TWO_LINES_FROM = (0, 32, 0)
READ_BEFORE = (0, 34, 0)


def check_xpu(vendor: str, version: tuple[int, ...]) -> None:
    if vendor == VENDOR and tuple(version[:3]) >= READ_BEFORE:
        raise ValueError(
            f"vLLM {release(version)} on an Intel GPU: the XPU backends' preferred block for "
            f"the default of 64 is not read (kvcalc plans Intel GPUs up to 0.33.x)"
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
