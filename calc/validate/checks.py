"""The four measured checks. Each builds real modules from `spec`, measures them, and compares
with kvcalc evaluated on `claim` (the same spec, unless a test passes a wrong one on purpose).

1. params: the full model on `meta`; numel per component vs `param_breakdown`. Exact.
2. flops: `FlopCounterMode` over forwards on `meta` (CPU SDPA kernels count 0 FLOPs, and meta
   runs SDPA as its math decomposition, which counts), full mask, vs `forward_flops_prefill(
   causal=False)` and `forward_flops_decode`. Exact. MLA decodes against its latent cache in
   the absorbed form, so its decode step is predicted with `attention_flops_decode(...,
   mla_absorbed=True)` in place of forward_flops_decode's naive attention term.
3. kv_cache: prefill then decode on the device at full attention width and reduced depth;
   bytes of the cache tensors vs `kv_cache_bytes(convention="engine")`, in all and per layer
   kind (linear attention: its state, vs `state_bytes_per_sequence`). Exact (CUDA: after
   512-byte block rounding). The cached decode must also reproduce a full forward's logits.
4. peak_memory: one attention layer at >= 4 lengths, materialized and fused; measured peak vs
   the step-by-step live bytes of `peak_model` (kvcalc's score and fused bytes plus the O(n)
   activations), and the fitted growth exponent in n.
"""

from __future__ import annotations

import math

import torch

import calc
from calc.dtypes import canonical_dtype
from calc.kvcache import kv_cache_group_bytes, state_bytes_per_sequence
from calc.spec import ModelSpec
from calc.validate import measure, peak_model, reduce
from calc.validate.attention import PATHS, GQAAttention
from calc.validate.decoder import build_decoder, numel_by_component
from calc.validate.results import Check

TORCH_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
PEAK_TOLERANCE = {"cpu": 0.01, "cuda": 0.05}  # relative; see the module docstring of peak_model
EXPONENT_TOLERANCE = 0.05  # absolute, on the fitted exponent
# cached decode vs full forward, relative to the largest logit: rounding noise of the dtype
# (bf16 keeps 8 significant bits, 0.4% per rounding); a wrong cache is off by O(1)
LOGIT_TOLERANCE = {"fp32": 1e-4, "fp16": 1e-2, "bf16": 3e-2}


def torch_dtype(dtype: str) -> torch.dtype:
    d = canonical_dtype(dtype)
    if d not in TORCH_DTYPES:
        raise ValueError(f"'dtype' must be one of {', '.join(TORCH_DTYPES)}: got {dtype!r}")
    return TORCH_DTYPES[d]


# --- 1. parameters ----------------------------------------------------------------------------


def check_params(spec: ModelSpec, claim: ModelSpec) -> list[Check]:
    model = build_decoder(spec, "meta")  # no memory: PaLM 540B builds in a second
    measured = numel_by_component(model)
    predicted = calc.param_breakdown(claim)
    rows = [
        Check(
            check="params", label=k, unit="params", predicted=predicted[k], measured=v, tolerance=0
        )
        for k, v in measured.items()
        if v or predicted[k]
    ]
    total = sum(p.numel() for p in model.parameters())  # tied weights once
    rows.append(
        Check(
            check="params",
            label="total",
            unit="params",
            predicted=calc.param_count(claim),
            measured=total,
            tolerance=0,
        )
    )
    return rows


# --- 2. FLOPs ---------------------------------------------------------------------------------


def _count_flops(fn) -> int:
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        fn()
    return counter.get_total_flops()


def check_flops(
    spec: ModelSpec, claim: ModelSpec, seq_lens: tuple[int, ...], layers: int | None = None
) -> list[Check]:
    """Prefill at each length (full mask), then one decode step after the longest prefill."""
    if layers is not None:
        spec, claim = reduce.at_depth(spec, layers), reduce.at_depth(claim, layers)
    ctx = spec.max_position_embeddings  # no longer prompts than the model's context
    lens = sorted({min(n, ctx) for n in seq_lens})
    model = build_decoder(spec, "meta")
    rows = []
    with torch.no_grad():
        for n in lens:
            tokens = torch.zeros(1, n, dtype=torch.long, device="meta")
            measured = _count_flops(lambda t=tokens: model(t, causal=False))
            predicted = calc.forward_flops_prefill(claim, n, causal=False)
            rows.append(_flop_row(f"prefill n={n}", predicted, measured))
        n0 = min(lens[-1], ctx - 1)
        cache = model.new_cache(1, n0 + 1, torch.float32, "meta")
        model(torch.zeros(1, n0, dtype=torch.long, device="meta"), cache)
        step = torch.zeros(1, 1, dtype=torch.long, device="meta")
        measured = _count_flops(lambda: model(step, cache))
        rows.append(_decode_row(claim, n0 + 1, measured, spec.is_mla))
    return rows


