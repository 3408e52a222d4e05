"""vLLM's suggested --kv-cache-memory after CUDA-graph capture (calc/serving/vllm_suggestion.py;
Worker.compile_or_warm_up_model in vllm/v1/worker/gpu_worker.py, logger.info from 0.26.0):

    non_kv = consumed + peak activation + captured graphs
    to_req = ceil(total x utilization) - non_kv - 150 MiB
    to_gpu = init free - non_kv - 150 MiB

with, from 0.27.0, consumed = weights + non-torch and the peak = transient headroom + the
CUDA-graph estimate the profile applied (so the graphs count twice); 0.26: weights + peak +
non-torch + graphs. The terms below are the plan's own (kvcalc's estimates); what is checked is
vLLM's composition of them and its words. The public log is benchmarks/engine_logs/
vllm-enginrect-qwen25-05b-4090-serve.toml (github.com/enginrect/llmso @ 06bc0e58)."""

import math

import pytest

from calc.serving.logs import parse_log
from calc.serving.plan import engine_plan

GIB, MIB = 2**30, 2**20


def plan(version="0.33.0", **kw):
    return engine_plan(
        "llama-3.1-8b", "h100-sxm", "vllm", version=version, max_model_len=8192, **kw
    )


def _line(p):
    (line,) = [x for x in p.log_lines if x.startswith("Free memory on device")]
    return line


def test_the_suggestion_is_vllms_sum_of_the_plans_terms():
    p = plan()
    requested = math.ceil(p.total_memory_bytes * 0.92)
    cg = p.cudagraph_bytes  # 0.33.0 subtracts the estimate, and the pool is captured
    assert cg > 0
    non_kv = (p.weights_bytes + p.non_torch_bytes) + (p.activation_bytes + cg) + cg
    assert p.suggested_kv_cache_memory_bytes == requested - non_kv - 150 * MIB
    # the graphs twice: the available memory less the captured pool and the buffer (+-1 B: the
    # available memory floors total x utilization, the requested memory rounds it up)
    gap = p.available_kv_cache_bytes - p.suggested_kv_cache_memory_bytes
    assert abs(gap - (cg + 150 * MIB)) <= 1
    line = _line(p)
    assert line.startswith(f"Free memory on device ({round(p.initial_free_bytes / GIB, 2)}/")
    assert "Desired GPU memory utilization is (0.92, " in line
    assert "GiB for consumed memory (weights + non-torch), " in line
    assert (
        f"`--kv-cache-memory={p.suggested_kv_cache_memory_bytes}` "
        f"({round(p.suggested_kv_cache_memory_bytes / GIB, 2)} GiB) to fit into requested memory"
    ) in line
    assert line.endswith(
        f"Current kv cache memory in use is {round(p.available_kv_cache_bytes / GIB, 2)} GiB."
    )


def test_0_26_words_and_sum():
    p = plan("0.26.0")
    line = _line(p)
    assert " GiB for weight, " in line and " GiB for non-torch memory, and " in line
    # Model Runner V2 (0.22 - 0.28) subtracts no estimate; the captured pool is still there
    assert p.cudagraph_bytes == 0
    requested = math.ceil(p.total_memory_bytes * 0.92)
    captured = int(0.84 * GIB)  # kvcalc's one CUDA-graph figure (overheads.CUDAGRAPH_ESTIMATE_GIB)
    non_kv = p.weights_bytes + p.activation_bytes + p.non_torch_bytes + captured
    assert p.suggested_kv_cache_memory_bytes == requested - non_kv - 150 * MIB
    assert f"and {round(captured / GIB, 2)} GiB for CUDAGraph memory." in line


def test_enforce_eager_captures_nothing():
    p = plan(enforce_eager=True)
    assert "and 0.0 GiB for CUDAGraph memory." in _line(p)
    assert abs(p.suggested_kv_cache_memory_bytes - (p.available_kv_cache_bytes - 150 * MIB)) <= 1


@pytest.mark.parametrize(
    "kw",
    [
        dict(version="0.25.1"),  # logger.debug up to 0.25.x
        dict(available_kv_gib=20.0),  # given: no profile terms of kvcalc's own
        dict(kv_cache_memory_bytes="20G"),  # vLLM logs it only when the memory was profiled
        dict(max_model_len=131072, gpu_memory_utilization=0.3),  # refused before capture
    ],
)
def test_not_logged(kw):
    kw = {"version": "0.33.0", **kw}
    p = engine_plan("llama-3.1-8b", "h100-sxm", "vllm", **{"max_model_len": 8192, **kw})
    assert p.suggested_kv_cache_memory_bytes is None
    assert not any(x.startswith("Free memory on device") for x in p.log_lines)


def test_0_34_extensible_before_the_warmup_line():
    p = plan("0.34.0")
    lines = p.log_lines
    at = lines.index(_line(p))
    assert lines[at + 1].startswith("Memory after warmup")
    # utilization 1.0; the profile applied no estimate (the extensible cache)
    requested = p.total_memory_bytes
    cg = p.cudagraph_bytes
    non_kv = (p.weights_bytes + p.non_torch_bytes) + p.activation_bytes + cg
    assert p.suggested_kv_cache_memory_bytes == requested - non_kv - 150 * MIB
    assert "Desired GPU memory utilization is (1.0, " in _line(p)


SERVE_LINE = (
    "(EngineCore pid=12764) INFO 08-22 20:20:16 [gpu_worker.py:789] Free memory on device "
    "(22.45/23.99 GiB) on startup. Desired GPU memory utilization is (0.85, 20.39 GiB). Actual "
    "usage is 1.49 GiB for consumed memory (weights + non-torch), 0.25 GiB for peak activation, "
    "and 0.37 GiB for CUDAGraph memory. Replace gpu_memory_utilization config with "
    "`--kv-cache-memory=19468210074` (18.13 GiB) to fit into requested memory, or "
    "`--kv-cache-memory="
)


def test_parse_log_reads_the_line():
    got = parse_log(SERVE_LINE)
    assert got["suggested_kv_cache_memory_bytes"] == 19468210074
    assert got["init_free_gib"] == 22.45 and got["total_gpu_memory_gib"] == 23.99
    # the logged line's own arithmetic: 20.39 - 1.49 - 0.25 - 0.37 - 150 MiB = 18.13 GiB
    assert round(20.39 - 1.49 - 0.25 - 0.37 - 150 / 1024, 2) == 18.13


def test_calibrated_init_snapshot_sizes_the_extensible_cache():
    base = plan("0.34.0")
    same = plan("0.34.0", calibration={"init_free_bytes": base.initial_free_bytes})
    assert same.measured_kv_cache_bytes == base.measured_kv_cache_bytes
    # a logged snapshot 10 GiB under the estimate: the headroom term, init free - used - margin,
    # is the smaller one in both, so the measured cache is 10 GiB less
    low = plan("0.34.0", calibration={"init_free_bytes": base.initial_free_bytes - 10 * GIB})
    assert low.initial_free_bytes == base.initial_free_bytes - 10 * GIB
    assert low.measured_kv_cache_bytes == base.measured_kv_cache_bytes - 10 * GIB
