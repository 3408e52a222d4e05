"""SGLang's sliding-window pools between "Load weight end" and "Memory pool end" (the rest of
the window: calc.serving.sglang_pool_end), read in the 0.5.8 - 0.5.23 wheels, the releases whose
SWAKVPool kvcalc plans (calc.serving.sglang_swa): mem_cache/swa_memory_pool.py, the allocator
in mem_cache/allocator/swa.py from 0.5.13. After the request table:
1. SWAKVPool.__init__ builds two MHATokenToKVPools, each its own K / V buffers of its tokens +
   page_size rows a layer and its pointer tables: the sliding layers' pool first up to 0.5.16,
   the full layers' first from 0.5.17;
2. SWATokenToKVPoolAllocator.__init__: the full layers' allocator, then the sliding layers'
   (each an int64 free list of its tokens, or of its pages with page_size > 1); the index
   mapping torch.cat([torch.zeros(full + P, int64), torch.tensor([-1])]), a new tensor of
   full + P + 1 (both inputs freed); then clear() rebuilds the sliding and then the full free
   list, each new one made before the old one is freed.
With those frees the segments come from calc.serving.allocator's simulator (a fresh device,
then empty_cache), cached by the events.
"""

from __future__ import annotations

import functools

from calc.serving.allocator import Free, caching_allocator
from calc.serving.sglang_pool_end import INT64, free_list_bytes, mha_tensors, request_table_bytes

FULL_FIRST_FROM = (0, 5, 17, 0)


def swa_events(v, layers, row, page_size: int, full: int, swa: int, size: int, context_len: int):
    """The requests and frees of the window after the RoPE rebuild (module docstring);
    `layers`: (full, sliding) layers, `row`: a token's K bytes in one layer."""
    P = page_size
    n_full, n_swa = layers
    pools = [(full, n_full), (swa, n_swa)]
    if v < FULL_FIRST_FROM:
        pools.reverse()
    sizes = [request_table_bytes(v, size, context_len)]
    for tokens, layers in pools:
        sizes += [b for b, c in mha_tensors(v, row, tokens, P, layers) for _ in range(c)]
    events: list = list(sizes)
    n = len(sizes)

    def ask(nbytes: int) -> int:
        nonlocal n
        events.append(nbytes)
        n += 1
        return n - 1

    free_full = ask(free_list_bytes(full, P))
    free_swa = ask(free_list_bytes(swa, P))
    zeros, minus_one = ask((full + P) * INT64), ask(INT64)
    ask((full + P + 1) * INT64)  # the mapping
    events += [Free(zeros), Free(minus_one)]
    ask(free_list_bytes(swa, P))  # clear(): the sliding layers' list again
    events.append(Free(free_swa))
    ask(free_list_bytes(full, P))
    events.append(Free(free_full))
    return tuple(events)


def swa_reserved_bytes(v, lay, page_size: int, full: int, swa: int, size: int, context_len: int):
    """The segments the pools and the allocator hold at "Memory pool end" (cached by plain
    arguments: a warm plan does not rebuild the events)."""
    row = lay.kv_heads * lay.head_size * lay.kv_bytes
    return _reserved(v, lay.sglang_swa, row, page_size, full, swa, size, context_len)


@functools.lru_cache(maxsize=1024)
def _reserved(v, layers, row, page_size, full, swa, size, context_len) -> int:
    events = swa_events(v, layers, row, page_size, full, swa, size, context_len)
    return caching_allocator(events, empty_cache=True)[1]
