"""One implementation per number: the scalar planners and the grids are the same code.

`plan` / `memory_plan` / `roofline` and `sweep_plans` both evaluate calc.plan_core; `engine_plan`
and `engine_plan_grid` both chain calc.serving.figures. Two kinds of check:
- agreement: for random settings (hypothesis) a scalar plan equals its grid row, integers
  exactly and floats to 1e-12 (a second implementation that drifts fails here);
- routing: a change made to the core (monkeypatched) reaches the scalar plan and the grid alike
  (a second implementation that does not call the core fails here even when it agrees today).
These compare the code with itself, by design: the numbers' own expected values, from
independent sources, are in test_capacity.py, test_roofline.py and test_serving_*.py.
"""

import math

import numpy as np
import pytest
from conftest import PLAN_COLUMNS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from calc import plan_core
from calc.plan import plan
from calc.plan_sweep import sweep_plans
from calc.serving import figures
from calc.serving.grid import engine_plan_grid
from calc.serving.plan import engine_plan

# full attention, all-sliding (Mistral), alternating sliding (Gemma 2/3), MoE (Mixtral),
# parallel attention + MLP blocks (Falcon), GQA with KV-head replication at high tp
GENERIC_MODELS = [
    "llama-2-7b",
    "llama-3-70b",
    "mistral-7b-v0.1",
    "gemma-2-9b",
    "gemma-3-1b",
    "mixtral-8x7b",
    "falcon-40b",
    "qwen2-7b",
]
GPUS = ["a100-80gb", "h100-sxm", "l4", "rtx-4090", "mi300x"]
SWEEP_COLUMNS = PLAN_COLUMNS


def _same(a, b) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-12, abs_tol=0.0)
    return a == b


def _scalar(x):
    return x.item() if hasattr(x, "item") else x


@st.composite
def generic_settings(draw):
    seq_len = draw(st.integers(2, 300_000))
    out = draw(st.one_of(st.none(), st.integers(1, 1000)))
    if out is not None and out >= seq_len:
        out = None
    return dict(
        model=draw(st.sampled_from(GENERIC_MODELS)),
        gpu=draw(st.sampled_from(GPUS)),
        tp=draw(st.sampled_from([1, 2, 4, 8])),
        pp=draw(st.sampled_from([1, 1, 2, 3])),
        weight_dtype=draw(st.sampled_from(["bf16", "fp16", "fp8", "int8", "int4", "fp32"])),
        kv_dtype=draw(st.sampled_from(["bf16", "fp8", "fp32"])),
        seq_len=seq_len,
        batch=draw(st.integers(1, 1024)),
        options=dict(
            output_tokens=out,
            gpu_memory_utilization=draw(st.sampled_from([0.5, 0.85, 0.9, 0.95, 1.0])),
            block_size=draw(st.sampled_from([1, 8, 16, 32, 128])),
            max_num_batched_tokens=draw(st.sampled_from([512, 2048, 8192])),
            max_num_seqs=draw(st.sampled_from([1, 256, 1024])),
            mfu=draw(st.floats(0.05, 1.0)),
            bandwidth_efficiency=draw(st.floats(0.05, 1.0)),
            interconnect_efficiency=draw(st.floats(0.05, 1.0)),
            allreduce_latency_s=draw(st.floats(0.0, 1e-4)),
        ),
    )


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(s=generic_settings())
def test_plan_equals_its_sweep_row(s):
    o = s["options"]
    try:
        p = plan(
            s["model"],
            s["gpu"],
            gpus=s["tp"] * s["pp"],
            tp=s["tp"],
            seq_len=s["seq_len"],
            batch=s["batch"],
            weight_dtype=s["weight_dtype"],
            kv_dtype=s["kv_dtype"],
            **o,
        )
    except ValueError as e:  # a tp or pp the model cannot use: the sweep skips it
        assert "'tp'" in str(e) or "'pp'" in str(e)
        return
    df = sweep_plans(
        [s["model"]],
        [s["gpu"]],
        tps=[s["tp"]],
        pps=[s["pp"]],
        weight_dtypes=[s["weight_dtype"]],
        kv_dtypes=[s["kv_dtype"]],
        seq_lens=[s["seq_len"]],
        batches=[s["batch"]],
        **o,
    )
    assert len(df) == 1
    row, want = df.iloc[0], p.to_frame().iloc[0]
    for col in SWEEP_COLUMNS:
        assert _same(_scalar(row[col]), _scalar(want[col])), (col, row[col], want[col])
    assert (row["pp"], row["kv_cache_bytes"]) == (p.memory.pp, p.memory.kv_cache_bytes)
    assert row["decode_last_bound"] == p.roofline.decode_last.bound


