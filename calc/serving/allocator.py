"""torch's CUDA caching allocator, as vLLM's "Model loading took" counts it (the tensors vLLM
allocates while it builds a model, in order: calc.serving.load_events).

vLLM logs torch.cuda.max_memory_allocated() after reset_peak_memory_stats, after the load less
before (DeviceMemoryProfiler; V0 model_runner.load_model, V1 gpu_model_runner.load_model ->
m.consumed_memory; vllm 0.7.2 sdist vllm/utils.py, 0.19.0 sdist vllm/utils/mem_utils.py and
vllm/platforms/cuda.py get_current_memory_usage). torch counts each allocation as the size of the
block it hands out, not the bytes asked for. The rules (pytorch/pytorch@
001074d25084fdb87a799823e395a50f5ec044d3, c10/cuda/CUDACachingAllocator.cpp; alike in the torch
2.5 - 2.10 that vLLM 0.7 - 0.19 pin, requirements/cuda.txt):
- round_size: a request rounds up to a multiple of kMinBlockSize = 512 B (roundup_power2_divisions
  unset).
- get_pool: <= kSmallSize (1 MiB) from the small pool, larger from the large pool.
- get_free_block: the smallest cached free block of the pool that fits (ties: lowest address;
  max_split_size unset, so no oversize rule).
- get_allocation_size, when none fits: a new segment of kSmallBuffer = 2 MiB (small), kLargeBuffer
  = 20 MiB (requests under kMinLargeAlloc = 10 MiB), else the request rounded up to kRoundLarge =
  2 MiB.
- should_split: the block is split when the remainder is >= 512 B (small pool) or > kSmallSize
  (large pool); otherwise the whole block is the allocation, and alloc_found_block adds
  block->size to allocated_bytes.
- free_block merges a freed block with free neighbours of its segment; nothing is returned to
  the device until empty_cache (not called during the load).
Expandable segments (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, split at 512 B) are not
modelled: vLLM does not set them (its cumem allocator refuses them).
Segment addresses are taken to grow in the order they are made (only breaks ties between free
blocks of one size).
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import NamedTuple

MIN_BLOCK = 512  # kMinBlockSize
SMALL_SIZE = 1 << 20  # kSmallSize
SMALL_BUFFER = 2 << 20  # kSmallBuffer
LARGE_BUFFER = 20 << 20  # kLargeBuffer
MIN_LARGE_ALLOC = 10 << 20  # kMinLargeAlloc
ROUND_LARGE = 2 << 20  # kRoundLarge


class Free(NamedTuple):
    """Frees the allocation made by the `index`-th request of the list (counting requests only)."""

    index: int


def allocation_size(size: int) -> int:
    """get_allocation_size: the new segment a request of `size` (rounded to 512 B) takes when no
    cached block fits (module docstring)."""
    if size <= SMALL_SIZE:
        return SMALL_BUFFER
    if size < MIN_LARGE_ALLOC:
        return LARGE_BUFFER
    return -(-size // ROUND_LARGE) * ROUND_LARGE


def caching_allocator(events: Sequence[int | Free], empty_cache: bool = False) -> tuple[int, int]:
    """(allocated, reserved) bytes after `events` on a fresh device, one stream: an int asks for
    that many bytes, a Free gives back an earlier request. Allocated is what
    torch.cuda.memory_allocated reports, reserved what memory_reserved (cudaMalloc'd) does;
    `empty_cache`: reserved after torch.cuda.empty_cache(), which releases every segment with
    no allocated block (release_cached_blocks)."""
    # a block: [segment, offset, size, allocated, small]; segments: their blocks by offset
    segments: list[list[list]] = []
    free: dict[bool, list[tuple[int, int, int]]] = {True: [], False: []}  # (size, seg, off)
    live: list[list | None] = []
    allocated = reserved = 0
    for ev in events:
        if isinstance(ev, Free):
            block = live[ev.index]
            if block is None:
                raise ValueError(f"'events' frees request {ev.index} twice")
            live[ev.index] = None
            allocated -= block[2]
            _release(segments, free, block)
            continue
        if ev <= 0:
            raise ValueError(f"'events' must ask for a positive number of bytes: got {ev}")
        size = max(MIN_BLOCK, -(-ev // MIN_BLOCK) * MIN_BLOCK)
        small = size <= SMALL_SIZE
        pool = free[small]
        i = bisect.bisect_left(pool, (size, -1, -1))
        if i < len(pool):
            _, seg, off = pool.pop(i)
            block = next(b for b in segments[seg] if b[1] == off)
        else:
            seg_size = allocation_size(size)
            reserved += seg_size
            block = [len(segments), 0, seg_size, False, small]
            segments.append([block])
        rest = block[2] - size
        if rest >= MIN_BLOCK if small else rest > SMALL_SIZE:
            seg = segments[block[0]]
            tail = [block[0], block[1] + size, rest, False, small]
            seg.insert(seg.index(block) + 1, tail)
            bisect.insort(pool, (rest, tail[0], tail[1]))
            block[2] = size
        block[3] = True
        allocated += block[2]
        live.append(block)
    if empty_cache:
        reserved = sum(sum(b[2] for b in seg) for seg in segments if any(b[3] for b in seg))
    return allocated, reserved


def _release(segments, free, block) -> None:
    """free_block: merge with free neighbours (try_merge_blocks) and cache the result."""
    seg = segments[block[0]]
    pool = free[block[4]]
    block[3] = False
    i = seg.index(block)
    for j in (i + 1, i - 1):  # the next block, then the previous one
        if 0 <= j < len(seg) and not seg[j][3]:
            other = seg[j]
            pool.remove((other[2], other[0], other[1]))
            block[1] = min(block[1], other[1])
            block[2] += other[2]
            seg.remove(other)
    bisect.insort(pool, (block[2], block[0], block[1]))
