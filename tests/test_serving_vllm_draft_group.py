"""vLLM's --attention-backend and the MTP drafter's own KV-cache group (calc.serving.
vllm_draft_group). Expected values are written out from the 0.24.0 - 0.28.0 sdists' grouping
(kv_cache_utils._get_kv_cache_groups_uniform_page_size) and AIwork4me's ROCm log
(benchmarks/engine_logs/vllm-aiwork4me-qwen38-27b-rocm-mtp1.toml: 278,230 tokens)."""

import json
import subprocess
import sys

import pytest

from calc.serving.plan import engine_plan

GIB = 2**30
L = 262144
PAGE = 800 * 2 * 4 * 256 * 2  # an 800-token block of one layer: 3,276,800 B
MTP = dict(max_model_len=L, available_kv_gib=18.53, speculative_method="mtp",
           num_speculative_tokens=1)  # fmt: skip


def qwen(gpu="mi300x", version="0.28.0", **kw):
    return engine_plan("qwen3.5-27b", gpu, "vllm", version=version, **MTP, **kw)


def test_a_forced_stride_backend_on_amd_puts_the_drafter_in_its_own_group():
    p = qwen(attention_backend="TRITON_ATTN")
    # buckets of 16 full, 1 draft, 48 linear layers: groups of one layer
    pages = int(18.53 * GIB) // PAGE
    per_request = 16 * (L // 800 + 1) + 1 * (L // 800 + 1) + 48 * (2 + 1)  # cdiv(L, 800) = 328
    assert (p.kv_groups, p.num_gpu_blocks, p.page_bytes) == (65, pages, PAGE)
    assert p.gpu_kv_cache_tokens == int(pages / per_request * L) == 278_230  # the log's line
    assert not any("padding layers" in line for line in p.log_lines)


@pytest.mark.parametrize(
    "gpu, version, backend",
    [
        ("mi300x", "0.28.0", None),  # both autoselect the same ROCm backend
        ("mi300x", "0.28.0", "ROCM_ATTN"),  # the drafter's own choice
        ("h100-sxm", "0.28.0", "TRITON_ATTN"),  # NVIDIA's autoselected backends have a stride
        ("mi300x", "0.23.0", "TRITON_ATTN"),  # indexes_kv_by_block_stride: 0.24.0 - 0.28.x
        ("mi300x", "0.29.0", "TRITON_ATTN"),
    ],
)
def test_elsewhere_the_drafter_joins_the_targets_full_attention(gpu, version, backend):
    p = qwen(gpu, version, attention_backend=backend)
    # 17 full, 48 linear: 48 >= 1.5 x 17, groups of 17 (1 full + 3 linear, 3 padding layers)
    blocks = int(18.53 * GIB) // (17 * PAGE)
    assert (p.kv_groups, p.num_gpu_blocks) == (4, blocks)
    assert p.gpu_kv_cache_tokens == qwen(gpu, version).gpu_kv_cache_tokens  # as if not given
    if version != "0.23.0":  # 0.23.0: another default state-page mode (calc.serving.vllm_mamba)
        assert p.gpu_kv_cache_tokens == int(blocks / (328 + 3 * 3) * L)


@pytest.mark.parametrize(
    "model, gpu, kw, match",
    [
        ("qwen3.5-27b", "mi300x", {}, "modelled only for an MTP drafter"),
        ("deepseek-v3", "mi300x", dict(speculative_method="mtp", tensor_parallel_size=8), "MLA"),
        ("qwen3.5-27b", "h100-sxm", dict(speculative_method="mtp"), "on NVIDIA GPUs"),
        ("qwen3.5-27b", "mi300x", dict(speculative_method="mtp",
                                        disable_hybrid_kv_cache_manager=True), "unified type"),
    ],
)  # fmt: skip
def test_refused_where_it_is_not_modelled(model, gpu, kw, match):
    backend = "ROCM_ATTN" if gpu == "h100-sxm" else "TRITON_ATTN"
    with pytest.raises(ValueError, match=match):
        engine_plan(model, gpu, "vllm", version="0.28.0", available_kv_gib=40,
                    attention_backend=backend, **kw)  # fmt: skip


def test_an_unknown_backend_is_refused_by_name():
    with pytest.raises(ValueError, match="'attention_backend' must be one of .* got 'XFORMERS'"):
        qwen(attention_backend="XFORMERS")


def test_the_cli_takes_the_flag_for_vllm_only():
    def cli(*args):
        run = [sys.executable, "-m", "calc", "plan", "qwen3.5-27b", "--gpu", "mi300x", *args]
        return subprocess.run(run, capture_output=True, text=True)

    spec = '{"method": "mtp", "num_speculative_tokens": 1}'
    r = cli("--engine", "vllm", "--engine-version", "0.28.0", "--seq", str(L), "--json",
            "--available-kv-gib", "18.53", "--speculative-config", spec,
            "--attention-backend", "TRITON_ATTN")  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["gpu_kv_cache_tokens"] == 278_230  # as the test above
    r = cli("--engine", "sglang", "--attention-backend", "TRITON_ATTN")
    assert r.returncode == 2 and "is a vLLM setting" in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