ENGINE_MODELS = [
    "llama-3.1-8b",
    "llama-3.1-70b",
    "qwen3-8b",
    "gemma-3-27b",
    "mistral-7b-v0.1",
    "deepseek-v3",
    "qwen3-next-80b-a3b",
    "gpt-oss-20b",
]


@st.composite
def engine_settings(draw):
    engine = draw(st.sampled_from(["vllm", "sglang"]))
    kw = dict(
        tensor_parallel_size=draw(st.sampled_from([1, 2, 4])),
        max_model_len=draw(st.sampled_from([1, 2048, 4097, 8192, 32768])),
    )
    if engine == "vllm":
        kw["version"] = draw(st.sampled_from(["0.8.5", "0.10.2", "0.11.0", "0.16.0", "0.21.0"]))
        kw["gpu_memory_utilization"] = draw(st.floats(0.3, 1.0))
        kw["pipeline_parallel_size"] = draw(st.sampled_from([1, 1, 2, 3]))
    else:
        kw["mem_fraction_static"] = draw(st.floats(0.3, 0.95))
        if draw(st.booleans()):
            kw["max_running_requests"] = draw(st.integers(1, 64))
    return dict(
        model=draw(st.sampled_from(ENGINE_MODELS)),
        gpu=draw(st.sampled_from(["h100-sxm", "a100-80gb", "l4", "h200"])),
        engine=engine,
        given=draw(st.one_of(st.none(), st.floats(0.0, 60.0))),
        weight_dtype=draw(st.sampled_from(["bf16", "fp8"])),
        kw=kw,
    )


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(s=engine_settings())
def test_engine_plan_equals_its_grid_row(s):
    kw, axis = s["kw"], "gpu_memory_utilization" if s["engine"] == "vllm" else "mem_fraction_static"
    common = dict(weight_dtype=s["weight_dtype"])
    try:
        p = engine_plan(
            s["model"], s["gpu"], s["engine"], available_kv_gib=s["given"], **common, **kw
        )
    except ValueError as e:  # a layout or a setting the engine refuses: so does the grid
        with pytest.raises(ValueError, match=".+") as grid_error:
            engine_plan_grid(s["model"], s["gpu"], s["engine"], **common, **kw)
        assert str(grid_error.value) == str(e)
        return
    grid_kw = {**kw, axis: [kw[axis]], "max_model_len": [kw["max_model_len"]]}
    if s["given"] is not None:
        grid_kw["available_kv_gib"] = [s["given"]]
    df = engine_plan_grid(s["model"], s["gpu"], s["engine"], **common, **grid_kw)
    assert len(df) == 1
    row = df.iloc[0]
    assert int(row["num_gpu_blocks"]) == p.num_gpu_blocks
    assert int(row["gpu_kv_cache_tokens"]) == p.gpu_kv_cache_tokens
    assert round(float(row["available_kv_cache_gib"]), 2) == p.available_kv_cache_gib
    assert _same(float(row["available_kv_cache_gib"]) * 2**30, float(p.available_kv_cache_bytes))
    assert _same(float(row["max_concurrency"]), float(p.max_concurrency))


def test_grid_rows_follow_the_axes_in_order():
    """A 2 x 3 grid: each row is engine_plan at its point (C order over the axes as given)."""
    us, lens = [0.9, 0.6], [4096, 1024, 8192]
    df = engine_plan_grid(
        "llama-3.1-70b",
        "h100-sxm",
        tensor_parallel_size=2,
        pipeline_parallel_size=2,
        gpu_memory_utilization=us,
        max_model_len=lens,
    )
    points = [(u, n) for u in us for n in lens]
    assert list(zip(df["gpu_memory_utilization"], df["max_model_len"], strict=True)) == points
    for (u, n), blocks in zip(points, df["num_gpu_blocks"], strict=True):
        p = engine_plan(
            "llama-3.1-70b",
            "h100-sxm",
            tensor_parallel_size=2,
            pipeline_parallel_size=2,
            gpu_memory_utilization=u,
            max_model_len=n,
        )
        assert int(blocks) == p.num_gpu_blocks


