"""vLLM's per-sequence state of a linear layer (one MambaSpec page, before padding), by layer kind.

Both kinds are planned alike from here on (calc.serving.layout: one KV-cache group kind, the
attention block raised so that one attention page holds one state, the state page padded to it);
only the state's bytes differ:
- Gated DeltaNet ("linear_attention", Qwen3-Next from 0.10.2, Qwen3.5 from 0.17.0, its
  text-only architectures from 0.27.0; refused before): gated_delta_net_state_shape.
- Mamba-2 ("mamba", Nemotron-H / Granite 4.0-H): mamba2_state_shape (calc.layers_ssm.Mamba2.
  rank_state_elems).
The dtypes of the conv and temporal states, by release, model and --mamba-cache-dtype /
--mamba-ssm-cache-dtype: calc/serving/vllm_state_dtype.py.
Releases: MambaSpec with page-size unification for NemotronH and GraniteMoeHybrid from 0.10.2
(the oldest sdist read that plans Qwen3-Next the same way; the earlier sdists are not read for
Mamba-2, so they are refused); Nemotron-H's MoE blocks ("E", NemotronHMoE): absent from
nemotron_h.py in 0.11.0, present in 0.12.0; vLLM's recipe (docs.vllm.ai/projects/recipes,
NVIDIA/Nemotron-3-Nano-30B-A3B) says 0.11.2 also supports Nemotron 3 Nano, so 0.11.2 is the
floor (its sdist not read). use_replayssm (off by default, 0.33.0) is not modelled. Speculative
tokens (k more conv columns, k more pages a request): calc/serving/vllm_spec.py.
Prefix caching (--enable-prefix-caching / --no-enable-prefix-caching; VllmConfig.
enable_prefix_caching, None: the release's default) decides how a request holds a state group
(MambaSpec.max_memory_usage_bytes / max_num_blocks_per_req), by release:
- before 0.12.0: MambaModelConfig turns it off for every hybrid model: 1 page a request;
- 0.12.0 - 0.15.x: kept only for SupportsMambaPrefixCaching models (NemotronH and
  GraniteMoeHybrid among kvcalc's; Qwen3-Next / Qwen3.5 declare none and have it turned off):
  a state per block, cdiv(max_model_len, mamba block) pages, the attention block aligned to the
  Mamba-2 chunk (below); mamba_cache_mode from 0.16.0 names this "all";
- 0.16.0 - 0.27.x: "all" for those models, "align" for the others: 2 + num_prefill_checkpoint_
  blocks pages (mamba_block_size = block_size);
- 0.28.0 on: "align" for every model (config.py sets it alone);
- off: "none", 1 page (mamba_block_size = max_model_len).
The default: off before 0.26.0 (ModelConfig.is_prefix_caching_supported: "Hybrid models do not
support prefix caching"), on from 0.26.0. "all" mode's attention block (platforms/interface.py;
HybridAttentionMambaModelConfig before 0.26): the state's attention tokens rounded up to
lcm(mamba chunk size, 16) (get_mamba_chunk_size: config mamba_chunk_size, else chunk_size), and
mamba_block_size is that block. MambaMixer2 declares one checkpoint block from 0.32.0
(mamba_mixer2.py get_kv_cache_spec; absent in 0.31.0); the Gated DeltaNet from 0.33.0 when its
prefill backend is FlashInfer (gdn/qwen_gdn_linear_attn.py _exports_checkpoints /
_resolve_gdn_prefill_backend: sm90, or sm10x / sm12x with linear_key_head_dim 128 and CUDA
runtime >= 13, the default wheel's: setup.py "[cu13] extra is the default"), whose checkpoint
alignment, 64 (gdn_attn.py FLASHINFER_GDN_CHECKPOINT_ALIGNMENT), platforms/interface.py then
folds into the attention block's alignment (lcm with the kernel's 16). Align mode also
asserts block_size <= max_num_batched_tokens (the raised block) from 0.17.0 to 0.26.x: in
VllmConfig.__post_init__ (0.17.0) after the hybrid block is set, in validate_block_size, "called
after Platform.update_block_size_for_backend()" (0.24.0 - 0.26.0); absent in 0.16.0 and 0.27.0.
--mamba-cache-mode (CacheConfig.mamba_cache_mode; not in 0.14.1's, in 0.16.0's; 0.15 has no
sdist on PyPI): choices all / align / none through 0.31.x, align / none in 0.32.x (MambaCacheMode),
deprecated in 0.33.0 ("It has no effect: Mamba prefix caching follows --enable-prefix-caching").
MambaModelConfig reads it only while prefix caching is on: "none" takes the default above, "all"
falls back to "align" for a model without SupportsMambaPrefixCaching; off, the mode is "none".
So it chooses "align" for NemotronH / Granite before 0.28 and "all" for them in 0.28 - 0.31.
kvcalc tells NemotronH from GraniteMoeHybrid by the spec's family ("nemotron_h" when imported
from a config.json, "nemotron-3" for the preset).
"""

