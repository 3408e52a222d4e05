"""SGLang's memory before the weights load: what its "total" is short of the GPU's.

ModelRunner.init_torch_distributed (python/sglang/srt/model_executor/model_runner.py, read at
the v0.4.3.post4 9c58e68b4, v0.5.3 a4a3d8239 and v0.5.6.post2 5c8bd8b51 version bumps in
sglang's history) returns the free device memory after the distributed set-up
(utils.get_available_gpu_memory: torch.cuda.empty_cache(), then torch.cuda.mem_get_info; the
minimum over ranks), and profile_max_num_token reserves (1 - mem_fraction_static) of it.
"Load weight begin. avail mem=X GB" prints the same free memory a moment later. What is gone
by then, on a GPU no other process uses:

1. the CUDA context of the scheduler process (torch.cuda.set_device, the first kernels):
   not derivable from source (the driver's own), calibrated: 0.38 GiB, an H100 at TP 1 on
   v0.4.1.post7 (docs.sglang.ai "Quick Start: Sending Requests", executed 2025-01-23:
   "Load weight begin. avail mem=78.81 GB" of 79.19 GiB; at TP 1 there is no NCCL
   communicator: GroupCoordinator builds PyNcclCommunicator and CustomAllreduce only when
   world_size > 1, parallel_state.py @ 5c8bd8b51).
2. with TP > 1, the custom all-reduce buffers, derived from
   distributed/device_communicators/custom_all_reduce.py (unchanged from 9c58e68b4 to
   5c8bd8b51): max_size = _MAX_CAR_SIZE = 8192 x 1024 B; cudaMalloc of meta_size() +
   max_size (2 MiB granularity -> 10 MiB) and of max_size (8 MiB), plus rank_data =
   torch.empty(max_size) (8 MiB, which torch's caching allocator serves from a 20 MiB
   segment: allocations of 1-10 MiB get kLargeBuffer segments). Used where the GPUs are
   NVLink-connected (CustomAllreduce refuses PCIe-only GPUs beyond 2 and those without P2P);
   kvcalc counts it on NVLink GPUs only.
3. with TP > 1, NCCL's own buffers (PyNcclCommunicator's communicator, warmed up by an
   all_reduce): NCCL's channels, protocols and, on NVSwitch systems, NVLink SHARP (NVLS)
   buffers; not SGLang's code, calibrated:
   - NVSwitch (A100 / H100 SXM, H200, B200: the presets' interconnect): 1.97 GiB, sglang PR #11716 (H200, TP 8, 2025-10-16):
     "Init torch distributed ends. mem usage=2.01 GB" on 6 of 8 ranks (1.77, 1.96 on the
     others) less the custom all-reduce buffers;
   - PCIe: 0.065 GiB x (tp + 2): sglang#16920 (RTX 4090, TP 2, nccl 2.28.3, 2026-01-12:
     "mem usage=0.26 GB") and sglang#40558 (RTX PRO 6000 Blackwell, TP 4, nccl 2.29.7,
     2026-09-21: "mem usage=0.39 GB"; "avail mem=94.01 GB").
4. after the weights (not before: it is part of "Load weight end ... mem usage"), what load_model
   takes outside torch's tensors: the drop in free memory across the load (mem usage = free
   before - free after, utils.get_available_gpu_memory with torch.cuda.empty_cache(), @
   9c58e68b4 .. 5c8bd8b51) exceeds the tensors kvcalc counts (which match vLLM's torch count,
   "Model loading took", to 0.1 %) by 0.03-0.10 GiB in every SGLang log: CUDA modules loaded
   lazily by the load's first kernels and the caching allocator's partly used segments; no
   source states it in bytes, calibrated: 0.059 GiB, the mean of (mem usage - kvcalc's tensors)
   over docs.sglang.ai (H100, 15.09 - 15.006), llms-in-clouds (L4 TP 4, 15.54 - 15.510) and
   jerryzsj/my-deepseek-r1 (RTX 3090, 14.39 - 14.326); held out: sglang PR #4760 (H100,
   15.11: +0.045 GiB, 0.30 %). profile_max_num_token starts from the free memory after the
   load, so the pool is short of it too (calc.serving.figures.sglang_derived_budget).
Not modelled: other processes on the GPU (the docs notebooks of 2026 print 78.43 GB at TP 1:
the notebook's own CUDA context shares the GPU), pipeline / data parallel groups, expert
parallel all-to-all buffers (DeepEP), NVSHMEM, AMD.
Checked against: L4 TP 4 v0.4.3.post4 (llms-in-clouds, 21.63 GB printed, 0.40 GiB used: the
model says 0.77, NCCL without P2P on an L4 holds less than on the 2026 PCIe logs), H100 TP 1,
H200 TP 8 (benchmarks/engine_logs/sglang-*.toml, evidence_sglang.py).
"""

