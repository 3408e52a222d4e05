"""vLLM 0.17-0.19's non-KV terms against real start-ups on one H100 80GB: llm-d-planner's
accuracy study (https://github.com/llm-d-incubation/llm-d-planner @ d3121e059da8,
accuracy/results/v0.19.0/results_raw.csv and logs/*.log), excerpted in
tests/fixtures/engine_runs/llmd-planner.json (43 runs of models kvcalc has a preset for).

The dummy sampler of 0.17.0-0.19.0 (vllm sdists: vllm/v1/worker/gpu_model_runner.py
_dummy_sampler_run, vllm/v1/sample/sampler.py Sampler.forward, vllm/v1/sample/ops/
topk_topp_sampler.py forward_native / random_sample, topk_topp_triton.py
apply_top_k_top_p_triton) holds, per row: the model-dtype logits (padded vocabulary), their
fp32 copy, softmax's probs and random_sample's q (4 + 4 + 4 B a logit), plus the Triton kernel's
cached buffer of min(next_pow2(min(SMs, rows)), SMs) rows x vocab x 4 B; the forward leaves its
output (T x h), the gather and its rand_like copy (rows x h each) alive; the last pipeline rank
also holds the received hidden states and residual (2 x T x h); torch's cuBLAS workspace is
32 MiB on an H100 (CublasHandlePool.cpp).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from calc.presets import load_preset
from calc.serving.hardware import load_hardware
from calc.serving.memory import vllm_available_bytes
from calc.serving.plan import GIB, engine_plan

RUNS = json.loads((Path(__file__).parent / "fixtures/engine_runs/llmd-planner.json").read_text())
V019 = RUNS["vllm_0_19_0"]
T, ROWS, SMS = 8192, 1024, 132  # logged defaults on an H100; H100 SXM5: 132 SMs
CUBLAS = 4096 * 1024 * 8
# Not the sampler alone: MoE models (their fused-MoE workspace stays allocated under the
# sampler, test_moe_workspace_under_the_sampler), multimodal models (their profile run keeps the
# dummy images and the encoder's outputs, test_multimodal_profile_holds_images_and_embeddings)
# and the fp32 model (its forward sets the peak; not derived).
SAMPLER_BOUND = [r for r in V019 if not {"moe", "multimodal", "fp32"} & set(r["categories"])]


def _plan(run):
    dtype = {"float32": "fp32", "float16": "fp16"}.get(run["dtype"], "bf16")
    return engine_plan(
        run["preset"],
        "h100-sxm",
        version="0.19.0",
        tensor_parallel_size=run["tp"],
        pipeline_parallel_size=run["pp"],
        max_model_len=run["max_model_len"],
        gpu_memory_utilization=run["gpu_memory_utilization"],
        weight_dtype=dtype,
        calibration={"total_memory_bytes": int(run["total_gib"] * GIB)},
    )


def _sampler_peak(vocab, hidden, pp):
    padded = -(-vocab // 64) * 64
    out = ROWS * (padded * 2 + (4 + 4 + 4) * vocab)  # logits bf16, fp32 copy, probs, q
    out += SMS * vocab * 4  # Triton buffer: min(next_pow2(132), 132) = 132 rows
    out += (T + 2 * ROWS) * hidden * 2  # forward output, gather, rand_like
    out += 2 * T * hidden * 2 if pp > 1 else 0  # last PP rank: received hidden + residual
    return out + CUBLAS


@pytest.mark.parametrize("run", SAMPLER_BOUND, ids=lambda r: r["log"][:48])
def test_activation_is_the_sampler_peak(run):
    """Dense text models (bf16 / fp16, quantized, TP 1-4, PP 2 / 4): the logged 'torch peak
    memory increase' is the sampler's peak, to the log's 0.01 GiB."""
    spec = load_preset(run["preset"])
    expected = _sampler_peak(spec.vocab_size, spec.hidden_size, run["pp"])
    got = _plan(run).activation_bytes
    assert got == expected
    assert abs(got / GIB - run["activation_gib"]) <= 0.01


def test_the_sampler_bound_runs_cover_tp_pp_and_quantized():
    cats = {c for r in SAMPLER_BOUND for c in r["categories"]}
    assert {"dense", "tp", "pp", "quantized"} <= cats and len(SAMPLER_BOUND) >= 30


@pytest.mark.parametrize("run", V019, ids=lambda r: r["log"][:48])
def test_non_torch_is_the_calibrated_table(run):
    """CALIBRATION (overheads.NON_TORCH_LLMD_*, fitted on these runs): the logged
    'non-torch forward increase memory' is within 0.05 GiB of the table (TP 1 0.25, PP 0.07,
    TP 2 2.07, TP 4 2.17 GiB)."""
    assert abs(_plan(run).non_torch_bytes / GIB - run["non_torch_gib"]) <= 0.05


