"""SGLang's --kv-cache-dtype nvfp4 for a standard attention model (a choice from 0.5.16; read in
the PyPI wheels 0.5.16 - 0.5.23: mem_cache/kv_cache_dtype.py, layers/quantization/
fp4_kv_cache_quant_method.py NVFP4KVCacheMethod, mem_cache/memory_pool.py MHATokenToKVPool,
model_executor/pool_configurator.py _compute_cell_size, arg_groups/kv_cache_hook.py,
arg_groups/overrides.py).

The pool (dtype torch.float4_e2m1fn_x2): each layer's K and V, (size + page_size, heads,
head_dim // 2) bytes of fp4 values, and their fp8 block scales, one per 16 values: heads x
(head_dim // 2 + head_dim // 16) bytes a token for K and again for V (calc.serving.layout's
packed head, as vLLM's), in whichever layout the backends read: per token ("linear", for
FlashInfer's prefill and SM120's decode) or TRT-LLM GenMHA's per page (SM100), the same bytes.
Beside them, shared by the layers, the fp8 dequant workspace FlashInfer's prefill reads: (size +
page_size, heads, head_dim) for K and again for V. Allocated and counted in the cell
(profile_max_num_token's bytes a token) and in "K size" / "V size" (get_kv_size_bytes):
- 0.5.16 - 0.5.20: always (the method's registry declares the workspace);
- 0.5.21 on: only where FlashInfer prefills. The kv_cache_hook sets the backends: on SM100
  prefill and decode on trtllm_mha (native NVFP4, no workspace), elsewhere (SM120) FlashInfer's
  prefill with the fp8 workspace and trtllm_mha's decode, whose page is then 16 / 32 / 64 / 128
  ("TensorRT-LLM MHA only supports page_size of ..., changing page_size from None to 64.").
Lines: "NVFP4 KV Cache might lead to an accuracy drop!" (a warning), from 0.5.21 "NVFP4 prefill
dequant dtype: D; prefill input: D; decode input: nvfp4." (D: nvfp4 on SM100, fp8_e4m3
elsewhere), and the pool's "KV Cache is allocated. dtype: torch.float4_e2m1fn_x2, ...".
Refused: a GPU other than SM100 / SM120 in SGLang's words; in kvcalc's, what is not read:
SM120 before 0.5.21 (its default backend against the KV4 check), MLA (MLATokenToKVPoolFP4),
sliding-window, chunked, mamba and indexed pools, speculative decoding, fp4_mx_block16 and
mxfp8 (fp4_e2m1: calc.serving.sglang_fp4).
"""

from __future__ import annotations

NVFP4 = "nvfp4"
SGLANG_NVFP4_FROM = (0, 5, 16, 0)
BACKENDS_SET_FROM = (0, 5, 21, 0)  # kv_cache_hook picks the prefill / decode backends


def workspace(version: tuple[int, ...], major: int | None) -> bool:
    """Whether the shared fp8 dequant workspace is allocated (module docstring)."""
    return version < BACKENDS_SET_FROM or major != 10


def shared_token_bytes(spec, kv_heads: int, version, major) -> int:
    """A token's bytes outside the layers: the workspace's K and V rows, fp8 (1 B a value)."""
    return 2 * kv_heads * spec.head_dim if workspace(version, major) else 0


def decode_on_trtllm(version: tuple[int, ...], major: int | None) -> bool:
    """SM120 from 0.5.21: trtllm_mha decodes, so its page rule applies (SM100's default is
    trtllm_mha already: calc.serving.sglang_page)."""
    return version >= BACKENDS_SET_FROM and major == 12


def check_sglang_nvfp4(spec, config, major: int | None) -> None:
    """SGLang's refusals and kvcalc's limits of an nvfp4 pool (module docstring)."""
    if major not in (10, 12):
        raise ValueError(
            "--kv-cache-dtype=nvfp4 requires Blackwell SM100 or SM120. Use "
            "--kv-cache-dtype=fp4_mx_block16 for the block-size-16 FP4 recipe."
        )
    what = (
        "an MLA model (SGLang's MLATokenToKVPoolFP4)"
        if spec.is_mla
        else plain_pool_gap(spec, config)
    )
    if what is None and major == 12 and config.version_tuple < BACKENDS_SET_FROM:
        what = "an SM120 GPU before 0.5.21 (its default attention backend against the KV4 check)"
    if what:
        raise ValueError(f"SGLang's 'kv_cache_dtype' nvfp4 with {what} is not modelled")


def plain_pool_gap(spec, config) -> str | None:
    """What keeps SGLang's quantized pool from being the one token pool kvcalc models for fp4
    (its hybrid pools, the draft worker's), or None."""
    if set(spec.attention_counts) != {"full_attention"}:
        kinds = sorted(set(spec.attention_counts) - {"full_attention"})
        return f"{', '.join(kinds)} layers (SGLang's hybrid pools)"
    if config.speculative_algorithm is not None:
        return "speculative decoding (the draft worker's pool)"
    return None


def nvfp4_lines(version: tuple[int, ...], hw) -> list[str]:
    """configure_kv_cache_dtype's warning, then (0.5.21 on) the hook's backend line, which comes
    first in the log (module docstring)."""
    from calc.serving.hardware import nvidia_capability

    cap = nvidia_capability(hw)
    major = cap[0] if cap else None
    lines = ["NVFP4 KV Cache might lead to an accuracy drop!"]
    if version >= BACKENDS_SET_FROM:
        d = "nvfp4" if major == 10 else "fp8_e4m3"
        lines.append(f"NVFP4 prefill dequant dtype: {d}; prefill input: {d}; decode input: nvfp4.")
    return lines
