"""SGLang's KV budget beside the target's weights (calc.serving.sglang_budget), the expected values
written out from the PyPI wheels: 0.5.14's managers/scheduler.py init_model_worker (the draft
worker loads before init_memory_pools, sglang#23862) and model_runner_kv_cache_mixin.py
_profile_available_bytes (rest = available - pre x (1 - mem_fraction_static); "Loaded weights
leave no GPU memory for the KV cache ..."), 0.5.16 - 0.5.23 mem_cache/kv_cache_configurator.py
(the same, less mm_runtime_reservation_gb from 0.5.18: SGLANG_VLM_CACHE_SIZE_MB = 100 in
environ.py), 0.5.13's model_runner_kv_cache_mixin.py (no such check: the pool's "Not enough
memory")."""

import json
import math

import pytest

from calc.cli import main
from calc.serving.grid import engine_plan_grid
from calc.serving.plan import engine_plan

GIB, MIB = 2**30, 2**20
# Llama-3.1-8B: 8 KV heads x 128 x (K and V) x 2 B x 32 layers a token; with a 1-layer draft
# from 0.5.14 (DefaultPoolConfigurator, to 0.5.21): int(131072 x (1 + 1 / 32)) = 135168 B
LLAMA_CELL = 8 * 128 * 2 * 2 * 32
DRAFT_CELL = 131072 + 131072 // 32
SPEC = dict(speculative_algorithm="EAGLE3", speculative_draft_num_layers=1, max_model_len=8192)


def plan(model="llama-3.1-8b", **kw):
    return engine_plan(model, "h100-sxm", "sglang", **kw)


def test_from_0_5_14_the_draft_weights_leave_the_target_budget():
    # the same fraction with and without speculation (0.5.14 dropped its reserve): the budget
    # is short of exactly the draft worker's "mem usage", 1.5 GiB here
    for v in ("0.5.14", "0.5.20"):
        plain = plan(version=v, max_model_len=8192)
        p = plan(version=v, speculative_draft_weights_gib=1.5, **SPEC)
        assert p.available_kv_cache_bytes == plain.available_kv_cache_bytes - int(1.5 * GIB)
        assert p.gpu_kv_cache_tokens == p.available_kv_cache_bytes // DRAFT_CELL
        assert p.source == "derived"
    # up to 0.5.13 the draft loads after the target's pool: the figure sizes nothing, refused
    with pytest.raises(ValueError, match="'speculative_draft_weights_gib' sizes nothing on sglang"):
        plan(version="0.5.13", speculative_draft_weights_gib=1.5, **SPEC)
    # from 0.5.14 a derived pool needs it; a given budget does not
    with pytest.raises(ValueError, match="'speculative_draft_weights_gib' .* must be given"):
        plan(version="0.5.14", **SPEC)
    given = plan(version="0.5.14", available_kv_gib=20, **SPEC)
    assert given.gpu_kv_cache_tokens == 20 * GIB // DRAFT_CELL == 158875
    with pytest.raises(ValueError, match="'speculative_draft_weights_gib' needs a"):
        plan(version="0.5.14", speculative_draft_weights_gib=1.5, max_model_len=8192)


def test_grid_subtracts_the_draft_weights_as_the_plan_does():
    kw = dict(version="0.5.20", speculative_draft_weights_gib=2.0, **SPEC)
    rows = engine_plan_grid(
        "llama-3.1-8b", "h100-sxm", "sglang", mem_fraction_static=[0.8, 0.9], **kw
    )
    for frac, tokens in zip((0.8, 0.9), rows["gpu_kv_cache_tokens"], strict=True):
        assert tokens == plan(mem_fraction_static=frac, **kw).gpu_kv_cache_tokens


def test_from_0_5_14_no_budget_is_refused_in_sglang_words():
    # Llama-3.1-70B in bf16 (~131 GiB) on one 80 GB GPU: available < 0
    p = plan("llama-3.1-70b", version="0.5.14", mem_fraction_static=0.85, max_model_len=8192)
    pre = p.total_memory_bytes - p.non_torch_bytes  # free memory before the weights
    available = pre - p.weights_bytes - int(0.059 * GIB)  # and after them (their load extra)
    minimum = 1 - (available / GIB) / (pre / GIB)
    suggested = math.ceil(minimum * 1000) / 1000
    assert p.refusal == (
        "Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static=0.85. "
        f"Raise --mem-fraction-static above {suggested:.3f} (minimum viable = 1 - available/pre "
        f"= {minimum:.4f}). If using speculative decoding, draft weights are now counted."
    )
    assert not p.fits and p.gpu_kv_cache_tokens == 0
    # 0.5.13: the pool configurator's refusal of 0 tokens
    old = plan("llama-3.1-70b", version="0.5.13", mem_fraction_static=0.85, max_model_len=8192)
    assert old.refusal == "Not enough memory. Please try to increase --mem-fraction-static."
    # the draft's weights can tip a budget into it: Llama-3.1-8B at 0.5 of 79.19 GiB leaves
    # ~24 GiB after its 15 GiB of weights; a 30 GiB draft leaves none
    ok = plan(version="0.5.20", mem_fraction_static=0.5, speculative_draft_weights_gib=1, **SPEC)
    assert ok.refusal is None
    bad = plan(version="0.5.20", mem_fraction_static=0.5, speculative_draft_weights_gib=30, **SPEC)
    assert bad.refusal.startswith("Loaded weights leave no GPU memory for the KV cache under")


