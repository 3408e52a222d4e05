"""vLLM's --kv-cache-dtype nvfp4 for standard attention (CacheDType from 0.20.0; read in the 0.20.0 -
0.34.0 sdists: config/cache.py, v1/kv_cache_interface.py, v1/attention/backends/flashinfer.py,
platforms/cuda.py, config/vllm.py).

The cache: uint8, each head's K (and V) as head_size // 2 bytes of fp4 values then head_size // 16
fp8 block scales (utils/torch_utils.py nvfp4_kv_cache_full_dim), no padding, so a block is
block_size x KV heads x 2 x (D // 2 + D // 16) bytes (AttentionSpec.real_page_size_bytes 0.21 -
0.27, FlashInferBackend.customize_spec from 0.28). kvcalc plans it as a one-byte cache of heads
that wide (calc.serving.layout).

Only FlashInfer runs it, by release and GPU (compute capability family = its major):
- 0.20.x: FlashInfer does not list it: no backend runs it (refused).
- 0.21.0 - 0.22.1: FlashInfer takes it on any GPU but forces the trtllm-gen kernels; planned on
  the SM100 family (10.x) only, refused elsewhere as not verified.
- 0.23.0 - 0.24.0: off SM100 its metadata builder raises "--kv-cache-dtype nvfp4 requires sm100f,
  please try a different dtype or remove".
- 0.25.0 - 0.31.0: supports_kv_cache_dtype only on the SM100 family; elsewhere "No valid
  attention backend found".
- 0.32.0 on: also SM80 / SM90 / SM120 (majors 8, 9, 12) through FlashInfer's FA2 prefill, which
  refuses head_size 64, attention sinks and decode context parallelism in its words.
FlashInfer's head sizes: 64, 128, 256, 512. MLA is refused from 0.21 in config/vllm.py's words.
Hybrids (read in the 0.21.0 - 0.34.0 sdists: platforms/interface.py's hybrid block alignment,
v1/kv_cache_interface.py, v1/core/kv_cache_utils.py, model_executor/layers/mamba/): nothing in
them is nvfp4's own. The alignment's attention page of one token is the packed one
(real_page_size_bytes' nvfp4 branch 0.21 - 0.27, FlashInferBackend.customize_spec from 0.28), so
a Gated DeltaNet / Mamba-2 model raises its block and pads its state page as for any cache, with
KV heads x 2 x full_dim bytes a token and layer; FlashInfer's smallest kernel block is 16, as
FLASH_ATTN's; the states keep their own dtypes (--mamba-cache-dtype and --mamba-ssm-cache-dtype,
never kv_cache_dtype). Sliding-window and chunked local layers (Llama 4) take the same packed
page. Not modelled, refused: nvfp4_4over6 / nvfp4_ds_mla.
"""

from __future__ import annotations

NVFP4 = "nvfp4"
FLASHINFER_FROM = (0, 21, 0)
BUILDER_CHECK = ((0, 23, 0), (0, 25, 0))  # "requires sm100f" from the metadata builder
FA2_FROM = (0, 32, 0)  # FlashInfer's FA2 path for majors 8, 9, 12
MLA_TEXT_NEW_FROM = (0, 32, 0)
HEAD_SIZES = (64, 128, 256, 512)
# the layer kinds planned with an nvfp4 cache (module docstring: hybrids)
PLANNED_KINDS = frozenset(
    {
        "full_attention",
        "sliding_attention",
        "chunked_attention",
        "linear_attention",
        "mamba",
        "none",
    }
)


def full_dim(head_size: int) -> int:
    """One head's bytes of K (or V): fp4 values and one fp8 scale per 16 of them."""
    return head_size // 2 + head_size // 16


def check_vllm_nvfp4(spec, config, capability) -> None:
    """vLLM's refusals of an nvfp4 cache for this model, release and GPU (module docstring);
    `capability`: (major, minor) or None (no CUDA capability stated)."""
    v, name = config.version_tuple[:3], config.version
    if spec.is_mla:
        if v < FLASHINFER_FROM:
            raise ValueError(f"'kv_cache_dtype' nvfp4: vLLM {name} has no backend that runs it")
        example = "'fp8', 'auto', or 'nvfp4_ds_mla' with a sparse MLA backend"
        example = example if v >= MLA_TEXT_NEW_FROM else "'fp8' or 'auto'"
        raise ValueError(
            "nvfp4 KV cache is not supported with MLA (Multi-head Latent Attention) backends. "
            f"Please use a different --kv-cache-dtype (e.g., {example}) for MLA models such as "
            "DeepSeek."
        )
    kinds = set(spec.attention_counts) - PLANNED_KINDS
    if kinds:
        raise ValueError(
            f"'kv_cache_dtype' nvfp4 with {', '.join(sorted(kinds))} layers is not modelled"
        )
    if v < FLASHINFER_FROM:
        raise ValueError(
            f"'kv_cache_dtype' nvfp4: vLLM {name} has no attention backend that runs it "
            "(FlashInfer lists it from 0.21.0)"
        )
    major = None if capability is None else capability[0]
    sm100 = major == 10
    fa2 = v >= FA2_FROM and major in (8, 9, 12)
    if not (sm100 or fa2):
        if BUILDER_CHECK[0] <= v < BUILDER_CHECK[1]:
            raise ValueError(
                "--kv-cache-dtype nvfp4 requires sm100f, please try a different dtype or remove"
            )
        if v < BUILDER_CHECK[0]:
            raise ValueError(
                f"'kv_cache_dtype' nvfp4 off the SM100 family is not modelled for vLLM {name} "
                "(FlashInfer takes it but runs Blackwell-only trtllm-gen kernels)"
            )
        raise ValueError(
            "No valid attention backend found for this GPU with kv_cache_dtype nvfp4 (vLLM "
            f"{name}: FlashInfer runs it on the SM100 family"
            + (", or SM80 / SM90 / SM120 through its FA2 path)" if v >= FA2_FROM else ")")
        )
    if spec.head_dim not in HEAD_SIZES:
        raise ValueError(
            f"No valid attention backend found with kv_cache_dtype nvfp4: FlashInfer's head "
            f"sizes are {', '.join(map(str, HEAD_SIZES))}, got head_size {spec.head_dim}"
        )
    if not fa2:
        if spec.attention_sinks:  # FlashInfer's sinks on the trtllm path were not read per release
            raise ValueError("'kv_cache_dtype' nvfp4 with attention sinks is not modelled")
        return
    if spec.head_dim == 64:
        raise ValueError("fa2 prefill misreads an NVFP4 KV cache at head_size 64")
    if spec.attention_sinks:
        raise ValueError("the sink prefill wrapper cannot read an NVFP4 KV cache")
    if config.decode_context_parallel_size > 1:
        raise ValueError("The DCP prefill wrapper cannot read NVFP4 block scales.")