@pytest.mark.parametrize("run", V019, ids=lambda r: r["log"][:48])
def test_available_kv_within_two_percent_given_the_logged_weights(run):
    """requested - logged weights - kvcalc's activation and non-torch terms (0.19.0 does not
    subtract the CUDA-graph estimate) is within 2% of the available KV memory of the
    limiting rank. The fp32 Llama is the largest miss, 1.1% (its forward is above the generic
    estimate); the multimodal runs include the profile's held images (mm_profile.py)."""
    p = _plan(run)
    assert p.cudagraph_bytes == 0
    total = int(run["total_gib"] * GIB)
    weights = int(run["weights_gib"] * GIB)
    u = run["gpu_memory_utilization"]
    nt = p.non_torch_bytes
    avail = vllm_available_bytes(total, u, weights, p.activation_bytes, nt, 0) / GIB
    assert abs(avail - run["available_kv_gib"]) / run["available_kv_gib"] <= 0.02


def test_triton_buffer_rows_follow_the_sm_count():
    """Fewer rows than SMs: the buffer has next_pow2(rows) rows, capped at the SM count."""
    from calc.serving.profile_terms import vllm_v1_triton_sampler_peak_bytes as f

    assert f(8, 100, 128, 2, 132) == 8 * (128 * 2 + 12 * 100) + 8 * 100 * 4
    assert f(100, 100, 128, 2, 132) == 100 * (128 * 2 + 12 * 100) + 128 * 100 * 4
    assert f(200, 100, 128, 4, 114) == 200 * (128 * 4 + 8 * 100) + 114 * 100 * 4


def test_without_an_sm_count_the_generic_estimate_stays():
    """The Triton buffer needs the GPU's SM count: an L4 preset without one keeps
    calc.capacity's estimate."""
    from calc.capacity import activation_bytes_per_gpu

    hw = load_hardware("l4")
    assert hw.multiprocessors is None
    kw = {"max_num_batched_tokens": 2048, "max_num_seqs": 256}
    p = engine_plan("qwen3-8b", hw, version="0.19.0", max_model_len=4096, **kw)
    assert p.activation_bytes == activation_bytes_per_gpu(load_preset("qwen3-8b"), 1, 2048, 256)


