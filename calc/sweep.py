"""Vectorized sweeps: models x seq_lens x batches x dtypes -> one DataFrame row each.

numpy does the arithmetic over the whole grid at once, by broadcasting over a [M, S, B, D]
grid (no Python loop per row); the KV formula is the one in calc.kvcache, by layer group (full
and sliding layers, a sliding layer keeping min(seq_len, window) tokens), in exact int64 (exact
Python ints if a grid could overflow int64). FLOPs are float64: exact below 2**53 (~9e15), and
within a few units of 1e-16 relative above, where prompt FLOPs of large models live.
But: no `block_size` rounding and no "window-1" convention here; use calc.kv_cache_bytes.

>>> df = sweep(["llama-2-70b"], [4096], batches=[1, 2])
>>> df["kv_cache_bytes"].tolist()   # 2 * 80 layers * 8 KV heads * 128 * 4096 * 2 B, x1 and x2
[1342177280, 2684354560]
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from calc.dtypes import canonical_dtype, dtype_bits
from calc.errors import check_count
from calc.layers import KINDS
from calc.params import matmul_params, param_count
from calc.presets import resolve_model
from calc.spec import ModelSpec

COLUMNS: tuple[str, ...] = (
    "model",
    "seq_len",
    "batch",
    "dtype",
    "kv_cache_bytes",
    "kv_bytes_per_token",
    "params",
    "prefill_attention_flops",
    "prefill_forward_flops",
)
_INT64_MAX = 2**63 - 1


def _counts(name: str, plural: str, values, allow_zero: bool):
    """A 1-D int64 array of checked counts; an error names the first bad value."""
    import numpy as np

    if hasattr(values, "__array__"):  # numpy arrays and scalars, pandas Series
        values = np.asarray(values)
        values = values.reshape(1) if values.ndim == 0 else values
    elif isinstance(values, str | bytes) or not isinstance(values, Iterable):
        values = [values]  # one value: sweep(..., seq_lens=4096)
    else:
        values = list(values)  # ranges, generators, pandas Series
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise ValueError(f"'{plural}' must be a flat list of integers: got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"'{plural}' must not be empty")
    # np.asarray reads [1, True] as int64 and [1, 2.5] as float64: look at the items then
    is_int = arr.dtype.kind in "iu"
    if not is_int or (not isinstance(values, np.ndarray) and any(type(v) is bool for v in values)):
        for v in values if not isinstance(values, np.ndarray) else arr.tolist():
            check_count(name, v, allow_zero)  # raises on the first non-integer
    if not is_int or (arr.dtype.kind == "u" and arr.max() > _INT64_MAX):
        raise ValueError(f"'{name}' must be an integer below 2**63: got {max(values)!r}")
    bad = arr < 0 if allow_zero else arr <= 0
    if bad.any():
        check_count(name, arr[bad.argmax()].item(), allow_zero)  # raises, naming the value
    return arr.astype(np.int64, copy=False)


def _codes(labels: list[str], shape: tuple[int, ...], axis: int):
    """A categorical column for one axis of the grid, from codes (no per-row strings)."""
    import numpy as np
    import pandas as pd

    uniq = list(dict.fromkeys(labels))  # the same model twice is allowed
    codes = np.array([uniq.index(x) for x in labels], dtype=np.int32)
    at = [1] * len(shape)
    at[axis] = len(labels)
    flat = np.broadcast_to(codes.reshape(at), shape).ravel()
    return pd.Categorical.from_codes(flat, categories=uniq)


def sweep(
    models: Iterable[str | ModelSpec] | str | ModelSpec,
    seq_lens: Sequence[int] | int,
    batches: Sequence[int] | int = (1,),
    dtypes: Sequence[str] | str = ("bf16",),
):
    """KV-cache bytes and prefill FLOPs over the full grid, as a pandas DataFrame.

    Columns (`COLUMNS`): model, seq_len, batch, dtype, kv_cache_bytes, kv_bytes_per_token, params,
    prefill_attention_flops (causal), prefill_forward_flops (causal). Rows run in C order over
    models, then seq_lens, batches and dtypes; `model` and `dtype` are categoricals. Each row
    equals the scalar functions: kv_cache_bytes, kv_bytes_per_token, param_count,
    attention_flops_prefill and forward_flops_prefill.
    """
    import numpy as np
    import pandas as pd

    if isinstance(models, str | Path | ModelSpec | dict):
        models = [models]
    if isinstance(dtypes, str):
        dtypes = [dtypes]
    specs = [resolve_model(m) for m in models]
    if not specs:
        raise ValueError("'models' must not be empty")
    n = _counts("seq_len", "seq_lens", seq_lens, allow_zero=True)
    b = _counts("batch", "batches", batches, allow_zero=False)
    dts = [canonical_dtype(d) for d in dtypes]
    if not dts:
        raise ValueError("'dtypes' must not be empty")
    M, S, B, D = len(specs), len(n), len(b), len(dts)

    # per model and layer kind, the formulas of calc.layers applied to whole columns
    kinds = sorted({k for sp in specs for k in sp.attention_counts})
    bits = [dtype_bits(d) for d in dts]

    def per_model(k, f):  # 0 for models without layers of kind k (their sizes may be unset)
        return [f(KINDS[k], sp) if k in sp.attention_counts else 0 for sp in specs]

    elems = {k: per_model(k, lambda kind, sp: kind.kv_elems_per_token(sp, "engine")) for k in kinds}
    states = {k: per_model(k, lambda kind, sp: kind.state_elems(sp, "engine")) for k in kinds}
    layers = {k: [sp.attention_counts.get(k, 0) for sp in specs] for k in kinds}

    # int64 unless the largest product could overflow: then exact Python ints (slow, rare)
    # DeepSeek-V4: its compressed entries add at most one more head_dim (+ indexer key) a token
    widest = (3 if any(sp.is_v4 for sp in specs) else 1) * max(max(e) for e in elems.values()) * (
        int(n.max()) + 1
    ) + max(max(x) for x in states.values())
    bound = max(sp.num_hidden_layers for sp in specs) * widest * max(bits)
    bound *= int(b.max()) + 8
    idt = np.int64 if bound <= _INT64_MAX else object

    def col(values, shape, dtype=idt):  # a per-axis constant, shaped to broadcast
        return np.asarray(values, dtype=dtype).reshape(shape)

    nn, bb, bt = col(n, (1, S, 1, 1)), col(b, (1, 1, B, 1)), col(bits, (1, 1, 1, D))
    f64 = np.float64
    nf, bf = nn.astype(f64), bb.astype(f64)
    kv = np.zeros((M, S, B, D), dtype=idt)
    per_token = np.zeros((M, 1, 1, D), dtype=idt)
    attn = np.zeros((M, S, B, 1), dtype=f64)
    for k in kinds:
        kind, Lk = KINDS[k], col(layers[k], (M, 1, 1, 1))
        # KV bytes, as calc.kvcache: each layer's bytes rounded up to whole bytes, then x layers
        layer_bits = np.concatenate(
            [np.asarray(kind.cache_bits(sp, nn, bt, "engine", minimum=np.minimum)) + 0 * nn * bt
             if k in sp.attention_counts else 0 * nn * bt for sp in specs]
        )  # fmt: skip
        kv = kv + Lk * -(-(bb * layer_bits) // 8)
        per_token = per_token + Lk * -(-(col(elems[k], (M, 1, 1, 1)) * bt) // 8)
        # attention FLOPs, as calc.attention: per-pair FLOPs x causal pairs (+ per-token work)
        pairs = np.concatenate(
            [np.asarray(kind.pairs(sp, nf, True, minimum=np.minimum)) + 0 * nf
             if k in sp.attention_counts else 0 * nf for sp in specs]
        )  # fmt: skip
        per_pair = col(per_model(k, lambda kind, sp: kind.flops_per_pair(sp)), (M, 1, 1, 1), f64)
        per_tok = col(per_model(k, lambda kind, sp: kind.token_flops(sp)), (M, 1, 1, 1), f64)
        per_index = col(
            per_model(k, lambda kind, sp: kind.index_flops_per_pair(sp)), (M, 1, 1, 1), f64
        )
        index_pairs = np.concatenate(
            [np.asarray(kind.index_pairs(sp, nf, True, minimum=np.minimum)) + 0 * nf
             if k in sp.attention_counts else 0 * nf for sp in specs]
        )  # fmt: skip
        index = per_index * index_pairs  # an indexer's scores (V3.2: every earlier key)
        attn = attn + bf * Lk.astype(f64) * (per_pair * pairs + index + per_tok * nf)
    mm = col([matmul_params(sp) for sp in specs], (M, 1, 1, 1), f64)
    forward = 2 * bf * nf * mm + attn  # [M, S, B, 1]

    shape = (M, S, B, D)

    def flat(a):
        return np.broadcast_to(a, shape).ravel()

    params = col([param_count(s) for s in specs], (M, 1, 1, 1), np.int64)
    data = {
        "model": _codes([s.name for s in specs], shape, 0),
        "seq_len": flat(n.reshape(1, S, 1, 1)),
        "batch": flat(b.reshape(1, 1, B, 1)),
        "dtype": _codes(dts, shape, 3),
        "kv_cache_bytes": flat(kv),
        "kv_bytes_per_token": flat(per_token),
        "params": flat(params),
        "prefill_attention_flops": flat(attn),
        "prefill_forward_flops": flat(forward),
    }
    return pd.DataFrame(data, columns=list(COLUMNS), copy=False)
