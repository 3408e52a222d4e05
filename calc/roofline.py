"""Roofline latency: how long a prefill and each decode step take, per GPU of a TP group.

Each phase costs max(compute time, memory time) + communication time (Williams et al. 2009,
"Roofline"; communication is not overlapped with compute here):
- compute time = FLOPs / tp / (dense peak of the compute dtype x mfu); FLOPs as
  calc.attention counts them (2 per multiply-add, causal attention pairs, LM head included);
- memory time = bytes read and written / (HBM bandwidth x bandwidth_efficiency), the bytes
  being this GPU's weights (for MoE only the experts the tokens are routed to: with n tokens
  and uniform routing, E x (1 - (1 - k/E)^n) experts per layer are touched) plus the KV cache
  it reads (every cached token, capped at the window on sliding layers) and writes;
- communication = all-reduces of the activations (Megatron-LM: 2 per layer, 1 for a parallel
  attention+MLP block, and 1 for the vocab-parallel embedding), each a ring all-reduce of
  2 (tp - 1) / tp x bytes over one direction of the interconnect, plus a fixed latency.
Prefill (TTFT) runs the prompt once; decoding sums one step per generated token after the
first, at the context each step actually sees (prompt + 1, prompt + 2, ...), in closed form.
Pipeline stages run one after another for a sequence, so a token's latency is that of pp = 1
with the same tp (hand-offs between stages and micro-batch pipelining are not modelled).

But: no kernel-launch, scheduling or sampling overhead (real engines add 5-30% at small
batches, far more at high tp), no prefill chunking, no speculative decoding; activations are
assumed to stay on chip.

>>> r = roofline("llama-2-7b", "a100-80gb", prompt_tokens=128, output_tokens=20)
>>> r.decode_first.bound, round(r.ridge_flops_per_byte)
('memory', 153)
"""

from __future__ import annotations

from calc import plan_core as core
from calc.activation import activation_dtype, kv_bytes_per_token_layer_gpu
from calc.attention import prefill_attention_flops
from calc.dtypes import canonical_dtype, dtype_bits
from calc.errors import check_count, check_fraction, check_non_negative
from calc.hardware import HardwareSpec, resolve_hardware
from calc.layers import KINDS
from calc.params import matmul_params
from calc.presets import resolve_model
from calc.results import Result
from calc.sharding import (
    DEFAULT_GROUP_SIZE,
    DEFAULT_SCALE_BYTES,
    check_parallel,
    weight_bytes_per_gpu,
)
from calc.spec import ModelSpec

# --- defaults, each with its reason -----------------------------------------------------------
# Model FLOPs utilization of a prefill: large GEMMs reach 60-80% of dense peak, attention and
# the rest less; PaLM reports 46% MFU end to end for training (Chowdhery et al. 2022, Table 3),
# FlashAttention-2 50-73% for attention forward (Dao 2023). 0.5 is the middle.
DEFAULT_MFU = 0.5
# Fraction of the HBM bandwidth a decode step streams at: memory-bound kernels reach 80-90% of
# peak in copy benchmarks; engines report model-bandwidth utilization of 60-80% at batch 1.
DEFAULT_BANDWIDTH_EFFICIENCY = 0.8
# NCCL's large-message all-reduce bus bandwidth reaches ~80% of the NVLink per-direction rate
# (nccl-tests all_reduce_perf on 8x H100: ~360-480 GB/s busbw of 450 GB/s).
DEFAULT_INTERCONNECT_EFFICIENCY = 0.8
# A small all-reduce costs ~5-20 us on NVLink (NCCL ring/tree, vLLM's custom all-reduce at the
# low end); 10 us per call.
DEFAULT_ALLREDUCE_LATENCY_S = 10e-6


