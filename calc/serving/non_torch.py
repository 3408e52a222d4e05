"""The non-torch term of vLLM's available-memory sum, per GPU: what the profile run adds to the
memory outside torch's allocations (or, in older releases, all of that memory), by release,
GPU interconnect and parallel layout. calc.serving.overheads puts it beside the activation peak
and the CUDA-graph estimate.
"""

from __future__ import annotations

from calc.activation import DEFAULT_RUNTIME_RESERVE_BYTES, DEFAULT_RUNTIME_RESERVE_MULTI_GPU_BYTES
from calc.serving.sglang_memory import nvswitch, sglang_init_used_bytes

GIB = 2**30
# From these releases vLLM's non-torch term is only what the profile run added to the memory
# outside torch, counted from a snapshot taken before it (vllm/utils.py memory_profiling with a
# baseline; the worker's "non_torch_memory takes X GiB"): the CUDA context and whatever else was
# resident before are no longer subtracted. V0: first in 0.6.5, whose PyPI sdist's
# vllm/worker/worker.py profiles inside memory_profiling(baseline_memory_in_bytes=total -
# init_gpu_memory), init_gpu_memory read in init_device after the CUDA context exists (0.6.4.post1
# has no memory_profiling); reworked with a MemorySnapshot baseline in 0.7.0 (vllm PR #11809 /
# #12126, whose log shows "non_torch_memory takes 0.16GiB" on an H100). V1: vllm PR #19312 "[V1] Reuse V0's memory_profiling util
# for gpu worker memory profiling" (June 2025; before it V1 subtracted all memory used outside
# torch allocations): first in 0.9.1 (its PyPI sdist's vllm/v1/worker/gpu_worker.py calls
# memory_profiling(self.init_snapshot, ...); 0.9.0's does not).
NON_TORCH_INCREASE_V0_FROM = (0, 6, 5)
NON_TORCH_INCREASE_V1_FROM = (0, 9, 1)
# What the profile run adds outside torch on one GPU is not fixed by vLLM's source (cuBLAS
# workspaces, CUDA modules loaded for the first kernels run). Published single-GPU lines of those
# releases print 0.01-0.16 GiB (vllm PR #12126: 0.16 on an H100; oracle-samples AI Quick Actions
# troubleshooting-tips.md: 0.05, benchmarks/engine_logs/vllm-aqua-*): kvcalc takes 0.1 GiB, an
# estimate from logs (calibration, not first principles). With TP / PP the increase also holds
# NCCL and custom all-reduce buffers: no published breakdown yet, so calc.capacity's multi-GPU
# reserve stays.
NON_TORCH_INCREASE_BYTES = GIB // 10
# What NCCL adds to that increase on GPUs without NVSwitch (PCIe, NVLink bridges), where the
# snapshot precedes NCCL's set-up (pcie_non_torch_increase_bytes): CALIBRATION, not derived (the
# buffers are NCCL's: channels x protocols x the ring's two neighbours, so not the group size).
# Fitted on vllm#13061 (0.7.2, RTX 4090 x 2, TP 2): the worker's "non_torch_memory takes
# 0.25GiB", quoted in the issue body, less the one-GPU 0.1 GiB: 0.15 GiB. Held out: vllm PR
# #14447 (0.8.3, RTX 3090 x 16, TP 16, benchmarks/engine_logs/vllm-pr14447-*): "non_torch_memory
# takes 0.20GiB" on every worker, 0.05 GiB under this model. The group size does not scale it:
# SGLang's PCIe figure, 0.065 GiB x (tp + 2) (sglang_memory.nccl_bytes, whose init measures the
# communicators' whole set-up on 2026 NCCL builds), would give 1.27 GiB at TP 16, six times the log.
NCCL_PCIE_INCREASE_BYTES = round(0.15 * GIB)
# vLLM V1 0.15.0-0.19.x on one H100 SXM 80GB: CALIBRATION on the llm-d-planner runs (real
# start-ups, https://github.com/llm-d-incubation/llm-d-planner, commit d3121e0,
# accuracy/results/v0.19.0/results_raw.csv and version-sweep/runs/*.json; the values a test
# needs are in tests/fixtures/engine_runs/llmd-planner.json), not derived from source. The
# "non-torch forward increase memory" logged:
# - one GPU: 0.13 GiB in 0.15.0-0.17.0 (Qwen3-14B); 0.24-0.27 GiB in 0.18.0 and 0.19.0 on every
#   model but IBM Granite (0.46), because from 0.18.0 determine_available_memory calls
#   profile_cudagraph_memory inside the memory_profiling window (0.18.0 / 0.19.0 sdists,
#   vllm/v1/worker/gpu_worker.py; 0.17.0's does not), whose graph captures leave driver memory
#   behind;
# - pipeline parallel (TP 1, PP 2 / 4, Llama-3.1-8B): 0.07 GiB on every rank;
# - tensor parallel: 2.06-2.11 GiB at TP 2 (8 runs), 2.13-2.21 GiB at TP 4 (5 runs): the
#   init snapshot is taken after NCCL's set-up (gpu_worker.init_device), so this is what the
#   first collectives, the custom all-reduce and FlashInfer's all-reduce-fusion workspaces
#   (0.19.0 logs: "Initialized FlashInfer All Reduce workspace") allocate; their sizes are set
#   inside NCCL / FlashInfer, not by vLLM, so kvcalc takes the medians.
# Other GPUs, TP > 4 and TP x PP are not covered by these runs: the same values are used.
NON_TORCH_LLMD_FROM = (0, 15, 0)
NON_TORCH_AFTER_NCCL_V1_FROM = (0, 11, 0)  # pcie_non_torch_increase_bytes
NON_TORCH_LLMD_UNTIL = (0, 20, 0)
NON_TORCH_HOLDS_CUDAGRAPH_PROFILE_FROM = (0, 18, 0)
NON_TORCH_LLMD_ONE_GPU = round(0.13 * GIB)
NON_TORCH_LLMD_ONE_GPU_GRAPHS = round(0.25 * GIB)
NON_TORCH_LLMD_PP = round(0.07 * GIB)
NON_TORCH_LLMD_TP2 = round(2.07 * GIB)
NON_TORCH_LLMD_TP4 = round(2.17 * GIB)


