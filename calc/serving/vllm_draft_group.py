"""vLLM's --attention-backend and an MTP drafter's KV-cache group (read in the 0.19.0 - 0.33.0
sdists).

The drafter never takes the target's attention backend. From 0.21.0 the proposer's drafter
config resets it: "Never inherit the attention backend from base ... we always independently
autoselect unless explicitly specified in the speculative config" (v1/spec_decode/eagle.py,
llm_base_proposer.py from 0.20.0). A backend given with --attention-backend therefore holds for
the target's layers only; the drafter's layer gets the platform's first valid backend.

In 0.24.0 - 0.28.x that can split the KV cache. GPUModelRunner.get_kv_cache_spec stamps each
layer's spec with `indexes_kv_by_block_stride` (AttentionBackend.indexes_kv_by_block_stride:
True when get_kv_cache_stride_order has a layers dimension with the blocks outermost, i.e.
FLASH_ATTN, FLASHINFER, TRITON_ATTN, FLEX_ATTENTION; False for the ROCm backends ROCM_ATTN,
ROCM_AITER_FA and ROCM_AITER_UNIFIED_ATTN, which define no stride order). The field is an
AttentionSpec field, and FullAttentionSpec.merge asserts every AttentionSpec field equal. So a
drafter whose backend differs from the target's in it is a spec of its own (a bucket of its MTP
layers), and _get_kv_cache_groups_uniform_page_size takes the smallest bucket as the group size:
groups of one layer for one MTP layer. The field is absent from 0.23.0's and 0.29.0's
kv_cache_interface.py.

The drafter's backend: on AMD (platforms/rocm.py _get_backend_priorities) ROCM_ATTN first, or
ROCM_AITER_UNIFIED_ATTN on RDNA with AITER: no stride order either way. On NVIDIA FLASH_ATTN or
FLASHINFER: both with one. So the drafter gets its own group when a stride backend is given on
AMD (AIwork4me's Qwen3.8-27B with --attention-backend TRITON_ATTN on a gfx1151 APU:
benchmarks/engine_logs/vllm-aiwork4me-qwen38-27b-rocm-mtp1.toml); on NVIDIA every backend
it runs has one.

kvcalc plans the target's layers with the default backend's block and page rules: the setting
is modelled only for this grouping, so it is refused without an MTP drafter, with MLA (whose
block size follows the backend: calc.serving.vllm_mla_block), and for a backend the GPU's vendor
does not run.
"""

from __future__ import annotations

XPU_BACKENDS = ("FLASH_ATTN", "TRITON_ATTN")  # calc.serving.vllm_xpu.BACKENDS
OWN_SPEC_FROM = (0, 24, 0)
OWN_SPEC_UNTIL = (0, 29, 0)
STRIDE_BACKENDS = frozenset({"FLASH_ATTN", "FLASHINFER", "TRITON_ATTN", "FLEX_ATTENTION"})
BACKENDS = {
    "NVIDIA": ("FLASH_ATTN", "FLASHINFER", "TRITON_ATTN", "FLEX_ATTENTION"),
    "AMD": ("TRITON_ATTN", "ROCM_ATTN", "ROCM_AITER_FA", "ROCM_AITER_UNIFIED_ATTN"),
}
KNOWN = tuple(dict.fromkeys(b for names in BACKENDS.values() for b in names))


def check_backend_name(backend: str | None) -> None:
    """VllmConfig's check of the name alone."""
    if backend is not None and backend not in KNOWN:
        raise ValueError(f"'attention_backend' must be one of {', '.join(KNOWN)}: got {backend!r}")


def drafter_own_group(spec, vendor: str, version: tuple[int, ...], backend, draft_layers) -> bool:
    """Whether the MTP drafter's layers form a KV-cache spec of their own (module docstring);
    refuses the setting where it is not modelled."""
    if backend is None:
        return False
    if vendor == "Intel" and not draft_layers and backend in XPU_BACKENDS:
        return False  # the XPU backend's block (calc.serving.vllm_xpu)
    if not draft_layers:
        raise ValueError(
            f"'attention_backend' {backend} is modelled only for an MTP drafter's KV-cache group "
            "(the drafter does not inherit it): drop it, or plan with speculative_method mtp"
        )
    if spec.is_mla:
        raise ValueError(
            f"'attention_backend' {backend} with MLA is not modelled (the block size follows the "
            "backend): drop it"
        )
    names = BACKENDS.get(vendor, ())
    if backend not in names:
        raise ValueError(
            f"'attention_backend' must be one of {', '.join(names) or 'none'} on {vendor} GPUs: "
            f"got {backend}"
        )
    if not OWN_SPEC_FROM <= version < OWN_SPEC_UNTIL:
        return False
    drafter_stride = vendor != "AMD"  # the autoselected backend's (module docstring)
    return (backend in STRIDE_BACKENDS) != drafter_stride