class PhaseCost(Result):
    """One phase on one GPU: a prefill, or one decode step."""

    phase: str
    context_tokens: int  # tokens attended to (prompt for prefill, cache length for decode)
    flops: float  # per GPU
    bytes: float  # per GPU, HBM traffic
    compute_s: float
    memory_s: float
    comm_s: float
    time_s: float  # max(compute_s, memory_s) + comm_s
    arithmetic_intensity: float  # flops / bytes, FLOP per byte
    bound: str  # "compute" or "memory"


class Roofline(Result):
    model: str
    gpu: str
    tp: int
    pp: int
    batch: int
    prompt_tokens: int
    output_tokens: int
    weight_dtype: str
    kv_dtype: str
    compute_dtype: str
    peak_flops_per_s: float  # dense, of compute_dtype
    bandwidth_bytes_per_s: float
    ridge_flops_per_byte: float  # peak / bandwidth
    mfu: float
    bandwidth_efficiency: float
    interconnect_efficiency: float
    allreduce_latency_s: float
    allreduces_per_step: int
    prefill: PhaseCost
    decode_first: PhaseCost  # the step at context prompt + 1
    decode_last: PhaseCost  # the step at context prompt + output - 1
    ttft_s: float  # prefill time: the first output token comes out of the prefill
    decode_s: float  # all output_tokens - 1 decode steps
    tpot_s: float  # mean decode step (decode_first when output_tokens == 1)
    e2e_s: float  # ttft_s + decode_s
    tokens_per_s_per_seq: float  # 1 / tpot_s
    tokens_per_s_total: float  # batch / tpot_s

    def to_frame(self):
        """One row per phase: prefill, decode_first, decode_last."""
        import pandas as pd

        return pd.DataFrame(
            [p.model_dump() for p in (self.prefill, self.decode_first, self.decode_last)]
        )


def default_compute_dtype(weight_dtype: str, hw: HardwareSpec) -> str:
    """The dtype the matmuls run in: the weights' for 16/32-bit; fp8 and int8 run natively
    (W8A8) where the GPU has the units, else as weight-only kernels (W8A16) in bf16; int4 is
    weight-only (W4A16, Marlin / AWQ kernels dequantize to 16-bit)."""
    wd = canonical_dtype(weight_dtype)
    if wd in ("fp32", "bf16", "fp16"):
        return wd
    native = "fp8" if wd.startswith("fp8") else wd
    if wd != "int4" and hw.has_peak(native):
        return native
    return "bf16" if hw.has_peak("bf16") else "fp16"


def allreduces_per_step(spec: ModelSpec) -> int:
    """Row-parallel outputs to sum per forward: attention and MLP per layer (one for a parallel
    block, which adds them first), plus the vocab-parallel embedding."""
    per_layer = 1 if spec.block_kind == "parallel" else 2
    return per_layer * spec.num_hidden_layers + 1


def experts_touched(spec: ModelSpec, tokens: int) -> float:
    """Expected distinct experts per layer that `tokens` tokens are routed to (uniform routing)."""
    return core.experts_touched(spec.num_local_experts, spec.num_experts_per_tok, tokens)


def _phase(name: str, ctx: int, p: dict) -> PhaseCost:
    """A PhaseCost from calc.plan_core.phase's figures."""
    return PhaseCost(
        phase=name,
        context_tokens=ctx,
        flops=p["flops"],
        bytes=p["bytes"],
        compute_s=p["compute_s"],
        memory_s=p["memory_s"],
        comm_s=p["comm_s"],
        time_s=p["time_s"],
        arithmetic_intensity=p["flops"] / p["bytes"] if p["bytes"] else float("inf"),
        bound="compute" if p["compute_bound"] else "memory",
    )