from __future__ import annotations

from typing import NamedTuple

from calc.dtypes import dtype_bits
from calc.layers import KINDS
from calc.serving.hardware import cuda_capability
from calc.serving.vllm_state_dtype import (  # re-exported: the model families live there
    AUTO,
    QWEN35_FROM,
    QWEN35_TEXT_FROM,
    is_nemotron_h,
    is_qwen35,
    release,
    vllm_state_dtypes,
)

GDN_FROM = (0, 10, 2)  # Qwen3-Next (Gated DeltaNet): models/qwen3_next.py, not in 0.10.1
MAMBA2_FROM = (0, 10, 2)
NEMOTRON_H_MOE_FROM = (0, 11, 2)  # vLLM's Nemotron-3-Nano recipe: "vLLM 0.11.2 also supports"
ALIGN_FROM = (0, 26, 0)  # prefix caching on by default for hybrid models
PREFIX_CACHING_FROM = (0, 12, 0)  # for SupportsMambaPrefixCaching models (off before)
MODE_FROM = (0, 16, 0)  # mamba_cache_mode; "align" for the other models
ALL_MODE_UNTIL = (0, 28, 0)  # "all" for SupportsMambaPrefixCaching models before 0.28.0
GDN_CHECKPOINT_FROM = (0, 33, 0)  # QwenGatedDeltaNetAttention: a checkpoint block (FlashInfer)
GDN_CHECKPOINT_ALIGNMENT = 64  # FLASHINFER_GDN_CHECKPOINT_ALIGNMENT
ALIGN_BLOCK_CHECK = ((0, 17, 0), (0, 27, 0))  # "In Mamba cache align mode, block_size ..."
ALL_CHOICE_UNTIL = (0, 32, 0)  # MambaCacheMode = Literal["align", "none"] in 0.32.0
MODE_FLAG_IGNORED_FROM = (0, 33, 0)  # _MAMBA_CACHE_MODE_DEPRECATION_MESSAGE
CHECKPOINT_PAGE_FROM = (0, 32, 0)  # MambaMixer2: num_prefill_checkpoint_blocks=1


def check_vllm_state_version(spec, version: tuple[int, ...]) -> None:
    counts = spec.attention_counts
    if "linear_attention" in counts and version < GDN_FROM:
        raise ValueError(
            f"'model' {spec.name!r}: linear-attention layers before vLLM 0.10.2 (no Gated "
            "DeltaNet), which kvcalc does not model yet"
        )
    if is_qwen35(spec):
        text_only = spec.vision is None
        since = QWEN35_TEXT_FROM if text_only else QWEN35_FROM
        if version < since:
            arch = (
                "Qwen3_5ForCausalLM (text-only)" if text_only else "Qwen3_5ForConditionalGeneration"
            )
            raise ValueError(
                f"'version' must be at least {release(since)} for Qwen3.5 in vLLM ({arch} in "
                f"models/registry.py): got {release(version)}"
            )
    if "mamba" in counts:
        if version < MAMBA2_FROM:
            raise ValueError(
                f"'version' must be at least {release(MAMBA2_FROM)} for vLLM's Mamba-2 state pool "
                f"(MambaSpec; older sdists not read for Mamba-2): got {release(version)}"
            )
        moe = is_nemotron_h(spec) and spec.is_moe
        if moe and version < NEMOTRON_H_MOE_FROM:
            raise ValueError(
                f"'version' must be at least {release(NEMOTRON_H_MOE_FROM)} for Nemotron-H's MoE "
                f"blocks (NemotronHMoE; not in 0.11.0's nemotron_h.py): got {release(version)}"
            )