def test_from_0_5_18_a_multimodal_budget_leaves_the_vlm_cache_out():
    # mm_runtime_reservation_gb: 100 MiB for a multimodal model (Mistral-Small-3.1, Pixtral
    # tower: Mistral3ForConditionalGeneration on multimodal_model_archs), none for a text one
    kw = dict(mem_fraction_static=0.85, max_model_len=8192)
    for model, reserved in (("mistral-small-3.1", 100 * MIB), ("llama-3.1-8b", 0)):
        before = plan(model, version="0.5.17", **kw).available_kv_cache_bytes
        after = plan(model, version="0.5.18", **kw).available_kv_cache_bytes
        assert before - after == reserved


def test_cli_flag_and_its_refusals(capsys):
    argv = ["plan", "llama-3.1-8b", "--gpu", "h100-sxm", "--engine", "sglang", "--seq", "8192"]
    spec = ["--speculative-algorithm", "EAGLE3", "--speculative-draft-num-layers", "1"]
    assert main([*argv, "--engine-version", "0.5.20", *spec]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'speculative_draft_weights_gib'" in err
    flag = ["--speculative-draft-weights-gib", "1.5"]
    assert main([*argv, "--engine-version", "0.5.20", *spec, *flag]) == 0
    assert "draft weights 1.50 GiB before the pool" in capsys.readouterr().out
    assert main([*argv, "--engine-version", "0.5.20", *spec, *flag, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["draft_weights_bytes"] == int(1.5 * GIB)
    assert main([*argv, "--engine-version", "0.5.20", *spec, "--speculative-draft-weights-gib",
                 "-1"]) == 2  # fmt: skip
    assert "greater than 0" in capsys.readouterr().err
    vllm = ["plan", "llama-3.1-8b", "--gpu", "h100-sxm", "--engine", "vllm", *flag]
    assert main(vllm) == 2
    assert "is an SGLang setting" in capsys.readouterr().err


def test_a_gpu_feature_transport_reserves_its_pool_from_0_5_18():
    # mm_runtime_reservation_gb (0.5.18 kv_cache_configurator.py): + SGLANG_MM_FEATURE_CACHE_MB
    # (1024) for --mm-feature-transport cuda_ipc / cuda_vmm; in 0.5.16 - 0.5.17 the pool is
    # allocated after the KV pool with nothing reserved
    kw = dict(mem_fraction_static=0.85, max_model_len=8192)
    for v, extra in (("0.5.17", 0), ("0.5.18", 1024 * MIB), ("0.5.23", 1024 * MIB)):
        cpu = plan("mistral-small-3.1", version=v, mm_feature_transport="cpu", **kw)
        ipc = plan("mistral-small-3.1", version=v, mm_feature_transport="cuda_ipc", **kw)
        assert cpu.available_kv_cache_bytes - ipc.available_kv_cache_bytes == extra
        unset = plan("mistral-small-3.1", version=v, **kw)  # unset: cpu on one node
        assert unset.available_kv_cache_bytes == cpu.available_kv_cache_bytes
    text = [plan(version="0.5.23", mm_feature_transport=t, **kw) for t in ("cpu", "cuda_vmm")]
    assert text[0].available_kv_cache_bytes == text[1].available_kv_cache_bytes  # not multimodal


@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(version="0.5.15", mm_feature_transport="cpu"), "needs SGLang 0.5.16 or later"),
        (dict(version="0.5.17", mm_feature_transport="cuda_vmm"), "needs SGLang 0.5.18 or later"),
        (dict(version="0.5.23", mm_feature_transport="nvlink"), "must be one of cpu, cuda_ipc"),
        (dict(version="0.5.23", mm_feature_transport="cuda_vmm", pipeline_parallel_size=2),
         "cuda_vmm does not support pipeline parallelism"),
    ],
)  # fmt: skip
def test_the_transport_refusals(kw, match):
    with pytest.raises(ValueError, match=match):
        plan("mistral-small-3.1", max_model_len=8192, **kw)


def test_gpu_transports_need_cuda():
    with pytest.raises(ValueError, match=r"--mm-feature-transport=cuda_ipc requires NVIDIA CUDA"):
        engine_plan("mistral-small-3.1", "mi300x", "sglang", version="0.5.23",
                    max_model_len=8192, mem_fraction_static=0.8,
                    mm_feature_transport="cuda_ipc")  # fmt: skip