def roofline(
    model: str | ModelSpec,
    gpu: str | HardwareSpec,
    *,
    tp: int = 1,
    pp: int = 1,
    batch: int = 1,
    prompt_tokens: int,
    output_tokens: int,
    weight_dtype: str = "bf16",
    kv_dtype: str = "bf16",
    compute_dtype: str | None = None,
    group_size: int = DEFAULT_GROUP_SIZE,
    scale_bytes: int = DEFAULT_SCALE_BYTES,
    zero_point_bits: int = 0,
    mfu: float = DEFAULT_MFU,
    bandwidth_efficiency: float = DEFAULT_BANDWIDTH_EFFICIENCY,
    interconnect_efficiency: float = DEFAULT_INTERCONNECT_EFFICIENCY,
    allreduce_latency_s: float = DEFAULT_ALLREDUCE_LATENCY_S,
) -> Roofline:
    """TTFT, TPOT and throughput of `batch` sequences: a prompt, then `output_tokens` tokens."""
    spec, hw = resolve_model(model), resolve_hardware(gpu)
    tp, pp = check_parallel(spec, tp, pp)
    B = check_count("batch", batch)
    P = check_count("prompt_tokens", prompt_tokens)
    n_out = check_count("output_tokens", output_tokens)
    wd, kd = canonical_dtype(weight_dtype), canonical_dtype(kv_dtype)
    cd = default_compute_dtype(wd, hw) if compute_dtype is None else compute_dtype
    mfu = check_fraction("mfu", mfu)
    eff = check_fraction("bandwidth_efficiency", bandwidth_efficiency)
    ieff = check_fraction("interconnect_efficiency", interconnect_efficiency)
    lat = check_non_negative("allreduce_latency_s", allreduce_latency_s)

    peak = hw.peak_flops_per_s(cd)
    bw = hw.hbm_bandwidth_bytes_per_s
    # weights one TP rank reads per forward, all pipeline stages together
    wb = weight_bytes_per_gpu(spec, tp, 1, wd, group_size, scale_bytes, zero_point_bits)
    n_ar = allreduces_per_step(spec)
    r = core.latency(
        tp=tp,
        batch=B,
        prompt_tokens=P,
        output_tokens=n_out,
        weights=sum(wb.values()),
        expert_weights=wb["mlp"],
        num_experts=spec.num_local_experts,
        experts_per_token=spec.num_experts_per_tok,
        matmul_params=matmul_params(spec),
        flops_per_pair=KINDS["full_attention"].flops_per_pair(spec),
        prefill_attention_flops=prefill_attention_flops(spec, P),
        layers=spec.num_hidden_layers,
        lf=spec.n_full_layers,
        ls=spec.n_sliding_layers,
        window=spec.sliding_window or 0,
        kv_bytes_per_layer=kv_bytes_per_token_layer_gpu(spec, tp, kd),
        hidden=spec.hidden_size,
        act_bytes=dtype_bits(activation_dtype(wd)) // 8,
        allreduces=n_ar,
        peak=peak * mfu,
        bandwidth=bw * eff,
        link=hw.interconnect_bytes_per_s * ieff,
        latency_s=lat,
    )
    prefill = _phase("prefill", P, r["prefill"])
    decode_first = _phase("decode_first", r["decode_first_context"], r["decode_first"])
    decode_last = _phase("decode_last", r["decode_last_context"], r["decode_last"])
    return Roofline(
        model=spec.name,
        gpu=hw.name,
        tp=tp,
        pp=pp,
        batch=B,
        prompt_tokens=P,
        output_tokens=n_out,
        weight_dtype=wd,
        kv_dtype=kd,
        compute_dtype=cd,
        peak_flops_per_s=peak,
        bandwidth_bytes_per_s=bw,
        ridge_flops_per_byte=peak / bw,
        mfu=mfu,
        bandwidth_efficiency=eff,
        interconnect_efficiency=ieff,
        allreduce_latency_s=lat,
        allreduces_per_step=n_ar,
        prefill=prefill,
        decode_first=decode_first,
        decode_last=decode_last,
        ttft_s=r["ttft_s"],
        decode_s=r["decode_s"],
        tpot_s=r["tpot_s"],
        e2e_s=r["e2e_s"],
        tokens_per_s_per_seq=r["tokens_per_s_per_seq"],
        tokens_per_s_total=r["tokens_per_s_total"],
    )