def _decode_row(claim: ModelSpec, context: int, measured: int, mla: bool) -> Check:
    predicted = calc.forward_flops_decode(claim, context)
    label = f"decode step at context {context}"
    if not mla:
        return _flop_row(label, predicted, measured)
    absorbed = calc.forward_flops_decode(claim, context, mla_absorbed=True)
    row = _flop_row(label + " (MLA absorbed)", absorbed, measured)
    return row.model_copy(
        update={
            "note": "latent cache, absorbed decode: forward_flops_decode(mla_absorbed=True); "
            f"the naive per-head form would be {predicted:,}"
        }
    )


def _flop_row(label: str, predicted: int, measured: int) -> Check:
    return Check(
        check="flops",
        label=label,
        unit="FLOPs",
        predicted=predicted,
        measured=measured,
        tolerance=0,
    )


# --- 3. KV cache ------------------------------------------------------------------------------


def check_kv(
    spec: ModelSpec,
    claim: ModelSpec,
    device: str,
    dtype: str,
    *,
    max_params: int,
    prefill: int = 48,
    decode: int = 16,
    batch: int = 2,
    note: str = "",
) -> list[Check]:
    """Prefill `prefill` tokens, decode `decode` more, one token at a time, with a static cache.

    The label names the window when the model has one (the runner may shrink it; see `note`).
    """
    small = reduce.kv_spec(spec, max_params)
    L, total = small.num_hidden_layers, prefill + decode
    dev = torch.device(device)
    model = build_decoder(small, dev, torch_dtype(dtype))
    gen = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, small.vocab_size, (batch, total), generator=gen).to(dev)
    with torch.no_grad():
        if dev.type == "cuda":
            torch.cuda.empty_cache()  # release cached free blocks: fresh segments split exactly
            allocated, requested, cache = measure.cuda_allocation(
                lambda: model.new_cache(batch, total), dev
            )
        else:
            cache = model.new_cache(batch, total)
        model(tokens[:, :prefill], cache)
        for i in range(prefill, total):
            last = model(tokens[:, i : i + 1], cache)[:, -1]
        full = model(tokens)[:, -1]  # no cache: every token recomputed
    kinds = small.attention_counts
    window = f", window {spec.sliding_window}" if "sliding_attention" in kinds else ""
    window += f", chunk {spec.attention_chunk_size}" if "chunked_attention" in kinds else ""
    label = f"{prefill}+{decode} tokens, batch {batch}{window}"
    at_l = reduce.at_depth(claim, L)
    predicted = calc.kv_cache_bytes(at_l, total, batch, dtype, convention="engine")
    rows = [
        Check(
            check="kv_cache",
            label=f"cache bytes ({label})",
            unit="bytes",
            predicted=predicted,
            measured=cache.nbytes(),
            tolerance=0,
            note=note,
        )
    ]
    rows += _kind_rows(small, at_l, cache, total, batch, dtype, label)
    if dev.type == "cuda":
        tensors = predicted_tensor_bytes(at_l, total, batch, dtype)
        rounded = sum(measure.round_cuda_block(b) for b in tensors)
        # a block bigger than 1 MiB taken from a free segment is split only when more than
        # kSmallSize (1 MiB) would remain, so each may carry up to 1 MiB unsplit
        slack = sum(measure.CUDA_SMALL_SIZE for b in tensors if b > measure.CUDA_SMALL_SIZE)
        rows += [
            Check(
                check="kv_cache",
                label=f"requested bytes ({label})",
                unit="bytes",
                predicted=predicted,
                measured=requested,
                tolerance=0,
                note="torch.cuda.memory_stats requested_bytes delta (unrounded)",
            ),
            Check(
                check="kv_cache",
                label=f"allocated bytes ({label})",
                unit="bytes",
                predicted=rounded,
                measured=allocated,
                tolerance=slack,
                tolerance_kind="absolute",
                note="memory_allocated delta; prediction rounds each K/V tensor up to 512 B"
                + (f"; {slack:,} B allowed for unsplit large-block tails" if slack else ""),
            ),
        ]
    full = full.float()
    diff = ((last.float() - full).abs().max() / full.abs().max()).item()
    rows.append(
        Check(
            check="kv_cache",
            label=f"cached decode = full forward ({label})",
            unit="max |logit diff| / max |logit|",
            predicted=0.0,
            measured=diff,
            tolerance=LOGIT_TOLERANCE[canonical_dtype(dtype)],
            tolerance_kind="absolute",
        )
    )
    return rows


