"""plan() joins memory and roofline; sweep_plans() must equal plan() on every row it returns."""

import math

import pytest
from conftest import PLAN_COLUMNS
from hypothesis import given, settings
from hypothesis import strategies as st

from calc.plan import default_output_tokens, plan
from calc.plan_sweep import sweep_plans

COMPARED = PLAN_COLUMNS


def _same(a, b) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=0.0)
    return a == b


def test_plan_joins_memory_and_latency():
    p = plan("llama-3-70b", "h100-sxm", gpus=2, seq_len=8192)
    assert p.fits == p.memory.fits
    # 8192 tokens: 256 generated, 7936 of prompt
    assert (p.roofline.prompt_tokens, p.roofline.output_tokens) == (7936, 256)
    assert p.roofline.tp == p.memory.tp == 2
    assert "TTFT" in p.message and "TPOT" in p.message
    row = p.to_frame().iloc[0]
    assert row["kv_blocks"] == p.memory.kv_blocks and row["tpot_s"] == p.roofline.tpot_s
    assert default_output_tokens(100) == 50 and default_output_tokens(100_000) == 256


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"seq_len": 1}, r"'seq_len' must be >= 2 \(a prompt token and an output token\): got 1"),
        ({"seq_len": 100, "output_tokens": 100}, "'output_tokens' must be < seq_len=100"),
        ({"output_tokens": 0}, "'output_tokens' must be an integer > 0: got 0"),
        ({"mfu": 0}, r"'mfu' must be in \(0, 1\]: got 0"),
    ],
)
def test_plan_bad_input(kwargs, message):
    with pytest.raises(ValueError, match=message):
        plan("llama-2-7b", "a100-80gb", **kwargs)


GRID = dict(
    models=["llama-2-7b", "llama-3-70b", "mistral-7b-v0.1", "mixtral-8x7b", "falcon-40b"],
    gpus=["a100-80gb", "h100-sxm", "rtx-4090", "l4"],
    tps=(1, 2, 3, 8, 64),
    weight_dtypes=("bf16", "int4", "fp8"),
    kv_dtypes=("bf16", "fp8"),
    seq_lens=(2, 3, 4097, 32768),
    batches=(1, 7, 256),
)


@pytest.fixture(scope="module")
def grid():
    return sweep_plans(**GRID)


def test_sweep_shape_and_skipped_tp(grid):
    # tp=3 divides no model's query heads (32, 64, 32, 32, 128): dropped everywhere;
    # tp=64 only divides Llama-3-70B's 64 and Falcon-40B's 128 (both with 8 KV heads, x8 replicas)
    assert 3 not in set(grid["tp"])
    assert set(grid.loc[grid["tp"] == 64, "model"]) == {"llama-3-70b", "falcon-40b"}
    per_config = 4 * 3 * 2 * 4 * 3  # gpus x weight dtypes x KV dtypes x seq_lens x batches
    configs = 5 * 3 + 2  # 5 models x tp 1, 2, 8 + two models x tp 64
    assert len(grid) == configs * per_config
    assert str(grid["model"].dtype) == "category"


@settings(max_examples=40, deadline=None)
@given(i=st.integers(0, 10**9))
def test_every_row_equals_plan(grid, i):
    r = grid.iloc[i % len(grid)]
    p = (
        plan(
            r["model"],
            r["gpu"],
            gpus=int(r["tp"]),
            seq_len=int(r["seq_len"]),
            batch=int(r["batch"]),
            weight_dtype=r["weight_dtype"],
            kv_dtype=r["kv_dtype"],
        )
        .to_frame()
        .iloc[0]
    )
    for col in COMPARED:
        assert _same(r[col], p[col]), (col, r[col], p[col])


def test_sweep_options_reach_every_row():
    kw = dict(
        output_tokens=7,
        gpu_memory_utilization=0.8,
        runtime_reserve_bytes=3 * 2**30,
        max_num_batched_tokens=2048,
        block_size=32,
        mfu=0.4,
        bandwidth_efficiency=0.7,
        interconnect_efficiency=0.6,
        allreduce_latency_s=20e-6,
        zero_point_bits=4,
    )
    df = sweep_plans(
        ["llama-3-70b", "mistral-7b-v0.1"],
        ["h100-sxm"],
        tps=(2, 4),
        weight_dtypes=("int4",),
        seq_lens=(9000,),
        batches=(3,),
        **kw,
    )
    for _, r in df.iterrows():
        p = (
            plan(
                r["model"],
                "h100-sxm",
                gpus=int(r["tp"]),
                seq_len=9000,
                batch=3,
                weight_dtype="int4",
                **kw,
            )
            .to_frame()
            .iloc[0]
        )
        for col in COMPARED:
            assert _same(r[col], p[col]), (col, r[col], p[col])


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"models": []}, "'models' must not be empty"),
        ({"seq_lens": ()}, "'seq_lens' must not be empty"),
        ({"seq_lens": (1, 100)}, "'seq_lens' must be >= 2"),
        ({"seq_lens": (0,)}, "'seq_len' must be an integer > 0: got 0"),
        ({"tps": (3,)}, r"no tp in \[3\] divides the heads of any model given"),
        ({"gpus": ["h100"]}, "unknown GPU 'h100'"),
        ({"output_tokens": 100}, r"'output_tokens' must be < every seq_len \(min 100\)"),
        ({"gpu_memory_utilization": 1.01}, r"'gpu_memory_utilization' must be in \(0, 1\]"),
        ({"batches": (0,)}, "'batch' must be an integer > 0: got 0"),
    ],
)
def test_sweep_bad_input(kwargs, message):
    args = dict(models=["llama-2-7b"], gpus=["h100-sxm"], seq_lens=(100,)) | kwargs
    with pytest.raises(ValueError, match=message):
        sweep_plans(**args)
