"""Check 3, the KV cache: prefill then decode on the device at full attention width and reduced
depth; bytes of the cache tensors vs `kv_cache_bytes(convention="engine")`, in all and per layer
kind (linear attention and Mamba-2: their state, vs `state_bytes_per_sequence`; indexed
attention: the MLA latent plus the indexer key; "none", a block without a mixer: 0). Exact (CUDA:
after 512-byte block rounding). The cached decode must also reproduce a full forward's logits.

Mamba-2's conv state is compared in the engines' convention (vLLM / SGLang: conv_kernel - 1
columns), as every kind here is: the reference step reads K - 1 stored inputs plus the new one,
so that is all a decode needs; transformers stores conv_kernel columns (tests/test_hybrid_ssm.py
measures that one against transformers' own cache). The SSM state is in mamba_ssm_cache_dtype
when the model sets it (Nemotron 3: fp32 whatever the cache dtype), as the engines keep it."""

from __future__ import annotations

import torch

import calc
from calc.dtypes import canonical_dtype, dtype_bits
from calc.kvcache import kv_cache_group_bytes, state_bytes_per_sequence
from calc.layout import NO_KV_TYPES, STATE_TYPES
from calc.spec import ModelSpec
from calc.validate import measure, reduce
from calc.validate.decoder import build_decoder
from calc.validate.results import Check

TORCH_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
# cached decode vs full forward, relative to the largest logit: rounding noise of the dtype
# (bf16 keeps 8 significant bits, 0.4% per rounding); a wrong cache is off by O(1)
LOGIT_TOLERANCE = {"fp32": 1e-4, "fp16": 1e-2, "bf16": 3e-2}


def torch_dtype(dtype: str) -> torch.dtype:
    d = canonical_dtype(dtype)
    if d not in TORCH_DTYPES:
        raise ValueError(f"'dtype' must be one of {', '.join(TORCH_DTYPES)}: got {dtype!r}")
    return TORCH_DTYPES[d]


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
        what = "MLA latent" if small.is_mla and kind not in NO_KV_TYPES else kind
        if kind == "indexed_attention":
            what = "MLA latent + indexer key"
        if kind == "none":
            what = "none (no mixer)"
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
        if kind in STATE_TYPES:  # a model has one kind of state (Qwen3-Next's or Mamba-2's)
            note = "conv state (K - 1 columns) + recurrent state, constant in tokens"
            if kind == "mamba":
                ssm = at_l.mamba_ssm_cache_dtype or canonical_dtype(dtype)
                note = (
                    f"conv state (conv_kernel - 1 = {at_l.conv_kernel - 1} columns, engine "
                    f"convention) in {canonical_dtype(dtype)} + SSM state in {ssm}, "
                    "constant in tokens"
                )
            rows.append(
                Check(
                    check="kv_cache",
                    label=f"{kind} state bytes, {n} layer(s) x batch {batch}",
                    unit="bytes",
                    predicted=batch * state_bytes_per_sequence(at_l, dtype),
                    measured=measured,
                    tolerance=0,
                    note=note,
                )
            )
    return rows


def predicted_tensor_bytes(spec: ModelSpec, total: int, batch: int, dtype: str) -> list[int]:
    """Bytes of each cache tensor the reference decoder allocates, layer by layer, as kvcalc's
    per-layer bytes split by the kind's tensors (GQA: K and V halves; MLA: latent and rope
    key; indexed: latent, rope key and indexer key; linear: conv and recurrent state; mamba:
    conv and SSM state, each in its dtype; none: no tensor). For per-tensor allocator rounding
    on CUDA."""
    from calc.layers import KINDS
    from calc.layers import Linear as LinearKind

    layer_bytes = calc.kv_cache_layer_bytes(spec, total, batch, dtype, convention="engine")
    out = []
    for b, kind in zip(layer_bytes, spec.attention_types, strict=True):
        if kind == "none":
            continue
        if kind == "mamba":  # the conv state in the cache dtype, the SSM state in its own
            conv = batch * KINDS[kind].conv_elems(spec, "engine") * dtype_bits(dtype) // 8
            out += [conv, b - conv]
            continue
        if kind == "linear_attention":
            conv = LinearKind.conv_dim(spec) * (spec.linear_conv_kernel_dim - 1)
            state = KINDS[kind].state_elems(spec, "engine")
            split = b * conv // state
        elif kind == "indexed_attention":
            parts = (spec.kv_lora_rank, spec.qk_rope_head_dim, spec.index_head_dim)
            out += [b * e // sum(parts) for e in parts]
            continue
        elif spec.is_mla:
            split = b * spec.kv_lora_rank // (spec.kv_lora_rank + spec.qk_rope_head_dim)
        else:
            split = b // 2
        out += [split, b - split]
    return out
