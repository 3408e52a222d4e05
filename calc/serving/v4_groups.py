"""vLLM's KV-cache groups for DeepSeek-V4, release by release (calc.serving.v4_cache sizes the
layers' pages; this module puts them in groups).

0.20.0 - 0.28.x (group_and_unify_kv_cache_specs + _get_kv_cache_groups_uniform_groups,
v1/core/kv_cache_utils.py; 0.22.0 :1420-1591, 0.27.0 :1592-1764): one full-MLA group of every
compressed latent and indexer page, one sliding group per (block_size, sliding_window); the
number of layer tuples n = _approximate_gcd(each group's most-common page count, lower bound the
full group's); each sliding group split in cdiv(layers per page size, n) groups (layers[i::k]).
Before 0.27.0 a sliding page is padded up to the smallest full page >= it (0.22.0 :1560-1572);
0.27.0 drops the padding ("The packed block planner overlays groups, so their page sizes do not
need to match", 0.27.0 kv_cache_utils.py:1717-1725).

0.29.0 (_get_packed_kv_cache_groups, kv_cache_utils.py:1668-1781): layers are bucketed greedily
by UniformTypeKVCacheSpecs.is_uniform_type (one bucket per block size here); a bucket is
"balanced" when every page size has the same layer count; the repeats per group =
_approximate_gcd(the balanced buckets' most-common counts, lower bound the largest of those with
more than one page size); a balanced bucket splits in cdiv(count, repeats) groups, an unbalanced
one (Flash's and Pro's full-MLA bucket: 21 / 21 / 20 and 30 / 30 / 31 pages) stays whole.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from calc.serving.memory import cdiv

UNPADDED_SLIDING_FROM = (0, 27, 0)  # sliding pages keep their own size
PACKED_GROUPS_FROM = (0, 29, 0)  # _get_packed_kv_cache_groups


@dataclass(frozen=True)
class V4Group:
    kind: str  # "full" | "sliding"
    block_size: int
    window: int | None  # None: full attention
    pages: tuple[int, ...]  # one page per layer of the group

    def blocks_per_request(self, max_model_len, in_flight_tokens):
        """max_memory_usage_bytes / page of one layer: cdiv(L, block) (full); the window's
        admission (kv_cache_interface.py SlidingWindowSpec, 0.22.0 :463-495): cdiv(min(window -
        1 + in-flight tokens, L), block) + 1, the in-flight tokens max_num_batched_tokens before
        0.26.0 and vllm_config.max_in_flight_tokens from it."""
        if self.window is None:
            return cdiv(max_model_len, self.block_size)
        n = min(self.window - 1 + in_flight_tokens, max_model_len)
        return cdiv(n, self.block_size) + 1

    def tuples(self) -> int:
        """UniformTypeKVCacheSpecs.get_num_layer_tuples: the most common page's count."""
        return Counter(self.pages).most_common(1)[0][1]


def approximate_gcd(values: list[int], lower_bound: int) -> int:
    """kv_cache_utils._approximate_gcd: the d >= lower_bound with the least total round-up
    padding of the values, ties to the larger d."""
    best, best_pad = lower_bound, None
    for d in range(lower_bound, max(values) + 1):
        pad = sum((d - x % d) % d for x in values)
        if best_pad is None or pad <= best_pad:
            best, best_pad = d, pad
    return best


def _split(kind, blk, win, per_size: Counter, k: int) -> list[V4Group]:
    """A bucket of equal counts per page size cut in k groups of its layer tuples [i::k]."""
    layers = next(iter(per_size.values()))
    return [
        V4Group(kind, blk, win, tuple(sorted(per_size)) * len(range(i, layers, k)))
        for i in range(k)
    ]


def tuple_groups(full, sliding, block_size, version) -> list[V4Group]:
    """0.20.0 - 0.28.x: the full-MLA group and the split sliding groups."""
    head = V4Group("full", block_size, None, tuple(full))
    counts = [head.tuples()] + [Counter(p).most_common(1)[0][1] for p in sliding.values()]
    n = approximate_gcd(counts, lower_bound=counts[0])
    sizes = sorted(set(full))
    groups = [head]
    for (blk, win), pages in sliding.items():
        if version < UNPADDED_SLIDING_FROM:
            if max(pages) > sizes[-1]:
                raise ValueError(
                    f"'block_size' {block_size}: a sliding page of {max(pages)} B is larger than "
                    "every full-attention page (vLLM asserts max(sm_page_sizes) <= "
                    "max(all_page_sizes))"
                )
            pages = [min(s for s in sizes if s >= p) for p in pages]
        per_size = Counter(pages)
        if len(set(per_size.values())) != 1:
            raise ValueError("vLLM asserts one layer count per page size in a sliding group")
        groups += _split("sliding", blk, win, per_size, cdiv(next(iter(per_size.values())), n))
    return groups


def packed_groups(full, sliding, block_size) -> list[V4Group]:
    """0.29.0+: _get_packed_kv_cache_groups over the buckets (full first, then sliding)."""
    buckets = [("full", block_size, None, Counter(full))]
    buckets += [("sliding", blk, win, Counter(p)) for (blk, win), p in sliding.items()]
    balanced = [len(set(c.values())) == 1 for *_, c in buckets]
    floor = max(
        (max(c.values()) for (*_, c), b in zip(buckets, balanced, strict=True) if b and len(c) > 1),
        default=0,
    )
    repeats = None
    if floor:
        counts = [max(c.values()) for (*_, c), b in zip(buckets, balanced, strict=True) if b]
        repeats = approximate_gcd(counts, lower_bound=floor)
    groups: list[V4Group] = []
    for (kind, blk, win, c), b in zip(buckets, balanced, strict=True):
        if b and repeats is not None:
            groups += _split(kind, blk, win, c, cdiv(max(c.values()), repeats))
        else:  # emitted whole
            groups.append(V4Group(kind, blk, win, tuple(sorted(c.elements()))))
    return groups
