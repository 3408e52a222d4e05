"""SGLang's defaults from v0.5.7 to v0.5.23, written out from each release's source (the pypi.org
sglang-<version> wheels): python/sglang/srt/server_args.py ServerArgs._handle_gpu_memory_settings
(to 0.5.18) / sglang/srt/arg_groups/memory_hook.py handle_gpu_memory_settings (0.5.19 on):
  reserved = 512 + max(chunked_prefill_size, 2048) x 1.5 + cuda_graph_max_bs x 2
             + tp x pp / 8 x 1024 [+ the prefill graph's reserve]; max(reserved, 10240) over 60 GiB
  mem_fraction_static = round((gpu_mem - reserved) / gpu_mem, 3)
the prefill graph's reserve (0.5.10 on, when it is on): 1.5 x 1024 with an MLA backend, else
len(capture sizes) x 8, capture sizes = _generate_piecewise_cuda_graph_tokens (0.5.9 - 0.5.13) /
generate_prefill_cuda_graph_batch_sizes (0.5.14 on): range(4, 33, 4) + range(48, 257, 16)
+ range(288, 513, 32) + range(576, 1025, 64) + range(1280, 4097, 256) + range(4608, max + 1, 512).
gpu_mem: nvidia-smi's memory.total in MiB (the hardware presets' driver_total_mib).
"""

import pytest

from calc.serving.engine import engine_config
from calc.serving.plan import prepare

H100, H200, L40S, RTX4090, B200 = 81559, 143771, 46068, 24564, 183359
TOKENS_TO_4096 = 8 + 14 + 8 + 8 + 12  # the five fixed ranges (4 .. 4096)
TOKENS_TO_8192 = TOKENS_TO_4096 + 8  # + 4608 .. 8192 step 512
TOKENS_TO_2048 = 8 + 14 + 8 + 8 + 4  # 1280, 1536, 1792, 2048
TOKENS_TO_16384 = TOKENS_TO_4096 + 24  # + 4608 .. 16384 step 512


def frac(mib, version, mla=False, **kw):
    return engine_config(
        "sglang", version=version, gpu_memory_gib=mib / 1024, mla=mla, **kw
    ).mem_fraction_static


def f(mib, reserved):
    return round((mib - reserved) / mib, 3)


def test_the_brief_example_0510_h100_tp1():
    # 0.5.10 server_args.py: the piecewise CUDA graph on by default (disable_piecewise_cuda_graph
    # False), not MLA: len(piecewise_cuda_graph_tokens) x 8 MiB before the 10 GiB floor
    assert TOKENS_TO_8192 == 58
    reserved = 512 + 8192 * 1.5 + 256 * 2 + 1 / 8 * 1024 + 58 * 8
    assert frac(H100, "0.5.10") == f(H100, reserved) == 0.83


def test_057_to_059_keep_the_056_rule_piecewise_graph_off():
    # 0.5.7 - 0.5.9: enable_piecewise_cuda_graph False by default: no graph term
    for v in ("0.5.7", "0.5.8", "0.5.8.post1", "0.5.9"):
        assert frac(H100, v) == f(H100, 512 + 8192 * 1.5 + 256 * 2 + 1024 / 8)
        assert frac(L40S, v) == f(L40S, 512 + 4096 * 1.5 + 32 * 2 + 1024 / 8)
    with pytest.raises(ValueError, match="'disable_piecewise_cuda_graph' must be True or None"):
        frac(H100, "0.5.9", disable_piecewise_cuda_graph=False)


