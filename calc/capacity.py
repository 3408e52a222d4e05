"""Memory plan: what each GPU holds when a model is served, and how many sequences fit.

Per GPU, vLLM's accounting (vllm/v1/worker/gpu_worker.py, `determine_available_memory`):
  budget    = total memory x gpu_memory_utilization
  kv_budget = budget - weights - activation peak - runtime reserve
  kv_blocks = floor(kv_budget / block bytes); a block is `block_size` tokens of K and V in every
              layer the GPU holds, for the KV heads it holds.

Weights per GPU, and the rules for splitting a model across tensor- and pipeline-parallel
GPUs (which tp a model allows, KV-head replication, weight dtypes), are calc.sharding.

The arithmetic is calc.plan_core.memory, which calc.plan_sweep evaluates over whole grids.
But: no prefix caching, no swap space, no speculative decoding, no LoRA adapters; the
activation peak is a formula (see `activation_bytes_per_gpu`), not a profile run. The search
for the fewest GPUs that hold a target is calc.fit.

>>> p = memory_plan("llama-2-7b", "a100-80gb", seq_len=4096)
>>> p.kv_block_bytes   # 16 tokens x 32 layers x 2 (K, V) x 32 heads x 128 x 2 B
8388608
"""

from __future__ import annotations

from calc import plan_core as core
from calc.activation import (  # noqa: F401 (re-exported: calc.capacity is their public home)
    DEFAULT_BLOCK_SIZE,
    DEFAULT_GPU_MEMORY_UTILIZATION,
    DEFAULT_MAX_NUM_BATCHED_TOKENS,
    DEFAULT_MAX_NUM_SEQS,
    DEFAULT_RUNTIME_RESERVE_BYTES,
    DEFAULT_RUNTIME_RESERVE_MULTI_GPU_BYTES,
    SAMPLER_BYTES_PER_LOGIT,
    activation_bytes_per_gpu,
    activation_dtype,
    forward_activation_bytes,
    kv_bytes_per_token_layer_gpu,
    kv_layers_per_gpu,
    reserve_bytes_per_gpu,
)
from calc.dtypes import canonical_dtype
from calc.errors import check_count, check_fraction
from calc.hardware import HardwareSpec, resolve_hardware
from calc.presets import resolve_model
from calc.results import Result
from calc.sharding import (
    DEFAULT_GROUP_SIZE,
    DEFAULT_SCALE_BYTES,
    check_parallel,
    kv_heads_per_gpu,
    kv_replication,
    weight_bytes_per_gpu,
)
from calc.spec import ModelSpec

GIB = 2**30

# --- results ----------------------------------------------------------------------------------


class MemoryPlan(Result):
    """Per-GPU memory of one deployment, and what fits in it. Sizes in bytes, per GPU."""

    model: str
    gpu: str
    gpus: int
    tp: int
    pp: int
    weight_dtype: str
    kv_dtype: str
    seq_len: int  # tokens per sequence (prompt + output) of the target
    batch: int  # concurrent sequences of the target
    gpu_memory_utilization: float
    block_size: int
    max_num_batched_tokens: int
    total_memory_bytes: int  # what the GPU exposes (nvidia-smi total, or the nominal size)
    budget_bytes: int  # total x gpu_memory_utilization
    weight_bytes: int
    weight_breakdown_bytes: dict[str, int]  # component -> bytes (calc.params.COMPONENTS)
    activation_bytes: int
    reserve_bytes: int
    kv_budget_bytes: int  # budget - weights - activations - reserve (negative: no room)
    kv_heads_per_gpu: int
    kv_replication: int  # copies of each KV head across the TP group (> 1 when tp > G)
    kv_bytes_per_token: int  # all this GPU's layers, before sliding windows cap them
    kv_block_bytes: int
    kv_blocks: int
    kv_tokens: int  # kv_blocks x block_size
    seq_kv_bytes: int  # one target sequence, whole blocks
    kv_cache_bytes: int  # the target: batch x seq_kv_bytes
    free_bytes: int  # total - weights - activations - reserve - target KV
    max_concurrent_seqs: int  # sequences of seq_len that fit at once
    max_context_tokens: int | None  # longest context for `batch` sequences (None: unbounded)
    model_context_tokens: int  # the model's max_position_embeddings, for comparison
    fits: bool  # batch x seq_len fits
    shortfall_bytes: int  # budget missing per GPU for the target (0 when it fits)
    message: str

    def to_frame(self):
        """One row per category of the per-GPU breakdown (the stacked-bar data)."""
        import pandas as pd

        kv_spare = max(0, self.kv_budget_bytes - self.kv_cache_bytes)
        rows = [
            ("weights", self.weight_bytes),
            ("kv_cache", self.kv_cache_bytes),
            ("kv_spare", kv_spare),  # the rest of the KV pool vLLM would allocate
            ("activations", self.activation_bytes),
            ("reserve", self.reserve_bytes),
            ("headroom", max(0, self.total_memory_bytes - self.budget_bytes)),
        ]
        return pd.DataFrame(rows, columns=["category", "bytes"])


# --- the plan ---------------------------------------------------------------------------------


_MESSAGE_FIGURES = ("fits", "kv_blocks", "max_concurrent_seqs", "shortfall_bytes")