def _kind_rows(small, at_l, cache, total, batch, dtype, label) -> list[Check]:
    """Per layer kind, when the model has more than plain full attention: the measured bytes
    of its layers' cache tensors vs kvcalc's bytes for one such layer x their count."""
    kinds = small.attention_counts
    if set(kinds) == {"full_attention"} and not small.is_mla:
        return []
    group = kv_cache_group_bytes(at_l, total, batch, dtype, convention="engine")
    layer_bytes = cache.layer_nbytes()
    rows = []
    for kind, n in kinds.items():
        measured = sum(
            b for b, t in zip(layer_bytes, small.attention_types, strict=True) if t == kind
        )
        predicted = group.get(kind, 0) * at_l.attention_counts.get(kind, 0)
        what = "MLA latent" if small.is_mla and kind != "linear_attention" else kind
        rows.append(
            Check(
                check="kv_cache",
                label=f"{what} cache bytes, {n} layer(s) ({label})",
                unit="bytes",
                predicted=predicted,
                measured=measured,
                tolerance=0,
            )
        )
        if kind == "linear_attention":
            rows.append(
                Check(
                    check="kv_cache",
                    label=f"linear_attention state bytes, {n} layer(s) x batch {batch}",
                    unit="bytes",
                    predicted=batch * state_bytes_per_sequence(at_l, dtype),
                    measured=measured,
                    tolerance=0,
                    note="conv state (K - 1 columns) + recurrent state, constant in tokens",
                )
            )
    return rows


def predicted_tensor_bytes(spec: ModelSpec, total: int, batch: int, dtype: str) -> list[int]:
    """Bytes of each cache tensor the reference decoder allocates, layer by layer, as kvcalc's
    per-layer bytes split by the kind's two tensors (GQA: K and V halves; MLA: latent and rope
    key; linear: conv and recurrent state). For per-tensor allocator rounding on CUDA."""
    from calc.layers import KINDS
    from calc.layers import Linear as LinearKind

    layer_bytes = calc.kv_cache_layer_bytes(spec, total, batch, dtype, convention="engine")
    out = []
    for b, kind in zip(layer_bytes, spec.attention_types, strict=True):
        if kind == "linear_attention":
            conv = LinearKind.conv_dim(spec) * (spec.linear_conv_kernel_dim - 1)
            state = KINDS[kind].state_elems(spec, "engine")
            split = b * conv // state
        elif spec.is_mla:
            split = b * spec.kv_lora_rank // (spec.kv_lora_rank + spec.qk_rope_head_dim)
        else:
            split = b // 2
        out += [split, b - split]
    return out


# --- 4. peak attention memory -----------------------------------------------------------------


def check_peak(
    spec: ModelSpec,
    claim: ModelSpec,
    device: str,
    dtype: str,
    seq_lens: tuple[int, ...],
    *,
    max_heads: int | None = 4,
    batch: int = 1,
) -> list[Check]:
    small, small_claim = (
        reduce.attention_spec(spec, max_heads),
        reduce.attention_spec(claim, max_heads),
    )
    dev = torch.device(device)
    torch.manual_seed(0)
    attn = GQAAttention.from_spec(small).to(device=dev, dtype=torch_dtype(dtype)).eval()
    kind = "cuda" if dev.type == "cuda" else "cpu"
    rows, series = [], {p: ([], []) for p in PATHS}
    with torch.no_grad():
        for path in PATHS:
            x0 = torch.randn(batch, 8, small.hidden_size, device=dev, dtype=torch_dtype(dtype))
            attn(x0, path=path, causal=False)  # warm-up: kernels, cuBLAS workspace
            for n in seq_lens:
                x = torch.randn(batch, n, small.hidden_size, device=dev, dtype=torch_dtype(dtype))
                measured, _ = measure.peak_bytes(
                    lambda x=x, p=path: attn(x, path=p, causal=False), dev
                )
                del x
                predicted, step, terms = peak_model.predicted_peak(
                    small_claim, n, batch, dtype, path, device=kind, threads=torch.get_num_threads()
                )
                series[path][0].append(predicted)
                series[path][1].append(measured)
                parts = " + ".join(f"{k} {v:,}" for k, v in terms.items() if v)
                top = n == max(seq_lens)  # one breakdown per path: the largest length
                rows.append(
                    Check(
                        check="peak_memory",
                        label=f"{path} n={n}",
                        unit="bytes",
                        predicted=predicted,
                        measured=measured,
                        tolerance=PEAK_TOLERANCE[kind],
                        note=f"peak at {step}: {parts}" if top else "",
                    )
                )
    for path in PATHS:
        pred, meas = series[path]
        rows.append(
            Check(
                check="peak_memory",
                label=f"growth exponent, {path}",
                unit="exponent",
                predicted=round(fit_exponent(seq_lens, pred), 4),
                measured=round(fit_exponent(seq_lens, meas), 4),
                tolerance=EXPONENT_TOLERANCE,
                tolerance_kind="absolute",
            )
        )
    return rows


def fit_exponent(xs, ys) -> float:
    """Slope p of log y = p log x + c, least squares."""
    lx, ly = [math.log(x) for x in xs], [math.log(y) for y in ys]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    num = sum((a - mx) * (b - my) for a, b in zip(lx, ly, strict=True))
    den = sum((a - mx) ** 2 for a in lx)
    return num / den