def non_torch_bytes(tp: int, pp: int) -> int:
    """calc.capacity's reserve for memory torch does not allocate (one GPU / several)."""
    return (
        DEFAULT_RUNTIME_RESERVE_BYTES if tp * pp == 1 else DEFAULT_RUNTIME_RESERVE_MULTI_GPU_BYTES
    )


def vllm_non_torch_bytes(config, hw=None) -> int:
    """The non-torch term of vLLM's sum on one GPU: the profile run's increase from the
    releases that count from a baseline (NON_TORCH_INCREASE_*_FROM), else calc.capacity's
    reserve for all memory outside torch. vLLM V1 0.15.0-0.19.x on an H100: the llm-d-planner
    calibration (NON_TORCH_LLMD_*)."""
    tp, pp = config.tensor_parallel_size, config.pipeline_parallel_size
    v = config.version_tuple
    if _llmd_release(config):
        graphs = _holds_graph_profile(config)
        if tp == 1 and pp == 1:
            return one_gpu_increase_bytes(config)
        if tp == 1 and graphs:
            return NON_TORCH_LLMD_PP
        if tp > 1 and graphs and (hw is None or nvswitch(hw)):
            return NON_TORCH_LLMD_TP2 if tp == 2 else NON_TORCH_LLMD_TP4
    if not config.is_v1 and v < NON_TORCH_INCREASE_V0_FROM:
        # up to 0.6.4, V0's non_torch_memory was every byte in use outside torch's allocations
        # (mem_get_info's used - torch's allocated; vllm PR #10511 counted from a baseline from
        # 0.6.5): the CUDA context and the TP group's NCCL / custom all-reduce buffers, as
        # calc.serving.sglang_memory models them for SGLang's start-up (same code lineage)
        return sglang_init_used_bytes(tp * pp, hw)
    start = NON_TORCH_INCREASE_V1_FROM if config.is_v1 else NON_TORCH_INCREASE_V0_FROM
    if tp * pp == 1 and v >= start:
        return NON_TORCH_INCREASE_BYTES
    if v >= start and hw is not None and not nvswitch(hw):
        return pcie_non_torch_increase_bytes(config, hw)
    return non_torch_bytes(tp, pp)


def pcie_non_torch_increase_bytes(config, hw) -> int:
    """The profile run's non-torch increase with several GPUs that no NVSwitch joins (PCIe, or
    NVLink bridges between pairs): the one-GPU increase, plus NCCL's buffers
    (NCCL_PCIE_INCREASE_BYTES) where the releases' memory snapshot precedes the distributed
    set-up. V0 from 0.6.5 and V1 0.9.1-0.10.2 take it first (worker.py /
    v1/worker/gpu_worker.py init_device: `self.baseline_snapshot` / `self.init_snapshot =
    MemorySnapshot()` before init_worker_distributed_environment, PyPI sdists 0.7.2, 0.9.2,
    0.10.2); V1 0.11.0 moved it after ("Now take memory snapshot after NCCL is initialized",
    0.11.0 sdist), so NCCL's buffers are no longer in the increase. NVSwitch systems keep the
    calibrated 2 GiB-class figures: NCCL's NVLink SHARP buffers."""
    v, tp, pp = config.version_tuple, config.tensor_parallel_size, config.pipeline_parallel_size
    before_nccl = not config.is_v1 or v < NON_TORCH_AFTER_NCCL_V1_FROM
    nccl = NCCL_PCIE_INCREASE_BYTES if before_nccl and tp * pp > 1 else 0
    return one_gpu_increase_bytes(config) + nccl


def _llmd_release(config) -> bool:
    """A V1 release the llm-d-planner calibration covers (NON_TORCH_LLMD_*)."""
    return config.is_v1 and NON_TORCH_LLMD_FROM <= config.version_tuple < NON_TORCH_LLMD_UNTIL


def _holds_graph_profile(config) -> bool:
    """The memory-profiling window holds the CUDA-graph profile's captures (0.18.0 on)."""
    v = config.version_tuple
    return v >= NON_TORCH_HOLDS_CUDAGRAPH_PROFILE_FROM and not config.enforce_eager


def one_gpu_increase_bytes(config) -> int:
    """The profile run's non-torch increase on one GPU: llm-d-planner's calibration in the
    releases it covers, else NON_TORCH_INCREASE_BYTES."""
    if _llmd_release(config):
        graphs = _holds_graph_profile(config)
        return NON_TORCH_LLMD_ONE_GPU_GRAPHS if graphs else NON_TORCH_LLMD_ONE_GPU
    return NON_TORCH_INCREASE_BYTES