def _triton_moe_workspace(hidden, expert_inter, top_k, tp):
    """vLLM 0.19.0 sdist, vllm/model_executor/layers/fused_moe/modular_kernel.py
    _allocate_buffers with fused_moe.py TritonExperts.workspace_shapes (M = T, no chunking in
    0.18-0.19; N = 2 x I / TP, K = h; a gated activation halves N): workspace13 (shared with
    the M x K output) M x top_k x max(N/2, K) and workspace2 M x top_k x max(N, K) bf16
    elements, each rounded up to 256 B by vllm/v1/worker/workspace.py get_simultaneous."""
    n = 2 * expert_inter // tp
    ws13 = max(T * top_k * max(n // 2, hidden), T * hidden) * 2
    ws2 = T * top_k * max(n, hidden) * 2
    return -(-ws13 // 256) * 256 + -(-ws2 // 256) * 256


# (preset, hidden, moe_intermediate_size, num_experts_per_tok, vocab) from each config.json:
# https://huggingface.co/mistralai/Mixtral-8x7B-Instruct-v0.1/blob/main/config.json and
# https://huggingface.co/Qwen/Qwen3-30B-A3B/blob/main/config.json
MOE = {
    "mistralai/Mixtral-8x7B-Instruct-v0.1": (4096, 14336, 2, 32000),
    "Qwen/Qwen3-30B-A3B": (2048, 768, 8, 151936),
}


@pytest.mark.parametrize("model", sorted(MOE))
def test_moe_workspace_under_the_sampler(model):
    """Unquantized MoE on the Triton experts ('Using TRITON backend for Unquantized MoE' in both
    logs): the torch peak is the fused-MoE workspace, which outlives the forward, plus the
    sampler's peak, to the log's 0.01 GiB (Mixtral TP 2: 0.66 + 0.55 = 1.21 GiB; Qwen3-30B-A3B:
    0.50 + 2.18 = 2.68 GiB). The generic estimate (every routed expert's gate/up output) gave
    0.94 and 2.59."""
    run = next(r for r in V019 if r["model"] == model)
    h, inter, k, vocab = MOE[model]
    expected = _triton_moe_workspace(h, inter, k, run["tp"]) + _sampler_peak(vocab, h, 1)
    assert abs(expected / GIB - run["activation_gib"]) <= 0.01
    assert _plan(run).activation_bytes == expected


# Per model: dummy images ('profiled with N image items of the maximum feature size' in the
# log), pixel values and encoder embeddings per image, text hidden size. Gemma 3: 896 x 896 RGB,
# mm_tokens_per_image 256 (https://huggingface.co/google/gemma-3-4b-it/blob/main/config.json,
# preprocessor_config.json); Mistral Small 3.1: 1540 x 1540, patch 14, spatial_merge_size 2 ->
# 55 x 55 = 3025 embeddings (https://huggingface.co/mistralai/Mistral-Small-3.1-24B-Instruct-2503
# config.json, preprocessor_config.json longest_edge 1540); Llama 4 Scout: max_patches 16 tiles
# of 336 + the global tile, (336 / 14)^2 / 4 = 144 embeddings a tile (config.json
# vision_config, pixel_shuffle_ratio 0.5; vllm 0.19.0 sdist model_executor/models/mllama4.py
# get_image_size_with_most_features / get_patch_per_chunk).
MULTIMODAL = {
    "google/gemma-3-4b-it": (32, 3 * 896 * 896, 256, 2560),
    "google/gemma-3-12b-it": (32, 3 * 896 * 896, 256, 3840),
    "google/gemma-3-27b-it": (32, 3 * 896 * 896, 256, 5376),
    "mistralai/Mistral-Small-3.1-24B-Instruct-2503": (2, 3 * 1540 * 1540, 55 * 55, 5120),
    "meta-llama/Llama-4-Scout-17B-16E-Instruct": (3, 17 * 3 * 336 * 336, 17 * 144, 5120),
}


@pytest.mark.parametrize("model", sorted(MULTIMODAL))
def test_multimodal_profile_holds_images_and_embeddings(model):
    """vLLM 0.19.0's profile_run keeps the dummy image batch (bf16 pixel values) and the
    encoder's outputs (in encoder_cache) until after the dummy sampler: kvcalc's peak is its
    text-only peak plus those bytes, written out here from the log's item count and the
    processor shapes above, and that is the logged peak to 0.01 GiB."""
    run = next(r for r in V019 if r["model"] == model)
    items, pixels, embeds, hidden = MULTIMODAL[model]
    held = items * (pixels + embeds * hidden) * 2  # bf16
    spec = load_preset(run["preset"])
    text_only = _plan({**run, "preset": spec.model_copy(update={"vision": None})})
    plan = _plan(run)
    assert plan.activation_bytes - text_only.activation_bytes == held
    assert abs(plan.activation_bytes / GIB - run["activation_gib"]) <= 0.01


# "Encoder cache will be initialized with a budget of 8192 tokens, and profiled with N image
# items" in each 0.19.0 log (llm-d-planner @ d3121e0, accuracy/results/v0.19.0/logs/): 32 for
# gemma-3-4b/12b/27b-it, 3 for Llama-4-Scout TP4, 2 for Mistral-Small-3.1 (and its w8a8 copies).
LOGGED_ITEMS = {"gemma-3-4b": 32, "gemma-3-12b": 32, "gemma-3-27b": 32}
LOGGED_ITEMS |= {"llama-4-scout": 3, "mistral-small-3.1": 2}


@pytest.mark.parametrize("preset", sorted(LOGGED_ITEMS))
def test_profile_item_count_is_the_logged_one(preset):
    from types import SimpleNamespace as NS

    from calc.serving.mm_profile import profile_item, profile_items

    spec = load_preset(preset)
    # the logs' defaults: max_num_batched_tokens 8192, max_num_seqs 1024, chunked prefill on
    cfg = NS(max_num_batched_tokens=T, max_num_seqs=ROWS, enable_chunked_prefill=True)
    assert profile_items(profile_item(spec.vision), cfg, 8192) == LOGGED_ITEMS[preset]


def test_profile_items_follow_the_budget_and_the_decoder_limit():
    """MultiModalBudget._get_max_items (0.19.0 sdist, vllm/multimodal/encoder_budget.py),
    written out: budget max(T, t) // t, capped by max_num_seqs x max(1, min(999, L // t)) and,
    without chunked prefill, by T // t requests."""
    from types import SimpleNamespace as NS

    from calc.serving.mm_profile import ProfileItem, profile_items

    item = ProfileItem(3025, 0, 3025)
    cfg = NS(max_num_batched_tokens=2048, max_num_seqs=256, enable_chunked_prefill=True)
    assert profile_items(item, cfg, 8192) == 1  # max(2048, 3025) // 3025
    cfg = NS(max_num_batched_tokens=65536, max_num_seqs=3, enable_chunked_prefill=True)
    assert profile_items(item, cfg, 4096) == 3  # 21 by budget, 3 requests x 1 item
    assert profile_items(item, cfg, 16384) == 15  # 3 requests x 16384 // 3025 = 5 items
    cfg = NS(max_num_batched_tokens=2048, max_num_seqs=256, enable_chunked_prefill=False)
    assert profile_items(item, cfg, 8192) == 1  # 0 requests of 3025 tokens fit: max(1, 0)
