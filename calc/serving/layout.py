"""The KV-cache layout one engine builds for one model: layer groups, page and cell sizes.

vLLM V1 groups the attention layers (kv_cache_utils.get_kv_cache_groups): one group when every
layer has the same spec; with full and sliding layers of one page size (the hybrid allocator),
groups of `group_size` layers, group_size = the smaller layer count of the two kinds, or the
larger when it is under 1.5 x the smaller (_get_kv_cache_groups_uniform_page_size), each kind
padded to whole groups. Every group shares one block pool, so a block costs page x group_size
bytes and "GPU KV cache size" divides the blocks among the groups.
Per request (max_memory_usage_bytes): a full-attention layer needs ceil(L / block) blocks; a
sliding one ceil(min(window - 1 + max_num_batched_tokens, L) / block) + 1 (SlidingWindowSpec).
With the hybrid manager disabled, or before it (V0), every layer is sized as full attention.
SGLang keeps one token pool over all layers; its sliding-window pool (swa_full_tokens_ratio)
is not modelled here yet.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from calc.dtypes import dtype_bits
from calc.serving.memory import cdiv
from calc.serving.sharding import rank_layers
from calc.sharding import check_parallel, kv_heads_per_gpu
from calc.spec import ModelSpec

HYBRID_ALLOCATOR_FROM = (0, 10, 0)  # KV-cache groups for sliding + full layers in V1


@dataclass(frozen=True)
class Group:
    kind: str  # "full_attention" | "sliding_attention"
    layers: int  # layers per group (padded)


@dataclass(frozen=True)
class KVLayout:
    """What one pipeline rank holds, and the numbers the engine derives from it."""

    groups: tuple[Group, ...]
    group_size: int  # layers sharing one block slot (max over groups)
    rank_layers: tuple[int, ...]  # attention layers on each PP rank
    kv_heads: int  # per TP rank
    head_size: int
    kv_bytes: int  # bytes per element
    sliding_window: int | None

    def page_bytes(self, block_size: int) -> int:
        return 2 * block_size * self.kv_heads * self.head_size * self.kv_bytes

    def rank_group_size(self, rank: int) -> int:
        """Layers per group slot on one PP rank (one group: the rank's own layers)."""
        if len(self.groups) == 1:
            return self.rank_layers[rank]
        return self.group_size

    def blocks_per_request(self, max_model_len, block_size, max_num_batched_tokens):
        total = 0
        for g in self.groups:
            if g.kind == "sliding_attention":
                n = self.sliding_window - 1 + max_num_batched_tokens
                n = (
                    min(n, max_model_len)
                    if isinstance(max_model_len, int)
                    else _np_min(n, max_model_len)
                )
                total = total + cdiv(n, block_size) + 1
            else:
                total = total + cdiv(max_model_len, block_size)
        return total

    def cell_bytes(self) -> int:
        """SGLang: one token of every layer on the heaviest rank."""
        return self.kv_heads * self.head_size * max(self.rank_layers) * 2 * self.kv_bytes


def _np_min(a, b):
    import numpy as np

    return np.minimum(a, b)


@functools.lru_cache(maxsize=4096)
def kv_layout(
    spec: ModelSpec,
    tp: int,
    pp: int,
    kv_dtype: str,
    engine: str = "vllm",
    version: tuple[int, int, int] = (0, 11, 0),
    partition: tuple[int, ...] | None = None,
    hybrid: bool = True,
) -> KVLayout:
    tp, pp = check_parallel(spec, tp, pp)
    split = rank_layers(spec, pp, partition)
    nf, ns = spec.n_full_layers, spec.n_sliding_layers
    kv_bytes = dtype_bits(kv_dtype) // 8
    heads, d = kv_heads_per_gpu(spec, tp), spec.head_dim
    grouped = engine == "vllm" and version >= HYBRID_ALLOCATOR_FROM and hybrid
    if ns and nf and grouped:
        if pp > 1:
            raise ValueError(
                "'pipeline_parallel_size' > 1 with sliding and full layers is not modelled "
                "yet (vLLM assigns each group's layers to ranks round-robin)"
            )
        size = min(nf, ns)
        if max(nf, ns) < size * 1.5:
            size = max(nf, ns)
        groups = tuple(
            Group(kind, size)
            for kind, n in (("full_attention", nf), ("sliding_attention", ns))
            for _ in range(cdiv(n, size))
        )
        return KVLayout(groups, size, split, heads, d, kv_bytes, spec.sliding_window)
    kind = "sliding_attention" if (ns and not nf and engine == "vllm") else "full_attention"
    group = Group(kind, max(split))
    return KVLayout((group,), max(split), split, heads, d, kv_bytes, spec.sliding_window)