def vllm_state_bytes(
    spec,
    tp: int,
    version: tuple[int, ...],
    model_dtype: str,
    flags: tuple[str, str] = AUTO,
    extra_columns: int = 0,
) -> int:
    """One linear layer's state on one TP rank (the MambaSpec page before padding); `flags`:
    --mamba-cache-dtype and --mamba-ssm-cache-dtype (calc.serving.vllm_state_dtype);
    `extra_columns`: the conv state's columns for speculative tokens (vllm_spec.conv_columns)."""
    check_vllm_state_version(spec, version)
    conv_dtype, ssm_dtype = vllm_state_dtypes(spec, version, model_dtype, flags)
    if "mamba" in spec.attention_counts:
        conv, ssm = KINDS["mamba"].rank_state_elems(spec, tp, extra_columns)
        return (conv * dtype_bits(conv_dtype) + ssm * dtype_bits(ssm_dtype)) // 8
    kind = KINDS["linear_attention"]
    base = kind.conv_dim(spec) * (spec.linear_conv_kernel_dim - 1)
    recurrent = kind.state_elems(spec, "engine") - base
    conv = kind.conv_dim(spec) * (spec.linear_conv_kernel_dim - 1 + extra_columns)
    return (conv * dtype_bits(conv_dtype) + recurrent * dtype_bits(ssm_dtype)) // 8 // tp


class StateArgs(NamedTuple):
    """vLLM's settings for a linear layer's state (VllmConfig.state_args)."""

    mamba_cache_dtype: str = "auto"
    mamba_ssm_cache_dtype: str = "auto"
    enable_prefix_caching: bool | None = None  # None: the release's default
    mamba_cache_mode: str | None = None  # --mamba-cache-mode; None: not given


def check_mode_flag(version: tuple[int, ...], mode: str | None) -> None:
    """vLLM's own refusal of a --mamba-cache-mode it does not know (the module docstring)."""
    if mode is None:
        return
    if version < MODE_FROM:
        raise ValueError(
            f"'mamba_cache_mode' is a vLLM setting from {release(MODE_FROM)} (--mamba-cache-mode; "
            f"not in 0.14.1's CacheConfig): got {mode!r} for {release(version)}"
        )
    choices = ("all", "align", "none") if version < ALL_CHOICE_UNTIL else ("align", "none")
    if mode not in choices:
        raise ValueError(
            f"'mamba_cache_mode' must be one of {', '.join(choices)} in vLLM {release(version)} "
            f"(MambaCacheMode): got {mode!r}"
        )