def _fmt(n: int) -> str:
    from calc.units import iec_bytes, si_bytes

    return f"{si_bytes(n)} ({iec_bytes(n)})"


def memory_plan(
    model: str | ModelSpec,
    gpu: str | HardwareSpec,
    *,
    gpus: int = 1,
    tp: int | None = None,
    seq_len: int | None = None,
    batch: int = 1,
    weight_dtype: str = "bf16",
    kv_dtype: str = "bf16",
    group_size: int = DEFAULT_GROUP_SIZE,
    scale_bytes: int = DEFAULT_SCALE_BYTES,
    zero_point_bits: int = 0,
    gpu_memory_utilization: float = DEFAULT_GPU_MEMORY_UTILIZATION,
    runtime_reserve_bytes: int | None = None,
    max_num_batched_tokens: int = DEFAULT_MAX_NUM_BATCHED_TOKENS,
    max_num_seqs: int = DEFAULT_MAX_NUM_SEQS,
    block_size: int = DEFAULT_BLOCK_SIZE,
) -> MemoryPlan:
    """Per-GPU memory for `model` on `gpus` GPUs of one kind (tp defaults to gpus; pp = gpus / tp).

    `runtime_reserve_bytes` defaults to DEFAULT_RUNTIME_RESERVE_BYTES on one GPU and
    DEFAULT_RUNTIME_RESERVE_MULTI_GPU_BYTES on several (`reserve_bytes_per_gpu`).
    """
    spec, hw = resolve_model(model), resolve_hardware(gpu)
    gpus = check_count("gpus", gpus)
    tp = gpus if tp is None else check_count("tp", tp)
    if gpus % tp:
        raise ValueError(f"'gpus' must be a multiple of tp={tp} (pp = gpus / tp): got {gpus}")
    pp = gpus // tp
    tp, pp = check_parallel(spec, tp, pp)
    n = spec.max_position_embeddings if seq_len is None else check_count("seq_len", seq_len)
    batch = check_count("batch", batch)
    block_size = check_count("block_size", block_size)
    wd, kd = canonical_dtype(weight_dtype), canonical_dtype(kv_dtype)
    u = gpu_memory_utilization
    check_fraction("gpu_memory_utilization", u)  # u itself goes into the plan, as given
    reserve = reserve_bytes_per_gpu(gpus, runtime_reserve_bytes)

    wb = weight_bytes_per_gpu(spec, tp, pp, wd, group_size, scale_bytes, zero_point_bits)
    weights = sum(wb.values())
    act = activation_bytes_per_gpu(
        spec, tp, max_num_batched_tokens, max_num_seqs, activation_dtype(wd)
    )
    total = hw.total_memory_bytes
    lf, ls = kv_layers_per_gpu(spec, pp)
    r = core.memory(
        total=total,
        utilization=u,
        weights=weights,
        activation=act,
        reserve=reserve,
        lf=lf,
        ls=ls,
        window=spec.sliding_window or 0,
        kv_bytes_per_layer=kv_bytes_per_token_layer_gpu(spec, tp, kd),
        block_size=block_size,
        seq_len=n,
        batch=batch,
    )
    fits, blocks, max_seqs, shortfall = (r[k] for k in _MESSAGE_FIGURES)
    max_ctx = None if r["max_context_tokens"] == core.UNBOUNDED else r["max_context_tokens"]
    if fits:
        message = (
            f"fits: {batch} x {n} tokens on {gpus} x {hw.name} (tp={tp}, pp={pp}); "
            f"room for {max_seqs} such sequences ({r['kv_tokens']:,} KV tokens)"
        )
    else:
        message = (
            f"does not fit: needs {_fmt(shortfall)} more per GPU for {batch} x {n} tokens on "
            f"{gpus} x {hw.name} (tp={tp}, pp={pp}, gpu_memory_utilization={u})"
        )
    return MemoryPlan(
        model=spec.name,
        gpu=hw.name,
        gpus=gpus,
        tp=tp,
        pp=pp,
        weight_dtype=wd,
        kv_dtype=kd,
        seq_len=n,
        batch=batch,
        gpu_memory_utilization=u,
        block_size=block_size,
        max_num_batched_tokens=max_num_batched_tokens,
        total_memory_bytes=total,
        budget_bytes=r["budget_bytes"],
        weight_bytes=weights,
        weight_breakdown_bytes=wb,
        activation_bytes=act,
        reserve_bytes=reserve,
        kv_budget_bytes=r["kv_budget_bytes"],
        kv_heads_per_gpu=kv_heads_per_gpu(spec, tp),
        kv_replication=kv_replication(spec, tp),
        kv_bytes_per_token=r["kv_bytes_per_token"],
        kv_block_bytes=r["kv_block_bytes"],
        kv_blocks=blocks,
        kv_tokens=r["kv_tokens"],
        seq_kv_bytes=r["seq_kv_bytes"],
        kv_cache_bytes=r["kv_cache_bytes"],
        free_bytes=r["free_bytes"],
        max_concurrent_seqs=max_seqs,
        max_context_tokens=max_ctx,
        model_context_tokens=spec.max_position_embeddings,
        fits=fits,
        shortfall_bytes=shortfall,
        message=message,
    )