def test_grid_checks_every_axis_value():
    """Each max_model_len of the grid is checked as engine_plan checks it, not only the first."""
    with pytest.raises(ValueError, match=r"User-specified max_model_len \(262144\)"):
        engine_plan_grid("llama-3.1-8b", "h100-sxm", max_model_len=[4096, 262144])
    with pytest.raises(ValueError, match="'gpu_memory_utilization' must be in"):
        engine_plan_grid("llama-3.1-8b", "h100-sxm", gpu_memory_utilization=[0.9, 1.5])


# --- routing: the core is the only implementation ----------------------------------------------


def _shifted(fn, key, delta):
    def wrapped(*args, **kwargs):
        out = dict(fn(*args, **kwargs))
        out[key] = out[key] + delta
        return out

    return wrapped


def test_a_change_to_plan_core_reaches_plan_and_sweep(monkeypatch):
    args = dict(seq_lens=[4096], batches=[3], tps=[2])
    before_p = plan("gemma-2-9b", "h100-sxm", gpus=2, seq_len=4096, batch=3)
    before_s = sweep_plans(["gemma-2-9b"], ["h100-sxm"], **args).iloc[0]
    monkeypatch.setattr(plan_core, "memory", _shifted(plan_core.memory, "kv_blocks", 7))
    monkeypatch.setattr(plan_core, "latency", _shifted(plan_core.latency, "tpot_s", 1.0))
    after_p = plan("gemma-2-9b", "h100-sxm", gpus=2, seq_len=4096, batch=3)
    after_s = sweep_plans(["gemma-2-9b"], ["h100-sxm"], **args).iloc[0]
    assert after_p.memory.kv_blocks - before_p.memory.kv_blocks == 7
    assert after_s["kv_blocks"] - before_s["kv_blocks"] == 7
    assert after_p.roofline.tpot_s - before_p.roofline.tpot_s == pytest.approx(1.0)
    assert after_s["tpot_s"] - before_s["tpot_s"] == pytest.approx(1.0)


@pytest.mark.parametrize(
    "engine, fn, axis",
    [
        ("vllm", "vllm_figures", "gpu_memory_utilization"),
        ("sglang", "sglang_figures", "mem_fraction_static"),
    ],
)
def test_a_change_to_the_figures_reaches_engine_plan_and_grid(monkeypatch, engine, fn, axis):
    kw = {axis: 0.8, "max_model_len": 8192}
    before_p = engine_plan("llama-3.1-8b", "h100-sxm", engine, **kw)
    before_g = engine_plan_grid("llama-3.1-8b", "h100-sxm", engine, **{axis: [0.8]}).iloc[0]
    monkeypatch.setattr(figures, fn, _shifted(getattr(figures, fn), "num_gpu_blocks", 5))
    after_p = engine_plan("llama-3.1-8b", "h100-sxm", engine, **kw)
    after_g = engine_plan_grid("llama-3.1-8b", "h100-sxm", engine, **{axis: [0.8]}).iloc[0]
    assert after_p.num_gpu_blocks - before_p.num_gpu_blocks == 5
    assert after_g["num_gpu_blocks"] - before_g["num_gpu_blocks"] == 5


def test_core_helpers_take_scalars_and_arrays_alike():
    lo, hi = np.array([1, 5, 9, 3]), np.array([10, 4, 100, 3])
    a0, a1, b0, b1 = 2.0, 0.5, -1.0, 1.5
    vec = plan_core.sum_max_affine(lo, hi, a0, a1, b0, b1)
    for i in range(len(lo)):
        brute = sum(max(a0 + a1 * c, b0 + b1 * c) for c in range(int(lo[i]), int(hi[i]) + 1))
        one = plan_core.sum_max_affine(int(lo[i]), int(hi[i]), a0, a1, b0, b1)
        assert one == pytest.approx(brute, rel=1e-12) and vec[i] == pytest.approx(one, rel=1e-12)
