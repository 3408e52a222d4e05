"""calc.sweep against the scalar functions, row by row (two implementations of one formula).

The grid covers sliding-window layers (all layers and a pattern), MoE, int4, several batches
and zero tokens. KV bytes and parameter counts must match exactly; FLOPs are float64 in the
sweep, so they match the exact integers to float64 rounding.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import TOY_SHAPE

import calc
from calc import ModelSpec
from calc.sweep import COLUMNS, sweep

TOY = TOY_SHAPE
SPECS = [
    ModelSpec(name="dense", **TOY),
    ModelSpec(name="slide-all", sliding_window=5, **TOY),
    ModelSpec(name="slide-2", sliding_window=5, sliding_window_pattern=2, **TOY),
    ModelSpec(name="moe", num_local_experts=4, num_experts_per_tok=2, **TOY),
    ModelSpec(name="mqa-odd", **{**TOY, "num_key_value_heads": 1, "head_dim": 3}),
]
PRESETS = ["llama-2-70b", "mixtral-8x7b", "gemma-2-9b", "mistral-7b-v0.1"]
SEQS = [0, 1, 4, 5, 6, 17, 4096, 8192, 32768]
BATCHES = [1, 3, 64]
DTYPES = ["bf16", "int4", "fp32", "fp8"]


def same_float(approx: float, exact: int) -> bool:
    # a handful of float64 roundings: well within 1e-15 relative
    return math.isclose(approx, exact, rel_tol=1e-15, abs_tol=0)


def test_every_row_equals_the_scalar_functions():
    models = SPECS + [calc.load_preset(p) for p in PRESETS]
    df = sweep(models, SEQS, BATCHES, DTYPES)
    assert len(df) == len(models) * len(SEQS) * len(BATCHES) * len(DTYPES)
    assert tuple(df.columns) == COLUMNS
    by_name = {s.name: s for s in models}
    rows = df.itertuples(index=False)
    for s in models:  # rows run in C order: models, seq_lens, batches, dtypes
        for n in SEQS:
            for b in BATCHES:
                for d in DTYPES:
                    r = next(rows)
                    assert (r.model, r.seq_len, r.batch, r.dtype) == (s.name, n, b, d)
                    spec = by_name[r.model]
                    assert r.kv_cache_bytes == calc.kv_cache_bytes(spec, n, b, d)
                    assert r.kv_bytes_per_token == calc.kv_bytes_per_token(spec, d)
                    assert r.params == calc.param_count(spec)
                    attn = calc.attention_flops_prefill(spec, n, b)
                    assert same_float(r.prefill_attention_flops, attn)
                    fwd = calc.forward_flops_prefill(spec, n, b)
                    assert same_float(r.prefill_forward_flops, fwd)


def test_windowed_rows_are_capped():
    # sanity on the grid itself: the all-layer window keeps 5 tokens whatever the length
    df = sweep([SPECS[1]], [5, 6, 100], [1], ["bf16"])
    assert df["kv_cache_bytes"].nunique() == 1


def test_dtypes_of_columns():
    df = sweep(SPECS[:2], [8], [1], ["bf16"])
    assert df["kv_cache_bytes"].dtype == np.int64 and df["params"].dtype == np.int64
    assert df["prefill_forward_flops"].dtype == np.float64
    assert df["model"].tolist() == ["dense", "slide-all"]  # categorical, compares as strings
    assert (df["dtype"] == "bf16").all()


def test_numpy_inputs():
    a = sweep(SPECS[0], np.array([1, 8], dtype=np.int32), np.array([2], dtype=np.uint16))
    b = sweep(SPECS[0], [np.int64(1), np.int64(8)], [np.int8(2)])
    c = sweep(SPECS[0], pd.Series([1, 8]), 2)
    for df in (a, b, c):
        assert df["kv_cache_bytes"].tolist() == [
            calc.kv_cache_bytes(SPECS[0], 1, 2),
            calc.kv_cache_bytes(SPECS[0], 8, 2),
        ]


def test_single_values_and_names():
    df = sweep("llama-2-70b", 4096, 1, "bfloat16")
    assert len(df) == 1
    assert df.loc[0, "dtype"] == "bf16"
    # 2 x 80 layers x 8 KV heads x 128 x 4096 tokens x 2 B (Llama-2-70b config.json)
    assert df.loc[0, "kv_cache_bytes"] == 2 * 80 * 8 * 128 * 4096 * 2


def test_same_model_twice():
    df = sweep([SPECS[0], SPECS[0]], [8])
    assert df["model"].tolist() == ["dense", "dense"]
    assert df["kv_cache_bytes"].nunique() == 1


def test_beyond_int64_stays_exact():
    # 2**40 tokens x 2**20 sequences x 4 layers x 32 elements x 4 B overflows int64 (2**63)
    n, b = 2**40, 2**20
    df = sweep(SPECS[0], [n], [b], ["fp32"])
    exact = 2**40 * 2**20 * 4 * 32 * 4
    assert exact > 2**63
    assert df.loc[0, "kv_cache_bytes"] == exact == calc.kv_cache_bytes(SPECS[0], n, b, "fp32")


# --- bad input --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (([], [8]), "'models' must not be empty"),
        ((SPECS, []), "'seq_lens' must not be empty"),
        ((SPECS, [8], []), "'batches' must not be empty"),
        ((SPECS, [8], [1], []), "'dtypes' must not be empty"),
        ((SPECS, [8, -1]), "'seq_len' must be an integer >= 0: got -1"),
        ((SPECS, np.array([8, -1])), "'seq_len' must be an integer >= 0: got -1"),
        ((SPECS, [8], [1, 0]), "'batch' must be an integer > 0: got 0"),
        ((SPECS, [8], np.array([-4])), "'batch' must be an integer > 0: got -4"),
        ((SPECS, [8, True]), "'seq_len' must be an integer >= 0: got True"),
        ((SPECS, np.array([True])), "'seq_len' must be an integer >= 0: got True"),
        ((SPECS, [8, 2.5]), "'seq_len' must be an integer >= 0: got 2.5"),
        ((SPECS, ["8"]), "'seq_len' must be an integer >= 0: got '8'"),
        ((SPECS, [[1, 2]]), "'seq_lens' must be a flat list of integers: got shape (1, 2)"),
        ((SPECS, [8], [1], ["fp12"]), "got 'fp12'"),
        ((["no-such-model"], [8]), "unknown preset 'no-such-model'"),
    ],
)
def test_bad_input(args, message):
    with pytest.raises(ValueError) as info:
        sweep(*args)
    assert message in str(info.value)


# --- vectorized ---------------------------------------------------------------------------------


def _calc_lines_executed(fn) -> int:
    """Python lines executed inside calc/ while running fn (a per-row loop would show)."""
    calc_dir = str(Path(calc.__file__).parent)
    count = 0

    def tracer(frame, event, arg):
        nonlocal count
        if not frame.f_code.co_filename.startswith(calc_dir):
            return None
        if event == "line":
            count += 1
        return tracer

    old = sys.gettrace()
    sys.settrace(tracer)
    try:
        fn()
    finally:
        sys.settrace(old)
    return count


def test_sweep_is_vectorized():
    models = SPECS
    sweep(models, np.arange(10), np.arange(1, 3), DTYPES)  # warm imports

    small = _calc_lines_executed(lambda: sweep(models, np.arange(10), np.arange(1, 3), DTYPES))
    large = _calc_lines_executed(lambda: sweep(models, np.arange(5_000), np.arange(1, 9), DTYPES))
    # 5 x 10 x 2 x 4 = 400 rows versus 5 x 5000 x 8 x 4 = 800,000 rows: the same Python work
    assert small > 0
    assert small == large


def test_sweep_equals_scalar_for_every_layer_kind():
    # MLA (DeepSeek-V3), linear + full (Qwen3-Next), chunked + full (Llama 4 Scout),
    # sliding + full (Gemma 3, gpt-oss): row by row, around the 8192-token chunk edge
    names = ["deepseek-v3", "qwen3-next-80b-a3b", "llama-4-scout", "gemma-3-27b", "gpt-oss-120b"]
    df = calc.sweep(names, [0, 1, 100, 8191, 8192, 8193, 40000], [1, 3], ["bf16", "fp8"])
    assert len(df) == 5 * 7 * 2 * 2
    for r in df.itertuples():
        s = calc.load_preset(r.model)
        assert r.kv_cache_bytes == calc.kv_cache_bytes(s, r.seq_len, r.batch, r.dtype)
        assert r.kv_bytes_per_token == calc.kv_bytes_per_token(s, r.dtype)
        assert r.prefill_attention_flops == calc.attention_flops_prefill(s, r.seq_len, r.batch)
