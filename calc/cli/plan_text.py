"""`kvcalc plan` as text: a Plan (calc.plan) printed for people, every size in GB and GiB, every
latency in the unit that fits it (ms, s, min, h, days). Called by calc.cli.plan."""

from __future__ import annotations

from calc.cli.output import print_pairs


def print_plan(p, spec, hw) -> None:
    """Memory per GPU, the KV cache, and (when it fits) the roofline latency."""
    from calc.units import fmt_bytes, fmt_duration, group

    m, r = p.memory, p.roofline
    print(
        f"{spec.label} on {m.gpus} x {hw.label} (tp={m.tp}, pp={m.pp}), "
        f"weights {m.weight_dtype}, KV cache {m.kv_dtype}"
    )
    print("memory per GPU (GB = 10^9 B, GiB = 2^30 B)")
    total_src = hw.total_memory_source
    if total_src == "nominal":
        total_src = f"nominal {hw.memory_published or ''}"
    print_pairs(
        [
            (f"total ({total_src.strip()})", fmt_bytes(m.total_memory_bytes)),
            (
                f"budget (x gpu_memory_utilization {m.gpu_memory_utilization})",
                fmt_bytes(m.budget_bytes),
            ),
            (f"weights ({m.weight_dtype})", fmt_bytes(m.weight_bytes)),
            (
                f"activations ({group(m.max_num_batched_tokens)}-token prefill chunk)",
                fmt_bytes(m.activation_bytes),
            ),
            ("runtime reserve", fmt_bytes(m.reserve_bytes)),
            ("KV-cache pool (budget - the above)", fmt_bytes(m.kv_budget_bytes)),
            (
                f"KV cache of the target ({m.batch} x {group(m.seq_len)} tokens)",
                fmt_bytes(m.kv_cache_bytes),
            ),
            ("free (total - weights - activations - reserve - target)", fmt_bytes(m.free_bytes)),
        ]
    )
    print("KV cache")
    rep = f", each replicated x{m.kv_replication} (tp > KV heads)" if m.kv_replication > 1 else ""
    ctx = "unbounded" if m.max_context_tokens is None else f"{group(m.max_context_tokens)} tokens"
    print_pairs(
        [
            ("KV heads per GPU", f"{m.kv_heads_per_gpu} of {spec.n_kv_heads}{rep}"),
            ("per token per GPU", fmt_bytes(m.kv_bytes_per_token)),
            (
                f"blocks of {m.block_size} tokens",
                f"{group(m.kv_blocks)} ({group(m.kv_tokens)} tokens)",
            ),
            (
                f"max concurrent sequences of {group(m.seq_len)} tokens",
                group(m.max_concurrent_seqs),
            ),
            (
                f"max context at batch {m.batch}",
                f"{ctx} (model context {group(m.model_context_tokens)})",
            ),
        ]
    )
    if not p.fits:  # a latency for a deployment that cannot run is not a result
        print("latency: not estimated, the target does not fit (below); `--json` has the roofline")
        print(p.memory.message)
        return
    print(
        f"latency (roofline: mfu {r.mfu}, bandwidth efficiency {r.bandwidth_efficiency}, "
        f"{r.compute_dtype} peak {r.peak_flops_per_s / 1e12:,.1f} TFLOP/s dense, "
        f"ridge {r.ridge_flops_per_byte:,.0f} FLOP/B)"
    )
    print_pairs(
        [
            (
                f"TTFT ({group(r.prompt_tokens)}-token prompt)",
                f"{fmt_duration(r.ttft_s)}, {r.prefill.bound}-bound "
                f"({r.prefill.arithmetic_intensity:,.0f} FLOP/B)",
            ),
            (
                f"TPOT (mean over {group(r.output_tokens)} output tokens)",
                f"{fmt_duration(r.tpot_s)}, {r.decode_last.bound}-bound "
                f"({r.decode_last.arithmetic_intensity:,.1f} FLOP/B at the last step)",
            ),
            ("all-reduce time per decode step", fmt_duration(r.decode_first.comm_s)),
            ("tokens/s per sequence", f"{r.tokens_per_s_per_seq:,.1f}"),
            (f"tokens/s total (batch {r.batch})", f"{r.tokens_per_s_total:,.1f}"),
            ("end to end", fmt_duration(r.e2e_s)),
        ]
    )
    print(p.memory.message)
