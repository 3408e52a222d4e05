"""vLLM's non-torch term with several GPUs that no NVSwitch joins
(calc.serving.non_torch.pcie_non_torch_increase_bytes).

Where the memory snapshot is taken, read in the PyPI sdists: V0 0.7.2 vllm/worker/worker.py and
V1 0.9.2 / 0.10.2 vllm/v1/worker/gpu_worker.py init_device take it before
init_worker_distributed_environment (NCCL's buffers fall in the profile's non-torch increase);
V1 0.11.0 takes it after ("Now take memory snapshot after NCCL is initialized").
"""

from __future__ import annotations

from calc.serving.evidence import evaluate, load_cases
from calc.serving.plan import GIB, engine_plan

LOGS = "benchmarks/engine_logs"


def _nt(gpu: str, version: str, tp: int) -> float:
    p = engine_plan("llama-3.1-8b", gpu, version=version, tensor_parallel_size=tp)
    return p.non_torch_bytes / GIB


def test_snapshot_before_nccl_counts_nccl_on_pcie():
    # CALIBRATION (non_torch.NCCL_PCIE_INCREASE_BYTES): vllm#13061 (0.7.2, 2 x RTX 4090), the
    # issue body quotes its TP worker: "non_torch_memory takes 0.25GiB" = 0.1 (one GPU) + 0.15
    assert abs(_nt("rtx-4090", "0.7.2", 2) - 0.25) < 1e-6
    # V1 0.9.1-0.10.2 take the snapshot before NCCL too; the group size does not scale it
    assert abs(_nt("l40s", "0.10.2", 4) - 0.25) < 1e-6


def test_pr14447_rtx3090_tp16_held_out():
    # vllm PR #14447 (V0 0.8.3, 16 x RTX 3090, TP 16): every worker prints "non_torch_memory
    # takes 0.20GiB"; not used to fit. SGLang's 0.065 GiB x (16 + 2) would add 1.17 GiB.
    assert abs(_nt("rtx-3090", "0.7.3", 16) - 0.20) <= 0.1
    (case,) = [c for c in load_cases(LOGS) if c["id"] == "vllm-pr14447-deepseek-v3-awq-3090-tp16"]
    (check,) = [c for c in evaluate(case) if c.figure == "non_torch_gib"]
    assert check.logged == 0.20 and check.verdict == "within target", check.note


def test_snapshot_after_nccl_leaves_only_the_one_gpu_increase():
    assert abs(_nt("l40s", "0.11.0", 2) - 0.1) < 1e-6
    # 0.19.0 holds the CUDA-graph profile too: llm-d's one-GPU figure, 0.25 GiB
    assert abs(_nt("l40s", "0.19.0", 2) - 0.25) < 0.001


def test_nvswitch_keeps_nvls_class_figures():
    assert _nt("h100-sxm", "0.11.0", 2) == 2.0  # calc.capacity's multi-GPU reserve
    assert abs(_nt("h100-sxm", "0.19.0", 2) - 2.07) < 0.001  # llm-d's TP 2 median


def test_vllm_13061_rtx4090_tp2_from_first_principles():
    # vllm#13061 (0.7.2, 2 x RTX 4090): "maximum number of tokens that can be stored in KV cache
    # (81536)" = 5096 blocks of 16 tokens x 48 layers x 2 x 4 KV heads x 128 x 2 B = 7.4656 GiB
    (case,) = [c for c in load_cases(LOGS) if c["id"] == "vllm-13061-r1-distill-qwen-14b-tp2"]
    checks = [c for c in evaluate(case) if c.figure == "available_kv_cache_gib"]
    (check,) = checks
    assert abs(check.logged - (5096 + 0.5) * 16 * 48 * 2 * 4 * 128 * 2 / GIB) < 1e-4
    assert check.verdict == "within target", check.note