def test_small_gpus_and_the_020_table():
    # L40S, 0.5.10: chunk 4096, max_bs 32 (35 - 60 GiB, tp < 4); no floor under 60 GiB
    assert frac(L40S, "0.5.10") == f(L40S, 512 + 4096 * 1.5 + 32 * 2 + 128 + TOKENS_TO_4096 * 8)
    # RTX 4090, 0.5.19: chunk 2048, max_bs 24 (< 35 GiB); 0.5.20 memory_hook.py: 4096, 48
    r19 = 512 + 2048 * 1.5 + 24 * 2 + 128 + TOKENS_TO_2048 * 8
    assert frac(RTX4090, "0.5.19") == f(RTX4090, r19)
    r20 = 512 + 4096 * 1.5 + 48 * 2 + 128 + TOKENS_TO_4096 * 8
    cfg = engine_config("sglang", version="0.5.20", gpu_memory_gib=RTX4090 / 1024, mla=False)
    assert (cfg.mem_fraction_static, cfg.chunked_prefill_size, cfg.cuda_graph_max_bs) == (
        f(RTX4090, r20),
        4096,
        48,
    )
    assert engine_config("sglang", version="0.5.20", tensor_parallel_size=4,
                         gpu_memory_gib=RTX4090 / 1024, mla=False).cuda_graph_max_bs == 160  # fmt: skip


def test_b200_tp8_0523():
    # > 160 GiB: chunk 16384, max_bs 512
    reserved = 512 + 16384 * 1.5 + 512 * 2 + 8 / 8 * 1024 + TOKENS_TO_16384 * 8
    assert frac(B200, "0.5.23", tensor_parallel_size=8) == f(B200, reserved)


def test_mla_by_release():
    base = 512 + 8192 * 1.5 + 512 * 2 + 8 / 8 * 1024  # H200 TP 8: max_bs 512
    kw = dict(tensor_parallel_size=8, mla=True)
    # 0.5.10 - 0.5.14 (tc_piecewise): "For MLA backend ... reserved_mem += 1.5 * 1024"
    for v in ("0.5.10", "0.5.12.post1", "0.5.14"):
        assert frac(H200, v, **kw) == f(H200, base + 1.5 * 1024)
    # 0.5.15 - 0.5.16: the breakable graph (CUDA's default) is off for "MLA attention"
    for v in ("0.5.15", "0.5.16"):
        assert frac(H200, v, **kw) == f(H200, base)
    # 0.5.17: off for "MLA attention (non-DSA)": DeepSeek NSA keeps it
    assert frac(H200, "0.5.17", **kw) == f(H200, base)
    assert frac(H200, "0.5.17", nsa=True, **kw) == f(H200, base + 1.5 * 1024)
    # 0.5.18 on: no MLA rule
    assert frac(H200, "0.5.18", **kw) == frac(H200, "0.5.23", **kw) == f(H200, base + 1536)
    # DeepSeek NSA: is_piecewise_cuda_graph_disabled_model to 0.5.12, on in 0.5.13
    assert frac(H200, "0.5.12", nsa=True, **kw) == f(H200, base)
    assert frac(H200, "0.5.13", nsa=True, **kw) == f(H200, base + 1536)


def test_the_plan_passes_mla_and_the_name():
    # the h200 preset's nvidia-smi total, 143771 MiB (sglang#3196's nvidia-smi table)
    cfg = prepare("deepseek-v3", "h200", "sglang", version="0.5.10", tensor_parallel_size=8)[2]
    assert cfg.mem_fraction_static == f(H200, 512 + 8192 * 1.5 + 1024 + 1024 + 1536)
    # llama-2: max tokens min(chunk, 4096) ("llama-2" in model_path.lower())
    cfg = prepare("llama-2-7b", "h100-sxm", "sglang", version="0.5.10")[2]
    assert cfg.mem_fraction_static == f(H100, 512 + 8192 * 1.5 + 512 + 128 + TOKENS_TO_4096 * 8)
    # Qwen3NextForCausalLM: on the disabled list (0.5.10 - 0.5.14), not a breakable rule (the
    # plan's pools for it: tests/test_serving_sglang_hybrid.py; here engine_config alone)
    no_graph = 512 + 8192 * 1.5 + 512 + 128
    q3n = dict(linear_attention=True, model_name="Qwen/Qwen3-Next-80B-A3B-Instruct")
    assert frac(H100, "0.5.12", **q3n) == f(H100, no_graph)
    assert frac(H100, "0.5.15", **q3n) == f(H100, no_graph + TOKENS_TO_8192 * 8)


