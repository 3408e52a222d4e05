"""vLLM's --cpu-offload-gb (calc.serving.vllm_offload), written out from the 0.10.0 - 0.34.0
sdists (model_executor/offloader/uva.py UVAOffloader._maybe_offload_to_cpu, models/utils.py
make_layers / maybe_offload_to_cpu): each decoder layer, as it is built, moves its parameters in
named_parameters order to the CPU while the bytes moved are under int(GiB x 1024**3); the last one
checked may cross it.

Llama-3.1-8B in bf16, a layer on one of tp ranks: qkv (4,096 + 2 x 1,024) x 4,096 x 2 B / tp,
o 4,096 x 4,096 x 2 B / tp, gate_up 2 x 14,336 x 4,096 x 2 B / tp, down 14,336 x 4,096 x 2 B / tp,
and two 4,096-wide norms (8,192 B each, whole on every rank).
"""

from __future__ import annotations

import pytest

from calc.serving.plan import engine_plan

GIB = 2**30


def _layer(tp: int) -> list[int]:
    return [6144 * 4096 * 2 // tp, 4096 * 4096 * 2 // tp, 2 * 14336 * 4096 * 2 // tp,
            14336 * 4096 * 2 // tp, 8192, 8192]  # fmt: skip


def _moved(tp: int, budget: int) -> int:
    done = 0
    for _ in range(32):
        for n in _layer(tp):
            if done >= budget:
                return done
            done += n
    return done


def plan(version="0.19.0", **kw):
    return engine_plan(
        "llama-3.1-8b", "rtx-4090", "vllm", version=version, max_model_len=8192, **kw
    )


@pytest.mark.parametrize("tp", [1, 2])
def test_the_first_layers_leave_the_gpu(tp):
    budget = 4 * GIB
    moved = _moved(tp, budget)
    # tp 1: 9 layers of 436,224,000 B, then layer 10's qkv, o, gate_up and down (crossing the
    # budget); tp 2: 19 layers of 218,120,192 B, then qkv, o and gate_up
    assert moved == (4_362_223_616 if tp == 1 else 4_303_667_200)
    gpus = dict(tensor_parallel_size=tp)
    full, off = plan(**gpus), plan(cpu_offload_gb=4, **gpus)
    assert full.weights_bytes - off.weights_bytes == moved
    assert f"Total CPU offloaded parameters: {round(moved / GIB, 2)} GiB" in off.log_lines
    assert (
        off.log_lines.index(f"Total CPU offloaded parameters: {round(moved / GIB, 2)} GiB")
        < [i for i, x in enumerate(off.log_lines) if x.startswith("Model loading took")][0]
    )
    # the profile does not change: the KV cache gains what left the GPU (to the 0.01 GiB logged)
    gained = off.available_kv_cache_bytes - full.available_kv_cache_bytes
    assert abs(gained - moved) < 0.01 * GIB


def test_the_total_line_from_0_17_and_a_budget_beyond_the_layers():
    assert not any("Total CPU offloaded" in x for x in plan("0.16.0", cpu_offload_gb=4).log_lines)
    # 100 GiB: every layer, but not the embedding or LM head (128,256 x 4,096 x 2 B each)
    p = plan(cpu_offload_gb=100)
    assert (
        f"Total CPU offloaded parameters: {round(32 * sum(_layer(1)) / GIB, 2)} GiB" in p.log_lines
    )


@pytest.mark.parametrize(
    ("model", "kw", "message"),
    [
        ("llama-3.1-8b", dict(version="0.7.3"), "vLLM V0"),
        ("llama-3.1-8b", dict(weight_dtype="int4"), "a quantized model"),
        ("deepseek-v3", dict(tensor_parallel_size=8), "a quantized model"),
        ("gemma-3-4b", dict(version="0.29.0"), "a vision tower from 0.29.0"),
        ("qwen3.5-27b", dict(speculative_method="mtp", available_kv_gib=10), "an MTP drafter"),
    ],
)
def test_what_is_not_modelled(model, kw, message):
    kw = {"version": "0.28.0", **kw}
    with pytest.raises(ValueError, match=f"'cpu_offload_gb' with {message}.* is not modelled"):
        engine_plan(model, "h200", "vllm", cpu_offload_gb=2, max_model_len=4096, **kw)
    assert engine_plan(
        "gemma-3-4b", "h200", "vllm", version="0.28.0", cpu_offload_gb=2, max_model_len=4096
    ).fits  # fmt: skip  (a tower before 0.29: the layers)


def test_bad_values_and_the_log(capsys):
    from calc.cli import main
    from calc.serving.logs import parse_log

    argv = ["plan", "llama-3.1-8b", "--gpu", "rtx-4090", "--engine", "vllm", "--cpu-offload-gb"]
    assert main([*argv, "-1"]) == 2
    assert "'cpu_offload_gb' input should be greater than or equal to 0" in capsys.readouterr().err
    got = parse_log(
        "non-default args: {'cpu_offload_gb': 4.0}\n"
        "INFO [uva.py:69] Total CPU offloaded parameters: 4.06 GiB"
    )
    assert (got["cpu_offload_gb"], got["cpu_offloaded_gib"]) == (4.0, 4.06)


def test_sglang_takes_the_same_layers_off():
    """SGLang's --cpu-offload-gb (OffloaderV1.maybe_offload_to_cpu, srt/utils/offloader.py;
    srt/utils.py in 0.5.0rc0): the same loop over make_layers' layers. Its "mem usage" is the
    drop in free memory after empty_cache, so the small freed blocks whose segments stay in use
    (the norms) are not given back: the drop is the offloaded bytes less at most a few of them."""
    kw = dict(version="0.5.23")
    full = engine_plan("llama-3.1-8b", "rtx-4090", "sglang", **kw)
    off = engine_plan("llama-3.1-8b", "rtx-4090", "sglang", cpu_offload_gb=4, **kw)
    moved = _moved(1, 4 * GIB)
    assert 0 <= moved - (full.weights_bytes - off.weights_bytes) < 2**20
    assert off.gpu_kv_cache_tokens > full.gpu_kv_cache_tokens
    with pytest.raises(ValueError, match="valid integer"):
        engine_plan("llama-3.1-8b", "rtx-4090", "sglang", cpu_offload_gb=4.5, **kw)
    with pytest.raises(ValueError, match="'cpu_offload_gb' with MLA"):
        engine_plan("deepseek-v3", "h200", "sglang", cpu_offload_gb=4, tensor_parallel_size=8, **kw)
