"""The non-KV terms of vLLM's available-memory sum, per GPU: the profile run's activation peak,
the non-torch memory and (from 0.20.0) the CUDA-graph estimate; SGLang's start-up reserve.

Formulas live in calc.serving.memory (vLLM V0's eager profile peak) and calc.capacity (the
generic estimate every other case uses); this module picks which applies to a config.
"""

from __future__ import annotations

from calc.capacity import (
    DEFAULT_RUNTIME_RESERVE_BYTES,
    DEFAULT_RUNTIME_RESERVE_MULTI_GPU_BYTES,
    SAMPLER_BYTES_PER_LOGIT,
    activation_bytes_per_gpu,
    activation_dtype,
)
from calc.dtypes import dtype_bits
from calc.serving import memory as m
from calc.sharding import kv_heads_per_gpu

GIB = 2**30
# Worker.determine_available_memory subtracts the CUDA-graph estimate when
# VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS is set: the variable is absent in 0.17.0, "0" (opt-in,
# vllm PR #30515) in 0.18.0 and 0.19.0, "1" from 0.20.0 (vllm PR #38284), read in the PyPI sdists
# of each (vllm/envs.py, vllm/v1/worker/gpu_worker.py). vLLM's own log line says "default since
# v0.21.0", but the 0.20.0 release already ships the "1" default (and gpu_memory_utilization 0.92).
CUDAGRAPH_SUBTRACTED_FROM = (0, 20, 0)


def non_torch_bytes(tp: int, pp: int) -> int:
    """calc.capacity's reserve for memory torch does not allocate (one GPU / several)."""
    return (
        DEFAULT_RUNTIME_RESERVE_BYTES if tp * pp == 1 else DEFAULT_RUNTIME_RESERVE_MULTI_GPU_BYTES
    )


def _v0_dense(spec, config) -> bool:
    """vLLM V0 (eager) on a dense gated-MLP model without MLA: memory.vllm_v0_profile_peak_bytes
    applies; other models keep calc.capacity's estimate."""
    return (
        config.engine == "vllm"
        and not config.is_v1
        and not spec.is_moe
        and not spec.is_mla
        and spec.mlp_kind == "gated"
    )


def overheads(spec, config, wd, calibration):
    """(activation, non-torch, CUDA graphs) per GPU: calibrated, or estimated."""
    cal = calibration or {}
    tp, pp = config.tensor_parallel_size, config.pipeline_parallel_size
    if "non_kv_overhead_bytes" in cal:
        return int(cal["non_kv_overhead_bytes"]), 0, 0
    if "activation_bytes_per_batched_token" in cal:
        act = int(cal["activation_bytes_per_batched_token"] * config.max_num_batched_tokens)
        return act, int(cal["non_torch_bytes"]), 0
    act = activation_bytes_per_gpu(
        spec, tp, config.max_num_batched_tokens, config.max_num_seqs, activation_dtype(wd)
    )
    if _v0_dense(spec, config):  # the eager V0 profile run, written out from vLLM's forward
        a = dtype_bits(activation_dtype(wd)) // 8
        d = spec.head_dim
        forward = m.vllm_v0_profile_peak_bytes(
            config.max_num_batched_tokens,
            spec.hidden_size,
            spec.num_attention_heads // tp * d,
            kv_heads_per_gpu(spec, tp) * d,
            -(-spec.intermediate_size // tp),
            a,
        )
        sampler = min(config.max_num_batched_tokens, config.max_num_seqs) * spec.vocab_size
        act = max(forward, sampler * SAMPLER_BYTES_PER_LOGIT)
    cg = 0
    if config.version_tuple >= CUDAGRAPH_SUBTRACTED_FROM and not config.enforce_eager:
        cg = int(config.cudagraph_memory_gib * GIB)
    return act, non_torch_bytes(tp, pp), cg
