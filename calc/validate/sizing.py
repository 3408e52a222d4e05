"""How big the KV-cache and peak-memory runs of calc.validate.runner are on a device.

Sliding windows and attention chunks (Llama 4), "window" below: a second KV run goes past the
window, unless the first run's 64 tokens already did. When the prefill of `window` tokens at
full attention width would cost more than CPU_WINDOW_FLOP_BUDGET / CUDA_WINDOW_FLOP_BUDGET
FLOPs (on CPU: every preset's 4096-token window) or, on CUDA, its scores would need more than a
quarter of the free memory, that run uses the same model with a 32-token window, and says so.
"""

from __future__ import annotations

from calc.spec import ModelSpec

CPU_PEAK_SEQ_LENS = (256, 512, 1024, 2048)
CUDA_PEAK_SEQ_LENS = (512, 1024, 2048, 4096, 8192)
CPU_KV_MAX_PARAMS = 1 << 22  # 4.2M parameters: ~17 MB in fp32
CPU_WINDOW_FLOP_BUDGET = 10**10
CUDA_WINDOW_FLOP_BUDGET = 10**14
SMALL_WINDOW = 32
FIRST_KV_TOKENS = 64  # check_kv's default prefill + decode


def kv_budget(spec: ModelSpec, device: str, dtype: str, cuda: bool) -> int:
    if not cuda:
        return CPU_KV_MAX_PARAMS
    from calc.dtypes import dtype_bits
    from calc.validate.measure import cuda_free_bytes

    # weights twice over (weights + activations + logits of a short run), a quarter of free
    return cuda_free_bytes(device) // 4 // (2 * dtype_bits(dtype) // 8)


def kv_rows(spec, claim, device, dtype, cuda) -> list:
    from calc.attention import forward_flops_prefill
    from calc.validate import reduce
    from calc.validate.checks import check_kv

    budget = kv_budget(spec, device, dtype, cuda)
    rows = check_kv(spec, claim, device, dtype, max_params=budget)
    kinds = spec.attention_counts
    field = "sliding_window" if "sliding_attention" in kinds else "attention_chunk_size"
    w = getattr(spec, field) if {"sliding_attention", "chunked_attention"} & set(kinds) else None
    if w is None or w <= FIRST_KV_TOKENS:  # none, or the first run already went past it
        return rows
    word = "window" if field == "sliding_window" else "chunk"
    small = reduce.kv_spec(spec, budget)
    limit = CUDA_WINDOW_FLOP_BUDGET if cuda else CPU_WINDOW_FLOP_BUDGET
    flops_ok = forward_flops_prefill(small, w + 8, causal=False) <= limit
    if flops_ok and cuda:  # the materialized prefill holds 2 score matrices per layer at once
        from calc.attention import score_matrix_bytes
        from calc.validate.measure import cuda_free_bytes

        need = 2 * score_matrix_bytes(small, w + 8, 2, dtype)  # batch 2, as check_kv runs
        flops_ok = need <= cuda_free_bytes(device) // 4
    if flops_ok:
        return rows + check_kv(
            spec,
            claim,
            device,
            dtype,
            max_params=budget,
            prefill=w - 8,
            decode=16,
            note=f"past the {w}-token {word} while decoding",
        )
    s, c = spec.replace(**{field: SMALL_WINDOW}), claim.replace(**{field: SMALL_WINDOW})
    return rows + check_kv(
        s,
        c,
        device,
        dtype,
        max_params=budget,
        prefill=SMALL_WINDOW + 8,
        decode=16,
        note=(
            f"{word} reduced from {w} to {SMALL_WINDOW} tokens (a {w}-token prefill at full "
            f"attention width exceeds this device's budget of {limit:.0e} FLOPs or a quarter "
            "of its free memory)"
        ),
    )


def peak_size(spec: ModelSpec, device: str, dtype: str, cuda: bool):
    """(max query heads, lengths): CPU 4 heads; CUDA as many heads as a quarter of free fits."""
    if not cuda:
        return 4, CPU_PEAK_SEQ_LENS
    from calc.validate import peak_model, reduce
    from calc.validate.measure import cuda_free_bytes

    budget = cuda_free_bytes(device) // 4
    lens = CUDA_PEAK_SEQ_LENS
    heads = spec.num_attention_heads
    while True:
        small = reduce.attention_spec(spec, heads)
        peak, _, _ = peak_model.predicted_peak(
            small, lens[-1], 1, dtype, "materialized", device="cuda"
        )
        if peak <= budget:
            return heads, lens
        if heads > 1:
            heads //= 2
        elif len(lens) > 4:
            lens = lens[:-1]
        else:
            raise ValueError(f"not enough free GPU memory for a {lens[-1]}-token attention layer")