from __future__ import annotations

GIB = 2**30
MIB = 2**20

CUDA_CONTEXT_BYTES = int(0.38 * GIB)  # calibrated (module docstring, 1)
CAR_MAX_SIZE = 8192 * 1024  # custom_all_reduce.py _MAX_CAR_SIZE (CUDA)
CAR_META_SIZE_BOUND = 2 * MIB  # ops.meta_size() is a few KiB; cudaMalloc rounds it up to 2 MiB
TORCH_LARGE_SEGMENT = 20 * MIB  # c10 CUDACachingAllocator kLargeBuffer (1-10 MiB requests)
NCCL_NVLS_BYTES = int(1.97 * GIB)  # calibrated (module docstring, 3)
NCCL_PCIE_PER_RANK_BYTES = int(0.065 * GIB)  # calibrated: x (tp + 2)
LOAD_EXTRA_BYTES = int(0.059 * GIB)  # calibrated (module docstring, 4)


def nvswitch(hw) -> bool:
    """A GPU whose interconnect is NVLink through NVSwitch (the HGX / DGX parts: A100 / H100
    SXM, H200, B200; HardwareSpec.interconnect); None (a GPU kvcalc does not know) is PCIe."""
    return hw is not None and "NVSwitch" in hw.interconnect


def _round_up(n: int, to: int) -> int:
    return -(-n // to) * to


def custom_allreduce_bytes() -> int:
    """CustomAllreduce.__init__ on one rank: meta + buffer (cudaMalloc, 2 MiB pages) and
    rank_data (torch.empty, a 20 MiB segment)."""
    meta = _round_up(CAR_META_SIZE_BOUND + CAR_MAX_SIZE, 2 * MIB)
    return meta + _round_up(CAR_MAX_SIZE, 2 * MIB) + TORCH_LARGE_SEGMENT


def nccl_bytes(tp: int, hw) -> int:
    """NCCL's buffers for a TP group of `tp` ranks (calibrated, module docstring)."""
    if tp <= 1:
        return 0
    if nvswitch(hw):
        return NCCL_NVLS_BYTES
    return NCCL_PCIE_PER_RANK_BYTES * (tp + 2)


def init_used_parts(tp: int, hw) -> dict[str, int]:
    """Bytes gone before "Load weight begin", by part, on `hw` (a HardwareSpec, or None)."""
    nvlink = nvswitch(hw)
    return {
        "cuda_context": CUDA_CONTEXT_BYTES,
        "custom_allreduce": custom_allreduce_bytes() if tp > 1 and nvlink else 0,
        "nccl": nccl_bytes(tp, hw),
    }


def sglang_load_extra_bytes() -> int:
    """What load_model takes on one rank beyond the weight tensors (module docstring, 4): part of
    "Load weight end ... mem usage" and gone from what profile_max_num_token shares out."""
    return LOAD_EXTRA_BYTES


def sglang_init_used_bytes(tp: int, hw) -> int:
    """What SGLang's start-up takes before it measures its "total" (module docstring); vLLM up
    to 0.6.4 counted the same memory as non-torch (calc.serving.overheads)."""
    return sum(init_used_parts(tp, hw).values())