class StatePages(NamedTuple):
    """How a request holds a linear layer's state group in vLLM (the module docstring)."""

    mode: str = "none"  # mamba_cache_mode: "none", "all" or "align"
    checkpoint: int = 0  # num_prefill_checkpoint_blocks ("align")
    alignment: int = 1  # folded into the attention block's: a checkpoint's, or "all"'s chunk
    speculative: int = 0  # num_speculative_blocks counted a request (vllm_spec.state_spec_pages)

    def per_request(self, max_model_len: int, mamba_block: int) -> int:
        if self.mode == "all":
            return -(-max_model_len // mamba_block) + self.speculative
        base = 2 + self.checkpoint if self.mode == "align" else 1
        return base + self.speculative


def prefix_caching(spec, version: tuple[int, ...], given: bool | None) -> bool:
    """Whether prefix caching runs for a linear-layer model (the module docstring)."""
    on = version >= ALIGN_FROM if given is None else given
    if version < PREFIX_CACHING_FROM:
        return False
    supports = "mamba" in spec.attention_counts  # SupportsMambaPrefixCaching: NemotronH, Granite
    return on and (supports or version >= MODE_FROM)


def vllm_state_pages(
    spec,
    version: tuple[int, ...],
    gpu: str = "",
    enable_prefix_caching: bool | None = None,
    mamba_cache_mode: str | None = None,
) -> StatePages:
    """The prefix-caching mode a linear layer's state group runs in (MambaModelConfig);
    `mamba_cache_mode`: --mamba-cache-mode, None when not given."""
    if not prefix_caching(spec, version, enable_prefix_caching):
        return StatePages()
    given = mamba_cache_mode if version < MODE_FLAG_IGNORED_FROM else None
    mamba2 = "mamba" in spec.attention_counts
    if mamba2:  # NemotronH / GraniteMoeHybrid: SupportsMambaPrefixCaching
        if given in (None, "none") and version < ALL_MODE_UNTIL or given == "all":
            return StatePages("all", alignment=spec.mamba_chunk_size)
        return StatePages("align", 1 if version >= CHECKPOINT_PAGE_FROM else 0)
    if version >= GDN_CHECKPOINT_FROM and _gdn_flashinfer(spec, gpu):
        return StatePages("align", 1, GDN_CHECKPOINT_ALIGNMENT)
    return StatePages("align")


def _gdn_flashinfer(spec, gpu: str) -> bool:
    """_resolve_gdn_prefill_backend (0.33.0): FlashInfer on sm90, or sm10x / sm12x with 128-wide
    keys (CUDA runtime 13, the default wheel's); Triton otherwise. Off CUDA never (AMD: Triton or
    AITER FlyDSL, Intel: SYCL; none aligns the checkpoints); `gpu`: an NVIDIA preset name or a
    (vendor, name) pair off NVIDIA."""
    if isinstance(gpu, tuple):
        return False
    cc = cuda_capability(gpu) if gpu else None
    if cc is None:
        raise ValueError(
            f"'gpu' must be an NVIDIA preset for vLLM >= 0.33's Gated DeltaNet prefix-cache "
            f"layout (its prefill backend, and so its pages, depend on the GPU): got {gpu!r}"
        )
    return cc == (9, 0) or (cc[0] in (10, 12) and spec.linear_key_head_dim == 128)


def check_align_block(lay, block_size: int, max_num_batched_tokens: int, version) -> None:
    """Align mode's VllmConfig assertion, 0.17.0 - 0.26.x (the module docstring)."""
    lo, hi = ALIGN_BLOCK_CHECK
    if not lo <= version < hi or lay.state_pages.mode != "align":
        return
    if block_size > max_num_batched_tokens:
        raise ValueError(
            f"'max_num_batched_tokens' must be at least the attention block size {block_size} "
            f"in vLLM {release(version)}'s mamba cache align mode (prefix caching with linear "
            f"layers): got {max_num_batched_tokens}"
        )


def page_lines(lay, configured_block: int) -> list[str]:
    """What vLLM's hybrid config check prints for a linear layer's state (HybridAttentionMamba
    ModelConfig.verify_and_update_config in model_executor/models/config.py, 0.10.2 - 0.25;
    Platform.update_block_size_for_backend in platforms/interface.py, 0.26 - 0.33; the same two
    messages): the attention block when it raises the configured one, and the state page's
    padding to the attention page, 100 x (page - state) / state to 2 decimals."""
    if not lay.state_bytes:
        return []
    out, B = [], lay.hybrid_block_size(configured_block)  # before a platform's rounding
    if B > configured_block:
        out.append(
            f"Setting attention block size to {B} tokens to ensure that attention page size "
            "is >= mamba page size."
        )
    if lay.page_bytes(B) != lay.state_bytes:
        out.append(
            f"Padding mamba page size by {padding_pct(lay, B):.2f}% to ensure that mamba page "
            "size and attention page size are exactly equal."
        )
    return out


def padding_pct(lay, block_size: int) -> float:
    """mamba_padding_pct: 100 x (attention page - state) / state, for the block the base
    platform leaves (KVLayout.hybrid_block_size)."""
    return 100 * (lay.page_bytes(block_size) - lay.state_bytes) / lay.state_bytes
