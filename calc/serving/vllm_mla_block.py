"""The KV-cache block size vLLM uses for a dense MLA model (DeepSeek-V2/V3/R1, Kimi K2, GLM-4.7-
Flash; not the indexed DeepSeek-V3.2 / GLM-5, calc.serving.indexed_vllm) on a CUDA GPU, by release,
compute capability, kv_cache_dtype and a given --block-size, with the line vLLM logs when it
changes the block. Read in the PyPI sdists 0.7.3 - 0.33.0 (vllm/platforms/cuda.py
CudaPlatform.check_and_update_config to 0.17.x; platforms/interface.py
update_block_size_for_backend and the MLA backends' get_preferred_block_size /
get_supported_kernel_block_sizes from 0.18.0):

- up to 0.7.3: no MLA rule, 16 (Triton MLA).
- 0.8.0 - 0.10.0: Hopper (capability 9.x; is_flashmla_supported: the FlashMLA extension, built
  by every default wheel, CUDA 12.4 / 12.8 > 12.3) -> 64 whenever block_size != 64: "Forcing kv
  cache block size to 64 for FlashMLA backend."; other GPUs keep theirs.
- 0.10.1 - 0.11.0: also exactly 10.0 (is_device_capability(100): B200 / GB200, not B300's 10.3)
  -> 128 whenever != 128: "Forcing kv cache block size to 128 for CUTLASS_MLA backend."
- 0.11.1 - 0.12.x: the tests become block_size % 64 / % 128 != 0 (a given 128 stays on Hopper).
  On 10.3 nothing is forced, but the major-10 priority list picks CUTLASS_MLA (kernel block 128,
  chosen with block_size=None), so a 16-token block has no common kernel block:
  GPUModelRunner.select_common_block_size raises "No common block size for 16." (read in the
  code path, not seen in a log).
- 0.13.0 - 0.14.x: is_device_capability_family(100), every 10.x -> CUTLASS_MLA's 128.
- 0.15.0 - 0.17.x (0.15 read in its wheel: no sdist): 10.x with qk_nope_head_dim 128 ->
  FlashInfer MLA: block_size != 32 and % 64 != 0 -> 64, "Forcing kv cache block size to 64 for
  FlashInferMLA backend."; other 10.x heads -> CUTLASS_MLA's 128; Hopper as before.
- 0.18.0 on: no forcing; a given --block-size is kept (user_specified_block_size), else the
  first valid backend's preferred size, logged when it is not 16: "Setting kv cache block size
  to N for B backend." (0.31.0 on: "backend(s)."). Hopper: FLASH_ATTN_MLA (16; bf16 / fp16 cache
  only), with an fp8 cache FLASHMLA (64); 10.x: FLASHINFER_MLA (32; qk_nope_head_dim 64 or 128,
  and 192 from 0.19.0), else CUTLASS_MLA (128); every other GPU TRITON_MLA (16).
kv_cache_dtype changes nothing else here (the forced blocks ignore it up to 0.17); whether an
fp8 MLA cache has a backend on a GPU at all is not checked here. AMD GPUs (no compute
capability in kvcalc's presets) keep the configured block: platforms/rocm.py sets 16 (0.8.0 -
0.17.x check_and_update_config; from 0.18 the base update_block_size_for_backend with
TRITON_MLA's 16) unless VLLM_ROCM_USE_AITER, off by default, selects the AITER backends, whose
blocks (1 for AITER MLA, 64 for its unified attention) kvcalc does not model.
"""

from __future__ import annotations

from calc.serving.vllm_block import default_block

FLASHMLA_FROM = (0, 8, 0)
SM100_FROM = (0, 10, 1)
MODULO_FROM = (0, 11, 1)
FAMILY_FROM = (0, 13, 0)
FLASHINFER_FROM = (0, 15, 0)
PREFERRED_FROM = (0, 18, 0)
NOPE_192_FROM = (0, 19, 0)
PLURAL_FROM = (0, 31, 0)


def _forcing(name: str, size: int) -> str:
    return f"Forcing kv cache block size to {size} for {name} backend."


def vllm_mla_block(
    version: tuple[int, ...],
    capability: tuple[int, int] | None,
    kv_cache_dtype: str,
    given: int | None,
    qk_nope_head_dim: int | None,
) -> tuple[int, str | None]:
    """(the block vLLM uses, the line it logs or None) for a dense MLA model (module docstring);
    `given`: --block-size, None when not given."""
    block = default_block(version) if given is None else given
    if capability is None or version < FLASHMLA_FROM:
        return block, None
    major = capability[0]
    if version >= PREFERRED_FROM:
        return _preferred(version, major, kv_cache_dtype, given, qk_nope_head_dim)
    exact = version < MODULO_FROM  # "!= size" up to 0.11.0, "% size != 0" from 0.11.1

    def needs(size: int) -> bool:
        return block != size if exact else block % size != 0

    sm100 = capability == (10, 0) if version < FAMILY_FROM else major == 10
    if sm100 and version >= SM100_FROM:
        if version >= FLASHINFER_FROM and qk_nope_head_dim == 128:
            if block != 32 and block % 64:
                return 64, _forcing("FlashInferMLA", 64)
            return block, None
        return (128, _forcing("CUTLASS_MLA", 128)) if needs(128) else (block, None)
    if major == 10 and MODULO_FROM <= version < FAMILY_FROM and block % 128:
        raise ValueError(f"No common block size for {block}.")
    if major == 9:
        return (64, _forcing("FlashMLA", 64)) if needs(64) else (block, None)
    return block, None


def _preferred(version, major, kv_cache_dtype, given, qk_nope_head_dim):
    """0.18.0 on: the given block, else the chosen backend's preferred one."""
    if given is not None:
        return given, None
    base = default_block(version)
    nope = (64, 128, 192) if version >= NOPE_192_FROM else (64, 128)
    if major == 9:
        name, size = ("FLASHMLA", 64) if kv_cache_dtype.startswith("fp8") else ("", base)
    elif major == 10:
        flashinfer = qk_nope_head_dim in nope
        name, size = (
            ("FLASHINFER_MLA", 32 if base == 16 else 64) if flashinfer else ("CUTLASS_MLA", 128)
        )
    else:
        name, size = "", base
    if size == base:
        return size, None
    tail = "backend(s)." if version >= PLURAL_FROM else "backend."
    return size, f"Setting kv cache block size to {size} for {name} {tail}"