def test_parallelism_rules():
    def r(tp, pp, graph, dp_extra=0.0):
        return 512 + 8192 * 1.5 + 256 * 2 + tp * pp / 8 * 1024 + dp_extra + graph

    g = TOKENS_TO_8192 * 8
    # pp > 1: off under tc_piecewise (0.5.10 - 0.5.14), on under breakable (0.5.15 - 0.5.18),
    # off by default again from 0.5.19 (apply_cuda_graph_compatibility)
    pp2 = dict(pipeline_parallel_size=2)
    assert frac(H100, "0.5.14", **pp2) == f(H100, r(1, 2, 0))
    assert frac(H100, "0.5.16", **pp2) == f(H100, r(1, 2, g))
    assert frac(H100, "0.5.19", **pp2) == f(H100, r(1, 2, 0))
    # DP attention (tp 2, dp 2: + max_bs x dp x 3): off to 0.5.16, on from 0.5.17
    dpa = dict(tensor_parallel_size=2, data_parallel_size=2, enable_dp_attention=True)
    assert frac(H100, "0.5.16", **dpa) == f(H100, r(2, 1, 0, 256 * 2 * 3))
    assert frac(H100, "0.5.17", **dpa) == f(H100, r(2, 1, g, 256 * 2 * 3))


def test_settings_the_default_reads():
    no_graph = 512 + 8192 * 1.5 + 256 * 2 + 128
    assert frac(H100, "0.5.10", disable_piecewise_cuda_graph=True) == f(H100, no_graph)
    assert frac(H100, "0.5.10", disable_piecewise_cuda_graph=False) == frac(H100, "0.5.10")
    # a given context_length caps the max tokens (0.5.13 - 0.5.17, sglang #21112)
    tok4k = TOKENS_TO_4096 * 8
    assert frac(H100, "0.5.13", max_model_len=4096) == f(H100, no_graph + tok4k)
    assert frac(H100, "0.5.18", max_model_len=4096) == f(H100, no_graph + TOKENS_TO_8192 * 8)
    # 0.5.22: a default max_bs is capped by max_running_requests
    c = engine_config("sglang", version="0.5.22", max_running_requests=64, mla=False)
    assert c.cuda_graph_max_bs == 64
    c = engine_config("sglang", version="0.5.21", max_running_requests=64, mla=False)
    assert c.cuda_graph_max_bs == 256
    g = TOKENS_TO_8192 * 8
    assert frac(H100, "0.5.22", max_running_requests=64) == f(H100, 512 + 12288 + 128 + 128 + g)


def test_refusals_name_what_kvcalc_cannot_know():
    with pytest.raises(ValueError, match="'mla' must be given for sglang 0.5.10"):
        engine_config("sglang", version="0.5.10", gpu_memory_gib=H100 / 1024)
    with pytest.raises(ValueError, match="'disable_piecewise_cuda_graph' must be given"):
        frac(H100, "0.5.12", linear_attention=True, model_name="some-gdn-model")
    assert frac(H100, "0.5.12", linear_attention=True, model_name="x",
                disable_piecewise_cuda_graph=True) == frac(H100, "0.5.9")  # fmt: skip
    # a multimodal default is scaled by the tower (arg_groups/memory_hook.py
    # adjust_mem_fraction_for_vlm): Llama 4's 34 layers x 1408, ratio 2.678 -> 1 - 0.168 (as
    # --enable-multimodal runs it: a multimodal model off the breakable allowlist has no prefill
    # graph, so no graph reserve; calc.serving.sglang_multimodal)
    llama4 = frac(H100, "0.5.23", multimodal="llama4", vision_tower=(34, 1408))
    factor = 0.95 * (1 - 0.1 * (34 * 1408**2 / (24 * 1024**2) - 1))
    text = frac(H100, "0.5.23", disable_piecewise_cuda_graph=True)
    assert llama4 == pytest.approx(text * factor, 1e-12)
    with pytest.raises(ValueError, match="'vision_tower' .* is needed"):
        frac(H100, "0.5.23", multimodal="siglip")
    with pytest.raises(ValueError, match="defaults of 0.4.0 to 0.5.23 only"):
        frac(H100, "0.5.24")
    with pytest.raises(ValueError, match="'disable_piecewise_cuda_graph' is not a vllm setting"):
        engine_config("vllm", disable_piecewise_cuda_graph=True)
