"""The record of one engine's KV-cache layout (calc.serving.layout builds it): its groups, its
page and cell sizes, and the per-request block arithmetic vLLM and SGLang derive from it."""

from __future__ import annotations

import math
from dataclasses import dataclass

from calc.layout import STATE_TYPES as STATE_KINDS  # a MambaSpec page a sequence
from calc.serving.indexed import NSA_PAGE_SIZE
from calc.serving.memory import cdiv
from calc.serving.sglang_hybrid import MambaState
from calc.serving.vllm_mamba import StatePages
from calc.serving.vllm_spec import Speculation

KERNEL_BLOCK_ALIGNMENT = 16  # HybridAttentionMambaModelConfig, non-MLA FlashAttention backends


@dataclass(frozen=True)
class Group:
    kind: str  # an ATTENTION kind, or a STATE_KINDS one ("linear_attention", "mamba")
    layers: int  # layers per group (padded)


@dataclass(frozen=True)
class KVLayout:
    """What one pipeline rank holds, and the numbers the engine derives from it."""

    groups: tuple[Group, ...]
    group_size: int  # layers sharing one block slot (max over groups)
    rank_layers: tuple[int, ...]  # layers on each PP rank
    token_bytes: int  # one token of one attention layer on one rank
    sliding_window: int | None
    chunk: int | None = None
    state_bytes: int = 0  # one linear layer's state on one rank (unpadded)
    mla: bool = False
    kv_bytes: int = 2
    kv_heads: int = 1  # per TP rank (MLA: 1)
    head_size: int = 0  # (MLA: kv_lora_rank + qk_rope_head_dim)
    sglang_swa: tuple[int, int] | None = None  # SGLang's sliding pool: (full, sliding) layers
    index_bytes: int = 0  # SGLang NSA: the indexer key of one token and layer (fp8 + scales)
    index_counted: bool = False  # ... counted in the cell and the "KV size" line (#11309)
    forced_block: int | None = None  # vLLM's DeepSeek-V3.2: 64 whatever was asked
    # the engine's log of the block / page its attention backend takes (vllm_mla_block,
    # sglang_page)
    block_line: str | None = None
    sglang_mamba: MambaState | None = None  # SGLang's mamba pool (its token pool: full layers)
    state_pages: StatePages = StatePages()  # vLLM: how a request holds a state group
    # vLLM: (padding layers, the kind's layers) of each kind padded to whole groups
    padding: tuple[tuple[int, int], ...] = ()
    speculation: Speculation = Speculation()  # vLLM: what the KV cache was planned for
    # vLLM from 0.25.1: a linear layer's state raises the block in multiples of
    # max(kernel block, block_size) (calc.serving.vllm_block), before in multiples of 16
    kernel_from_block: bool = False
    # vLLM on Intel XPU from 0.20.0: a Gated DeltaNet model's block rounded up to a multiple of
    # 64 after the raise for its state (calc.serving.vllm_xpu); 1: none
    platform_multiple: int = 1
    # the smallest kernel block of the attention backend the hybrid alignment sees (16; XPU's
    # FlashAttention 64 from 0.32.0: calc.serving.vllm_xpu.xpu_kernel_block)
    kernel_block: int = KERNEL_BLOCK_ALIGNMENT
    # SGLang's nvfp4 pool: a token's bytes outside the layers (the shared fp8 dequant workspace
    # of K and V: calc.serving.sglang_nvfp4), in the cell and, half each, in K / V size
    shared_token_bytes: int = 0
    # SGLang's fp4_e2m1: the head (MLA: latent) bytes its K / KV size lines count, the scales
    # left out (calc.serving.sglang_fp4); 0: head_size
    logged_head_size: int = 0

    def block_size(self, configured: int) -> int:
        """The attention block vLLM uses: `block_size`, raised for a linear layer's state (then
        to the platform's multiple), or the one the backend forces."""
        b = self.hybrid_block_size(configured)
        m = self.platform_multiple
        return b if m == 1 or self.forced_block else cdiv(b, m) * m

    def hybrid_block_size(self, configured: int) -> int:
        """The block the base platform leaves: `block_size` raised for a linear layer's state,
        or the one the backend forces."""
        if self.forced_block:
            return self.forced_block
        if not self.state_bytes:
            return configured
        kernel = self.kernel_block
        if self.kernel_from_block:
            kernel = max(kernel, configured)
        a = math.lcm(kernel, self.state_pages.alignment)
        return max(configured, a * cdiv(self.state_bytes, a * self.token_bytes))

    def page_bytes(self, block_size: int) -> int:
        """One block of one layer (a linear layer's state is padded to this)."""
        return block_size * self.token_bytes

    def report_block(self, block_size: int, max_model_len: int) -> int:
        """The smallest block size of the groups (a MambaSpec's is max_model_len)."""
        if any(g.kind in STATE_KINDS for g in self.groups):
            return _min(block_size, self.mamba_block(block_size, max_model_len))
        return block_size

    def mamba_block(self, block_size, max_model_len):
        """mamba_block_size: max_model_len ("none"), the raised block ("all") or block_size."""
        mode = self.state_pages.mode
        return {"none": max_model_len, "all": self.block_size(1)}.get(mode, block_size)

    def rank_group_size(self, rank: int) -> int:
        """Layers per group slot on one PP rank (one group: the rank's own layers)."""
        if len(self.groups) == 1:
            return self.rank_layers[rank]
        return self.group_size

    def blocks_per_request(self, max_model_len, block_size, max_num_batched_tokens, dcp=1):
        """Blocks one request of max_model_len takes, over the groups; `dcp`: vLLM's decode
        context parallel size (a full-attention rank holds cdiv(L, dcp) tokens: vllm_dcp)."""
        total = 0
        for g in self.groups:
            if g.kind == "sliding_attention":
                n = _min(self.sliding_window - 1 + max_num_batched_tokens, max_model_len)
                total = total + cdiv(n, block_size) + 1
            elif g.kind == "chunked_attention":
                n = _min(self.chunk + max_num_batched_tokens, max_model_len)
                total = total + cdiv(n, block_size)
            elif g.kind in STATE_KINDS:
                mamba = self.mamba_block(block_size, max_model_len)
                total = total + self.state_pages.per_request(max_model_len, mamba)
            else:
                total = total + cdiv(cdiv(max_model_len, dcp), block_size)
        return total

    def cell_bytes(self) -> int:
        """SGLang: one token of every layer on the heaviest rank (profile_max_num_token)."""
        index = self.index_bytes if self.index_counted else 0
        return (self.token_bytes + index) * max(self.rank_layers) + self.shared_token_bytes

    def check_page(self, page_size: int) -> None:
        if self.index_bytes and page_size != NSA_PAGE_SIZE:
            raise ValueError(
                f"'page_size' must be {NSA_PAGE_SIZE} for SGLang's NSA pool (DeepSeek-V3.2): "
                f"got {page_size}"
            )

    def sglang_pool_bytes(self, tokens, page_size: int, logged: bool = False):
        """The MLA / NSA pool's buffers for `tokens`: tokens + page_size latent rows a layer
        (MLATokenToKVPool), plus, for NSA, (tokens + page_size + 1) // page_size pages of
        indexer keys (NSATokenToKVPool.index_k_with_scale_buffer). `logged`: only what the
        "KV size" line counts (the indexer from #11309 on)."""
        layers = max(self.rank_layers)
        row = self.logged_head_size if logged and self.logged_head_size else self.token_bytes
        out = (tokens + page_size) * row * layers
        if self.index_bytes and (self.index_counted or not logged):
            pages = (tokens + page_size + 1) // page_size
            out = out + pages * page_size * self.index_bytes * layers
        return out


def _min(a, b):
    if isinstance(a, int) and isinstance(b, int):
        return min(a, b)
    import numpy as np

    return np.minimum(a, b)
