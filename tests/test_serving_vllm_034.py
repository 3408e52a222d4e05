"""vLLM 0.34.0: the 64-token default block and the extensible KV cache (calc.serving.vllm_block,
calc.serving.vllm_extensible). Expected values are the 0.34.0 sdist's arithmetic written out
here (vllm/config/cache.py, vllm/platforms/interface.py, vllm/platforms/rocm.py,
vllm/v1/worker/extensible_kv_cache.py, vllm/v1/core/kv_cache_planning.py), with the few terms
kvcalc estimates (weights, activation peak, non-torch, CUDA graphs) read off the plan."""

import numpy as np
import pytest

import calc
from calc.serving.engine import engine_config
from calc.serving.grid import engine_plan_grid
from calc.serving.plan import engine_plan
from calc.serving.vllm_extensible import blocks_within, measure_kv_cache_bytes

GIB, MIB = 2**30, 2**20


def cdiv(a, b):
    return -(-a // b)


def test_defaults_by_release_and_vendor():
    new = engine_config("vllm", version="0.34.0", gpu_vendor="NVIDIA")
    # CacheConfig.DEFAULT_BLOCK_SIZE = 64; resolved_gpu_memory_utilization: 1.0 extensible
    assert (new.block_size, new.gpu_memory_utilization, new.enable_extensible_kv_cache) == (
        64,
        1.0,
        True,
    )
    off = engine_config(
        "vllm", version="0.34.0", gpu_vendor="NVIDIA", enable_extensible_kv_cache=False
    )
    assert (off.gpu_memory_utilization, off.enable_extensible_kv_cache) == (0.92, False)
    old = engine_config("vllm", version="0.33.0", gpu_vendor="NVIDIA")
    assert (old.block_size, old.gpu_memory_utilization, old.enable_extensible_kv_cache) == (
        16,
        0.92,
        False,
    )
    # ROCm: ROCM_ATTN first, its get_preferred_block_size is 16 (rocm_attn.py)
    amd = engine_config("vllm", version="0.34.0", gpu_vendor="AMD")
    assert (amd.block_size, amd.enable_extensible_kv_cache) == (16, True)
    with pytest.raises(ValueError, match="'enable_extensible_kv_cache' is a vLLM setting from"):
        engine_config("vllm", version="0.33.0", enable_extensible_kv_cache=True)
    with pytest.raises(ValueError, match="it is only supported on CUDA and ROCm"):
        engine_config("vllm", version="0.34.0", gpu_vendor="Intel", enable_extensible_kv_cache=True)
    assert not engine_config(
        "vllm", version="0.34.0", gpu_vendor="Intel"
    ).enable_extensible_kv_cache


def test_rocm_logs_the_16_token_block():
    p = engine_plan("llama-3.1-8b", "mi300x", "vllm", version="0.34.0", available_kv_gib=10)
    assert p.log_lines[0] == "Setting kv cache block size to 16 for ROCM_ATTN backend(s)."
    assert p.page_bytes == 16 * 8 * 128 * 2 * 2


def test_given_memory_plans_64_token_blocks():
    # llama-3.1-8b: 32 layers x 8 KV heads x 128, bf16; one block of every layer = 64 x 32 x 4 KiB
    p = engine_plan("llama-3.1-8b", "h100-sxm", "vllm", version="0.34.0", available_kv_gib=10)
    blocks = 10 * GIB // (64 * 32 * 2 * 8 * 128 * 2)
    assert p.num_gpu_blocks == blocks == 1280
    L = 131072
    assert p.max_concurrency == blocks / (L // 64)
    assert p.gpu_kv_cache_tokens == int(blocks / (L // 64) * L)
    assert "Available KV cache memory" not in " ".join(p.log_lines)  # given: the measured budget


def test_measure_kv_cache_bytes_term_by_term():
    # init_free 79 GiB, 60 GiB free after warmup, 0.5 GiB committed, util 1.0 of 80 GiB
    init, free, held, req = 79 * GIB, 60 * GIB, GIB // 2, 80 * GIB
    transient = 2 * GIB
    non_kv = init - free - held  # 18.5 GiB
    margin = max(GIB, int(0.75 * transient))  # 1.5 GiB
    expected = min(req - non_kv, free + held - margin) - max(transient, 0)
    assert expected == 60 * GIB + GIB // 2 - 3 * GIB // 2 - 2 * GIB
    assert measure_kv_cache_bytes(init, free, held, req, transient, 0, GIB) == expected
    # an explicit utilization of 0.9 binds: 72 GiB - 18.5 < 60.5 - 1.5
    req = 72 * GIB
    assert measure_kv_cache_bytes(init, free, held, req, transient, 0, GIB) == (
        72 * GIB - non_kv - transient
    )
    # the reservation growth is kept free when larger than the transient peak
    assert measure_kv_cache_bytes(init, free, held, 80 * GIB, transient, 3 * GIB, GIB) == (
        60 * GIB + GIB // 2 - 3 * GIB // 2 - 3 * GIB
    )


def test_blocks_within_rounds_every_segment_to_the_granule():
    # one 3 MiB page: one block maps ceil(3 / 2) x 2 MiB = 4 MiB, so 3.5 MiB holds none
    assert blocks_within(3 * MIB + MIB // 2, 3 * MIB, 1, 10) == 0
    assert blocks_within(4 * MIB, 3 * MIB, 1, 10) == 1
    # 2 segments of 3 MiB pages, 13 MiB: 2 blocks are 2 x ceil(6 / 2) x 2 MiB = 12 MiB
    assert blocks_within(13 * MIB, 3 * MIB, 2, 10) == 2
    assert blocks_within(13 * MIB, 3 * MIB, 2, 1) == 1  # the reserved capacity caps it
    got = blocks_within(np.array([4 * MIB, 12 * MIB]), 3 * MIB, 1, 10)
    assert list(got) == [1, 4]


def test_derived_plan_from_the_measured_memory():
    p = engine_plan("llama-3.1-8b", "h100-sxm", "vllm", version="0.34.0")
    assert p.extensible_kv_cache
    total, w = p.total_memory_bytes, p.weights_bytes
    act, nt, cg = p.activation_bytes, p.non_torch_bytes, p.cudagraph_bytes
    # "Available KV cache memory": ceil(total x 1.0) - non_kv_cache_memory, no CUDA-graph
    # estimate (profile_cudagraph_memory returns 0 with the extensible cache)
    assert p.available_kv_cache_bytes == total - w - act - nt
    # after warmup: the CUDA context (0.38 GiB, calc.serving.sglang_memory's calibration) was
    # gone before the init snapshot; the graphs stay resident; margin max(1 GiB, 0.75 x peak)
    headroom = total - int(0.38 * GIB) - w - nt - cg
    kv = headroom - max(GIB, int(0.75 * act)) - act
    assert p.measured_kv_cache_bytes == kv
    page = 64 * 8 * 128 * 2 * 2  # 256 KiB a layer: 8 blocks fill one 2 MiB granule
    blocks = min(kv // (32 * page), kv // (32 * 2 * MIB) * 8)
    assert p.num_gpu_blocks == blocks
    line = next(x for x in p.log_lines if x.startswith("Memory after warmup"))
    assert f"; {blocks} KV cache blocks ({blocks * 32 * page / GIB:.2f} GiB) fit" in line
    assert f"within the requested {total / GIB:.2f} GiB." in line


def test_grid_plans_as_the_single_plan():
    us = np.array([0.8, 0.9, 1.0])
    df = engine_plan_grid(
        "qwen3-32b", "h100-sxm", "vllm", version="0.34.0", gpu_memory_utilization=us
    )
    for u, row in zip(us, df.itertuples(), strict=True):
        p = engine_plan("qwen3-32b", "h100-sxm", "vllm", version="0.34.0", gpu_memory_utilization=u)
        assert (row.num_gpu_blocks, row.gpu_kv_cache_tokens) == (
            p.num_gpu_blocks,
            p.gpu_kv_cache_tokens,
        )


def test_an_explicit_utilization_caps_the_measured_budget():
    p = engine_plan(
        "llama-3.1-8b", "h100-sxm", "vllm", version="0.34.0", gpu_memory_utilization=0.9
    )
    total, w = p.total_memory_bytes, p.weights_bytes
    act, nt, cg = p.activation_bytes, p.non_torch_bytes, p.cudagraph_bytes
    # requested - non_kv_used binds: ceil(0.9 x total) - (weights + non-torch + graphs) - peak
    assert p.measured_kv_cache_bytes == -(-int(total * 9) // 10) - w - nt - cg - act


def test_refusals_in_the_release_words():
    # 1 GiB holds 512 blocks of 16 tokens of every layer (2 MiB): max_model_len 8192 needs all
    kw = dict(available_kv_gib=1.0, max_model_len=8192, block_size=16)
    assert engine_plan("llama-3.1-8b", "h100-sxm", "vllm", version="0.28.0", **kw).fits
    # 0.29.0 checks the memory less the null block: 1 GiB - 2 MiB < 1 GiB
    p = engine_plan("llama-3.1-8b", "h100-sxm", "vllm", version="0.29.0", **kw)
    assert p.refusal.startswith(
        "To serve at least one request with the model's max seq len (8192), (1.00 GiB KV cache "
        "is needed, which is larger than the available KV cache memory (1.00 GiB). Based on the "
        "available memory, the estimated maximum model length is 8176. Try increasing "
        "`gpu_memory_utilization` (which also controls CPU memory on the CPU backend)"
    )
    old = engine_plan("llama-3.1-8b", "h100-sxm", "vllm", version="0.20.0", available_kv_gib=0.5)
    assert "models's max seq len" in old.refusal and old.refusal.endswith(
        "See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details."
    )
    # 0.34.0 extensible, derived: too long for the measured blocks on an L4
    p = engine_plan("qwen3-32b", "rtx-4090", "vllm", version="0.34.0", max_model_len=40960)
    assert not p.fits and "The extensible KV cache already takes all device memory" in p.refusal


def test_mtp_drafter_on_model_runner_v2_speculators():
    """0.34.0's MTPSpeculator shares the target's embedding and LM head as V1 did (eagle/utils.py
    load_eagle_model), and target_dependent_ar/speculator.py load_model then allocates
    torch.zeros(max_num_batched_tokens, hidden_size) in the model dtype inside the load's
    DeviceMemoryProfiler, when the target takes multimodal inputs and the drafter merges them
    (Qwen3_5MTP is SupportsMultiModal). Qwen3.5-27B (vision tower, h 5,120) on an H100 at 0.34.0:
    `vllm serve`'s default max_num_batched_tokens on a GPU of 70 GiB or more that is no A100 is
    8,192 (0.34.0 engine/arg_utils.py, OPENAI_API_SERVER), so 8,192 x 5,120 x 2 B =
    83,886,080 B more than 0.33.0's figure."""
    kw = dict(available_kv_gib=20, speculative_method="mtp", max_model_len=32768)
    old, new = (
        engine_plan("qwen3.5-27b", "h100-sxm", "vllm", version=v, **kw)
        for v in ("0.33.0", "0.34.0")
    )
    assert new.draft_layers == 1 and new.weights_bytes - old.weights_bytes == 8192 * 5120 * 2
    smaller = engine_plan(
        "qwen3.5-27b", "h100-sxm", "vllm", version="0.34.0", max_num_batched_tokens=2048, **kw
    )
    assert new.weights_bytes - smaller.weights_bytes == (8192 - 2048) * 5120 * 2
    # DeepSeek's MTP module is no SupportsMultiModal, and a text-only target takes no images:
    # both drafters weigh what they did on V1's proposer
    for model in ("deepseek-v3", calc.load_preset("qwen3.5-27b").replace(vision=None)):
        a, b = (
            engine_plan(model, "h100-sxm", "vllm", version=v, tensor_parallel_size=8, **kw)
            for v in ("0.33.0", "0.34.0")
        )  # fmt: skip
        assert a.weights_bytes == b.weights_bytes is not None


def test_multi_module_mtp_caches_the_draft_embeddings():
    """With more than one MTP module and k > 1 (SpeculativeConfig.use_multi_module_mtp) 0.34.0's
    MultiModuleMTPSpeculator.load_model also allocates cached_draft_input_embeds, (max_num_seqs,
    k - 1, h) in the model dtype: for Qwen3.5-27B with 2 modules, k = 3, 256 sequences,
    256 x 2 x 5,120 x 2 B beside the 8,192 x 5,120 x 2 B input buffer."""
    from calc.serving.vllm_drafter import v2_load_buffers

    spec = calc.load_preset("qwen3.5-27b")
    assert v2_load_buffers(spec, (0, 34, 0), "bf16", 2, 3, 8192, 256) == (8192 + 512) * 5120 * 2
    assert v2_load_buffers(spec, (0, 34, 0), "bf16", 1, 3, 8192, 256) == 8192 * 5120 * 2
    assert v2_load_buffers(spec, (0, 34, 0), "fp32", 2, 1, 100, 256) == 100 * 5120 * 4
    assert v2_load_buffers(spec, (0, 33, 0), "bf16", 2, 3, 8192, 256) == 0  # V1's __init__


# the worker's line as vllm/v1/worker/extensible_kv_cache.py (0.34.0, lines 693-707) formats it;
# its figures are made up (no public 0.34.0 log yet): they are inputs, never expected values
WARMUP = (
    "(EngineCore pid=7) INFO 12-01 10:00:00 [extensible_kv_cache.py:693] Memory after warmup: "
    "62.79 GiB free, 0.06 GiB committed to the KV cache, 0.72 GiB kept for transient "
    "activations (0.72 GiB allocated at peak, 0.00 GiB of torch reservation growth); 7824 KV "
    "cache blocks (61.12 GiB) fit within the requested 79.19 GiB. Torch may reserve up to "
    "64.00 GiB."
)


def test_the_warmup_line_is_read_and_compared():
    from calc.serving.calibrate import calibrate
    from calc.serving.logs import parse_log

    got = parse_log(WARMUP)
    assert (got["warmup_free_gib"], got["warmup_transient_gib"]) == (62.79, 0.72)
    assert (got["warmup_kv_blocks"], got["warmup_kv_gib"]) == (7824, 61.12)
    cal = calibrate(WARMUP, "llama-3.1-8b", "h100-sxm", version="0.34.0")
    row = next(r for r in cal.rows if r["figure"].startswith("KV cache blocks after warmup"))
    p = engine_plan("llama-3.1-8b", "h100-sxm", "vllm", version="0.34.0")
    assert (row["logged"], row["kvcalc"]) == (7824, p.num_gpu_blocks)


def test_the_dashboard_stack_shows_the_measured_cache():
    from dashboard.engine_data import engine_stack_frame

    p = engine_plan("llama-3.1-8b", "h100-sxm", "vllm", version="0.34.0")
    df = engine_stack_frame(p).set_index("category")
    assert df.loc["KV cache", "bytes"] == p.measured_kv_cache_bytes
    assert df["bytes"].sum() == p.total_memory_bytes


def test_refusal_wording_matches_logged_errors():
    """The error text of public logs, figures and all, from the release's own f-strings."""
    from calc.serving.vllm_refusal import vllm_v1_refusal

    def gib(x):  # bytes that print as x GiB to 2 decimals
        return int(x * GIB)

    # vllm#32105 (GLM-4.7-FP8, PP 8, a 0.14-era nightly, 2026-01-28), in full
    assert vllm_v1_refusal(202752, gib(71.16), gib(28.57), 81392, (0, 14, 0)) == (
        "To serve at least one request with the models's max seq len (202752), (71.16 GiB KV "
        "cache is needed, which is larger than the available KV cache memory (28.57 GiB). Based "
        "on the available memory, the estimated maximum model length is 81392. Try increasing "
        "`gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine. "
        "See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details."
    )
    # vllm#15871 (0.8.3): no estimated length yet
    assert vllm_v1_refusal(32768, gib(0.95), gib(0.93), 31744, (0, 8, 3)) == (
        "To serve at least one request with the models's max seq len (32768), (0.95 GiB KV "
        "cache is needed, which is larger than the available KV cache memory (0.93 GiB). Try "
        "increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing "
        "the engine."
    )
    # 0.8.4 - 0.9.0: the length's f-string is a statement of its own, so only its first half
    got = vllm_v1_refusal(32768, gib(0.95), gib(0.93), 31744, (0, 9, 0))
    assert "(0.93 GiB). Based on the available memory,  Try increasing" in got
    assert vllm_v1_refusal(32768, gib(0.95), gib(0.93), 31744, (0, 8, 0)).startswith(
        "To serve at least one request with the models's max seq len (32768), (0.95 GB KV"
    )
    # vllm-25350 (0.10.2): "(5.59 GiB). Based on ... 122080. Try increasing"
    got = vllm_v1_refusal(221000, gib(10.12), gib(5.59), 122080, (0, 10, 2))
    assert (
        "(5.59 GiB). Based on the available memory, the estimated maximum model length is " in got
    )
    assert got.endswith("122080. Try increasing `gpu_memory_utilization` or decreasing "
                        "`max_model_len` when initializing the engine.")  # fmt: skip
    # vllm#44376 (0.22): "model's max seq len (30000), (6.66 GiB ...) (5.44 GiB). Based on ..."
    got = vllm_v1_refusal(30000, gib(6.66), gib(5.44), 13528, (0, 22, 0))
    assert got.startswith(
        "To serve at least one request with the model's max seq len (30000), (6.66 GiB KV cache "
        "is needed, which is larger than the available KV cache memory (5.44 GiB). Based on the "
        "available memory, the estimated maximum model length is 13528. Try increasing "
        "`gpu_memory_utilization` (which also controls CPU memory on the CPU backend)"
    )


def test_a_034_log_is_checked_from_its_warmup_blocks():
    """A case as benchmarks/engine_logs holds one (the figures a 0.34.0 log would print for
    Llama-3.1-8B on an H100: 7824 blocks of 64 tokens; 7824 / (131072 / 64) = 3.82x)."""
    from calc.serving.evidence import evaluate as check_case

    case = {
        "id": "synthetic-034",
        "engine": "vllm",
        "version": "0.34.0",
        "model": "llama-3.1-8b",
        "gpu": "h100-sxm",
        "preset": "llama-3.1-8b",
        "settings": {"max_model_len": 131072},
        "logged": {
            "available_kv_cache_gib": 63.35,
            "warmup_kv_blocks": 7824,
            "warmup_kv_gib": 61.12,
            "gpu_kv_cache_tokens": 7824 * 64,
            "max_concurrency": 3.82,
        },
    }
    checks = {c.figure: c for c in check_case(case)}
    assert checks["GPU KV cache size, tokens"].verdict == "exact"
    assert checks["maximum concurrency"].verdict == "exact"
    assert checks["capacity holds the blocks"].verdict == "exact"
    case["logged"]["gpu_kv_cache_tokens"] += 64  # one block more than the blocks give
    assert {c.figure: c for c in check_case(case)}["GPU KV cache size, tokens"].verdict != "exact"


def test_a_warmup_line_calibrates_the_measured_sizing():
    from calc.serving.calibrate import calibrate

    learned = calibrate(WARMUP, "llama-3.1-8b", "h100-sxm", version="0.34.0").learned
    headroom = int((62.79 + 0.06) * GIB)  # free + committed, as the line prints them
    peak = int(0.72 * GIB)  # allocated at peak; no reservation growth
    assert (learned["warmup_headroom_bytes"], learned["warmup_transient_bytes"]) == (headroom, peak)
    # measure_kv_cache_bytes at utilization 1.0: headroom - max(1 GiB, 0.75 x peak) - peak
    kv = headroom - max(GIB, int(0.75 * peak)) - peak
    page = 64 * 8 * 128 * 2 * 2
    for L in (8192, 131072):
        p = engine_plan(
            "llama-3.1-8b", "h100-sxm", "vllm", version="0.34.0", max_model_len=L,
            calibration=learned,
        )  # fmt: skip
        assert p.measured_kv_cache_bytes == kv
        assert p.num_gpu_blocks == min(kv // (32 * page), kv // (32 * 2 * MIB) * 8)
