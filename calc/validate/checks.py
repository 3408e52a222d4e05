"""The four measured checks. Each builds real modules from `spec`, measures them, and compares
with kvcalc evaluated on `claim` (the same spec, unless a test passes a wrong one on purpose).

1. params: the full model on `meta`; numel per component vs `param_breakdown`. Exact.
2. flops: `FlopCounterMode` over forwards on `meta` (CPU SDPA kernels count 0 FLOPs, and meta
   runs SDPA as its math decomposition, which counts), full mask, vs `forward_flops_prefill(
   causal=False)` and `forward_flops_decode`. Exact. MLA decodes against its latent cache in
   the absorbed form, so its decode step is predicted with `attention_flops_decode(...,
   mla_absorbed=True)` in place of forward_flops_decode's naive attention term (DeepSeek-V3.2:
   over the index_topk latents its indexer picks, plus the indexer's scoring of every key).
   Mamba-2 layers: kvcalc counts 5 FLOPs per SSM state element and token; the scan's decay is
   an elementwise multiply FlopCounterMode does not see (1 of the 5: calc/validate/mamba2.py),
   so the rows compare kvcalc's count less that term, and say so.
3. kv_cache (calc/validate/checks_kv.py): prefill then decode on the device at full attention width and reduced depth;
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
from calc.spec import ModelSpec
from calc.validate import measure, peak_model, reduce
from calc.validate.attention import PATHS, GQAAttention
from calc.validate.checks_kv import TORCH_DTYPES, check_kv, predicted_tensor_bytes, torch_dtype
from calc.validate.decoder import build_decoder, numel_by_component
from calc.validate.results import Check

PEAK_TOLERANCE = {"cpu": 0.01, "cuda": 0.05}  # relative; see the module docstring of peak_model
EXPONENT_TOLERANCE = 0.05  # absolute, on the fitted exponent


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
            rows.append(_unseen_decay(claim, n, _flop_row(f"prefill n={n}", predicted, measured)))
        n0 = min(lens[-1], ctx - 1)
        cache = model.new_cache(1, n0 + 1, torch.float32, "meta")
        model(torch.zeros(1, n0, dtype=torch.long, device="meta"), cache)
        step = torch.zeros(1, 1, dtype=torch.long, device="meta")
        measured = _count_flops(lambda: model(step, cache))
        rows.append(_unseen_decay(claim, 1, _decode_row(claim, n0 + 1, measured, spec.is_mla)))
    return rows


def _unseen_decay(claim: ModelSpec, tokens: int, row: Check) -> Check:
    """A row over `tokens` tokens less Mamba-2's decay multiply (1 FLOP per state element and
    token, elementwise: FlopCounterMode does not count it), when the model has mamba layers."""
    n_mamba = claim.attention_counts.get("mamba", 0)
    if not n_mamba:
        return row
    from calc.layers_ssm import Mamba2

    unseen = tokens * n_mamba * Mamba2.ssm_elems(claim)
    note = (
        f"kvcalc {row.predicted:,} less {unseen:,}: Mamba-2's decay exp(dt A) h, 1 FLOP per "
        "SSM state element and token, is elementwise (FlopCounterMode counts matmuls and "
        "convolutions: the dt x B^T update and the C readout, 4 of kvcalc's 5)"
    )
    return row.model_copy(
        update={
            "label": row.label + " (less Mamba decay: unseen by FlopCounterMode)",
            "predicted": row.predicted - unseen,
            "note": (row.note + "; " if row.note else "") + note,
        }
    )


def _decode_row(claim: ModelSpec, context: int, measured: int, mla: bool) -> Check:
    predicted = calc.forward_flops_decode(claim, context)
    label = f"decode step at context {context}"
    if not mla:
        return _flop_row(label, predicted, measured)
    absorbed = calc.forward_flops_decode(claim, context, mla_absorbed=True)
    row = _flop_row(label + " (MLA absorbed)", absorbed, measured)
    note = (
        "latent cache, absorbed decode: forward_flops_decode(mla_absorbed=True); "
        f"the naive per-head form would be {predicted:,}"
    )
    if "indexed_attention" in claim.attention_counts:
        note += (
            f"; indexed: the indexer scores all {context:,} keys, MLA reads the "
            f"{min(context, claim.index_topk):,} it picks"
        )
    return row.model_copy(update={"note": note})


def _flop_row(label: str, predicted: int, measured: int) -> Check:
    return Check(
        check="flops",
        label=label,
        unit="FLOPs",
        predicted=predicted,
        measured=measured,
        tolerance=0,
    )


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


__all__ = [
    "TORCH_DTYPES",
    "check_flops",
    "check_kv",
    "check_params",
    "check_peak",
    "fit_exponent",
    "predicted_tensor_bytes",
    "torch_dtype",
]
