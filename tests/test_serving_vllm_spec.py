"""vLLM's speculative decoding in the KV cache (calc.serving.vllm_spec), every expected value
written out from the PyPI sdists:

- config/speculative.py (0.11.0 on): "mtp" and the aliases in MTP_MODEL_TYPES; hf_config_override
  maps deepseek_v3 / Glm4MoeForCausalLM / qwen3_next (0.11.0) and qwen3_5 (0.17.0) to their MTP
  drafters; num_speculative_tokens defaults to n_predict and "must be divisible by n_predict";
- models/deepseek_mtp.py, glm4_moe_mtp.py (num_nextn_predict_layers), qwen3_next_mtp.py
  (getattr(config, "num_nextn_predict_layers", 1)), qwen3_5_mtp.py (mtp_num_hidden_layers): the
  drafter's decoder layers, whose Attention layers get_kv_cache_spec lists with the target's;
- layers/mamba/mamba_utils.py: conv state conv_kernel - 1 + num_spec columns (Gated DeltaNet from
  0.10.2, mamba2_state_shape from 0.17.0);
- v1/kv_cache_interface.py MambaSpec.max_memory_usage_bytes: "align" 2 + num_speculative_blocks,
  "none" 1 + num_speculative_blocks from 0.16.0 (0.14.1: cdiv(L, block) pages, no k); "all"
  cdiv(L, block) + num_speculative_blocks from 0.22.0 (0.21.0: no k);
- v1/core/kv_cache_utils.py: "Add %d padding layers, may waste at most %.2f%% KV cache memory".
Logs: niushuai1991/qwen3.6-27b (benchmarks/engine_logs/vllm-niushuai-*): Qwen3.6-27B-FP8, MTP
k = 3 on an RTX PRO 6000 with vLLM 0.25.1, 54.05 GiB -> 947,541 tokens; k = 4's 1,616-token block.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from calc.presets import load_preset
from calc.serving.calibrate import calibrate
from calc.serving.logs import parse_log
from calc.serving.plan import engine_plan
from calc.serving.vllm_spec import parse_speculative_config

GIB = 2**30


def cdiv(a, b):
    return -(-a // b)


def qwen35(version="0.25.1", k=3, **kw):
    """The niushuai1991 deployment: Qwen3.5 / 3.6-27B, fp8 cache, prefix caching, 32k."""
    settings = dict(
        version=version,
        available_kv_gib=54.05,
        kv_cache_dtype="fp8_e4m3",
        max_model_len=32768,
        max_num_batched_tokens=8192,
        max_num_seqs=10,
        enable_prefix_caching=True,
        speculative_method="mtp",
        num_speculative_tokens=k,
    )
    return engine_plan("qwen3.5-27b", "rtx-pro-6000", "vllm", **(settings | kw))


@pytest.mark.parametrize("k", [1, 3, 4])
def test_mtp_adds_a_full_layer_and_k_conv_columns(k):
    # conv (2 x 16 x 128 + 48 x 128) x (4 - 1 + k) x 2 B + recurrent 48 x 128 x 128 x 4 B (fp32)
    state = 10240 * (3 + k) * 2 + 48 * 128 * 128 * 4
    token = 2 * 4 * 256 * 1  # K and V, 4 KV heads of 256, fp8
    block = 16 * cdiv(state, 16 * token)
    assert block == {1: 1584, 3: 1600, 4: 1616}[k]  # 1,616: the niushuai1991 k = 4 log
    p = qwen35(k=k)
    # 16 full + 1 MTP = 17, 48 linear: 48 >= 1.5 x 17, groups of 17, 3 padding linear layers
    blocks = int(54.05 * GIB) // (17 * block * token)
    per_request = cdiv(32768, block) + 3 * (2 + k)  # align mode, 2 + num_speculative_blocks
    assert (p.kv_groups, p.num_gpu_blocks, p.page_bytes) == (4, blocks, block * token)
    assert p.gpu_kv_cache_tokens == int(blocks / per_request * 32768)
    assert (p.draft_layers, p.num_speculative_tokens, p.speculative_method) == (1, k, "mtp")
    assert "Add 3 padding layers, may waste at most 6.25% KV cache memory" in p.log_lines
    assert p.log_lines[:2] == [
        # CacheConfig's line for the fp8 cache (config/cache.py, 0.25.1 sdist), built before
        # VllmConfig's hybrid check raises the block
        "Using fp8_e4m3 data type to store kv cache. It reduces the GPU memory footprint and "
        "boosts the performance. Meanwhile, it may cause accuracy drop without a proper "
        "scaling factor",
        f"Setting attention block size to {block} tokens to ensure that attention page size "
        "is >= mamba page size.",
    ]


def test_the_niushuai_log_is_reproduced():
    p = qwen35(k=3)
    assert p.gpu_kv_cache_tokens == 947_541  # docs/config.md's "GPU KV cache size"
    # the weights figure is the bf16 preset's with its drafter (tests/test_serving_vllm_drafter);
    # the log's FP8 checkpoint is not committed, so the case checks only the KV figures
    assert any(line.startswith("Model loading took") for line in p.log_lines)


def test_deepseek_mtp_is_one_more_mla_layer():
    # 0.11.0 on Hopper: FlashMLA's 64-token blocks; a token of a layer is the 512 + 64 latent
    # in bf16 on every rank; 61 + 1 MTP layers in one group
    p = engine_plan("deepseek-v3", "h200", "vllm", version="0.11.0", available_kv_gib=40,
                    tensor_parallel_size=8, max_model_len=32768, speculative_method="mtp")  # fmt: skip
    blocks = 40 * GIB // (62 * 64 * 576 * 2)
    assert (p.num_gpu_blocks, p.gpu_kv_cache_tokens) == (blocks, blocks * 64)
    assert p.num_speculative_tokens == 1  # n_predict: num_nextn_predict_layers
    plain = engine_plan("deepseek-v3", "h200", "vllm", version="0.11.0", available_kv_gib=40,
                        tensor_parallel_size=8, max_model_len=32768)  # fmt: skip
    assert plain.num_gpu_blocks == 40 * GIB // (61 * 64 * 576 * 2)


def test_glm_and_qwen3_next_drafters():
    # GLM-4.5 at TP 8: 92 + 1 layers of 8 KV heads / 8 x 128 x 2 (K, V) x 2 B, blocks of 16
    p = engine_plan("glm-4.5", "h200", "vllm", version="0.11.0", available_kv_gib=20,
                    tensor_parallel_size=8, max_model_len=32768, speculative_method="mtp",
                    num_speculative_tokens=3)  # fmt: skip
    assert p.num_gpu_blocks == 20 * GIB // (93 * 16 * 1 * 128 * 2 * 2)
    # Qwen3-Next: its config has no num_nextn_predict_layers, vLLM builds 1; 12 + 1 full and 36
    # linear layers, groups of 13 (36 >= 1.25 x 13 in 0.14.1): 3 padding layers of 36 = 8.33 %
    p = engine_plan("qwen3-next-80b-a3b", "h100-sxm", "vllm", version="0.14.1",
                    available_kv_gib=20, tensor_parallel_size=4, max_model_len=32768,
                    speculative_method="qwen3_next_mtp", num_speculative_tokens=2)  # fmt: skip
    assert (p.kv_groups, p.draft_layers, p.speculative_method) == (4, 1, "mtp")
    assert p.log_lines[0] == "method `qwen3_next_mtp` is deprecated and replaced with mtp."
    assert "Add 3 padding layers, may waste at most 8.33% KV cache memory" in p.log_lines


def test_state_pages_count_k_by_release():
    # ngram on Qwen3-Next (no drafter, k = 2), prefix caching off: mode "none"
    kw = dict(available_kv_gib=20, tensor_parallel_size=4, max_model_len=32768,
              speculative_method="ngram", num_speculative_tokens=2)  # fmt: skip
    old = engine_plan("qwen3-next-80b-a3b", "h100-sxm", "vllm", version="0.14.1", **kw)
    new = engine_plan("qwen3-next-80b-a3b", "h100-sxm", "vllm", version="0.16.0", **kw)
    assert old.draft_layers == new.draft_layers == 0
    for p, pages in ((old, 1), (new, 1 + 2)):  # 0.14.1: cdiv(L, L) = 1; 0.16.0: 1 + k
        block = p.page_bytes // (2 // 2 * 256 * 2 * 2)  # 2 KV heads / 4 ranks (1, replicated)
        per_request = cdiv(32768, block) + 3 * pages  # 12 full, 36 linear: 3 linear groups
        assert p.max_concurrency == pytest.approx(p.num_gpu_blocks / per_request)


def test_mamba2_conv_columns_from_0_17():
    nano = load_preset("nemotron-3-nano-30b-a3b")
    kw = dict(available_kv_gib=40, tensor_parallel_size=1, max_model_len=32768,
              speculative_method="ngram", num_speculative_tokens=3)  # fmt: skip
    a = engine_plan(nano, "h100-sxm", "vllm", version="0.16.0", **kw)
    b = engine_plan(nano, "h100-sxm", "vllm", version="0.17.0", **kw)
    # conv (64 x 64 + 2 x 8 x 128) x (3 + k) x 2 B; the temporal state 64 x 64 x 128 x 4 B
    # (config.json's mamba_ssm_cache_dtype "float32", which NemotronHForCausalLMConfig reads)
    token = 2 * 2 * 128 * 2
    for p, cols in ((a, 3), (b, 3 + 3)):
        state = 6144 * cols * 2 + 64 * 64 * 128 * 4
        assert p.page_bytes == 16 * cdiv(state, 16 * token) * token


@pytest.mark.parametrize(
    ("kw", "words"),
    [
        (dict(speculative_method="eagle3"), "separate draft checkpoint"),
        (dict(speculative_method="medusa2"), "must be one of mtp, ngram"),
        (dict(speculative_method="ngram"), "required with the ngram method"),
        (dict(num_speculative_tokens=2), "without speculative model"),
        (dict(speculative_method="mtp", version="0.10.2"), "from 0.11.0"),
        (dict(speculative_method="mtp", version="0.16.0"), "at least 0.17.0"),
        (dict(speculative_method="mtp", available_kv_gib=None), "cannot be derived"),
        (
            dict(speculative_method="ngram", num_speculative_tokens=2, available_kv_gib=None),
            "rejection sampler",
        ),  # fmt: skip
        (dict(speculative_method="mtp", pipeline_parallel_size=2), "'pipeline_parallel_size'"),
    ],
)
def test_refusals(kw, words):
    settings = dict(version="0.25.1", available_kv_gib=10.0, max_model_len=32768) | kw
    given = settings.pop("available_kv_gib")
    with pytest.raises(ValueError, match=words):
        engine_plan("qwen3.5-27b", "rtx-pro-6000", "vllm", available_kv_gib=given, **settings)


def test_models_without_a_drafter_and_indexed_ones_are_refused():
    for model, words in (("llama-3.1-8b", "num_nextn_predict_layers=0"),
                         ("deepseek-v3.2", "indexed-attention")):  # fmt: skip
        with pytest.raises(ValueError, match=words):
            engine_plan(model, "h200", "vllm", available_kv_gib=10.0, max_model_len=8192,
                        tensor_parallel_size=8, speculative_method="mtp")  # fmt: skip
    two = load_preset("glm-4.5").model_copy(update={"num_nextn_predict_layers": 2})
    with pytest.raises(
        ValueError, match="num_speculative_tokens:3 must be divisible by n_predict=2"
    ):
        engine_plan(two, "h200", "vllm", version="0.11.0", available_kv_gib=10.0,
                    tensor_parallel_size=8, speculative_method="mtp", num_speculative_tokens=3)  # fmt: skip


@pytest.mark.parametrize(
    ("text", "words"),
    [
        (
            '{"method": "eagle", "model": "yuhuili/EAGLE-LLaMA3.1-Instruct-8B"}',
            "'speculative_config.model'",
        ),
        ("[1, 2]", "must be a JSON object"),
        ("{not json", "must be a JSON object"),
        ('{"num_speculative_tokens": 2}', "'speculative_config.method' is required"),
        ('{"method": "mtp", "num_speculative_tokens": "2"}', "must be an integer"),
        ('{"method": 3}', "must be a string"),
        ("{" + " " * 2000 + "}", "at most 1000 characters"),
    ],
)
def test_speculative_config_json_errors(text, words):
    with pytest.raises(ValueError, match=words):
        parse_speculative_config(text)
    assert parse_speculative_config('{"method": "mtp"}') == ("mtp", None)


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "calc", *args], capture_output=True, text=True)


def test_cli_plans_and_refuses_in_one_line():
    base = ["plan", "qwen3.5-27b", "--gpu", "rtx-pro-6000", "--engine", "vllm",
            "--engine-version", "0.25.1", "--kv", "fp8_e4m3", "--seq", "32768",
            "--max-num-batched-tokens", "8192", "--max-num-seqs", "10",
            "--enable-prefix-caching", "--available-kv-gib", "54.05"]  # fmt: skip
    spec = ["--speculative-config", '{"method":"mtp","num_speculative_tokens":3}']
    r = run_cli(*base, *spec, "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert (out["gpu_kv_cache_tokens"], out["draft_layers"]) == (947541, 1)
    plain = engine_plan("qwen3.5-27b", "rtx-pro-6000", "vllm", version="0.25.1",
                        available_kv_gib=54.05)  # fmt: skip
    # + one bf16 MTP layer of Qwen3.5-27B, 849,402,368 B (tests/test_serving_vllm_drafter.py)
    assert out["weights_gib"] == round((plain.weights_bytes + 849_402_368) / GIB, 4)
    for extra in (["--speculative-config", '{"method":"eagle3"}'],
                  ["--speculative-config", "{"]):  # fmt: skip
        r = run_cli(*base, *extra)
        assert r.returncode == 2 and "Traceback" not in r.stderr
        assert len(r.stderr.strip().splitlines()) == 1
    r = run_cli(*base, *spec, "--target-concurrency", "10")  # the inverse derives: refused
    assert r.returncode == 2 and "'--target-concurrency'" in r.stderr
    r = run_cli("plan", "qwen3.5-27b", "--gpu", "h100-sxm", "--engine", "sglang", *spec)
    assert r.returncode == 2 and "is a vLLM setting" in r.stderr


ENGINE_LINE = (
    "(EngineCore pid=256) INFO 05-01 16:50:59 [core.py:109] Initializing a V1 LLM engine "
    "(v0.20.0) with config: model='m', speculative_config=SpeculativeConfig(method='mtp', "
    "model='m', num_spec_tokens=1), tokenizer='m'\n"
    "INFO [kv_cache_utils.py:1140] Add 3 padding layers, may waste at most 6.25% KV cache memory\n"
    "INFO [gpu_worker.py:440] Available KV cache memory: 4.8 GiB\n"
)


def test_the_log_parser_reads_the_speculative_config():
    got = parse_log(ENGINE_LINE)
    assert (got["speculative_method"], got["num_speculative_tokens"]) == ("mtp", 1)
    assert got["padding_layers"] == 3


def test_calibrating_on_an_mtp_log_is_refused_by_name():
    with pytest.raises(ValueError, match="'speculative_method' 'mtp'.*cannot be derived"):
        calibrate(ENGINE_LINE, "qwen3.5-27b", "rtx-5090", version="0.20.0")


def test_a_grid_of_mtp_plans_is_the_plans_and_refuses_to_derive():
    from calc.serving.grid import engine_plan_grid

    kw = dict(version="0.25.1", kv_cache_dtype="fp8_e4m3", max_num_batched_tokens=8192,
              max_num_seqs=10, enable_prefix_caching=True, speculative_method="mtp",
              num_speculative_tokens=3)  # fmt: skip
    df = engine_plan_grid("qwen3.5-27b", "rtx-pro-6000", "vllm", available_kv_gib=[54.05, 20.0],
                          max_model_len=[32768], **kw)  # fmt: skip
    for row, gib in zip(df.itertuples(), (54.05, 20.0), strict=True):
        p = engine_plan("qwen3.5-27b", "rtx-pro-6000", "vllm", max_model_len=32768,
                        available_kv_gib=gib, **kw)  # fmt: skip
        assert (row.num_gpu_blocks, row.gpu_kv_cache_tokens) == (p.num_gpu_blocks,
                                                                 p.gpu_kv_cache_tokens)  # fmt: skip
    assert df["gpu_kv_cache_tokens"].iloc[0] == 947_541
    assert (df["weights_gib"] == p.weights_bytes / GIB).all()  # the drafter's included
    with pytest.raises(ValueError, match="cannot be derived"):
        engine_plan_grid("qwen3.5-27b", "rtx-pro-6000", "vllm",
                         gpu_memory_utilization=[0.8, 0.9], **kw)  # fmt: skip


def test_an_imported_config_plans_as_its_preset():
    # a config.json's family is its model_type (deepseek_v3, qwen3_5_text): the same drafter
    from pathlib import Path

    from calc import from_hf_config

    fixture = Path(__file__).parent / "fixtures" / "hf" / "modern" / "deepseek-v3.json"
    spec = from_hf_config(fixture)
    assert spec.family == "deepseek_v3"
    kw = dict(version="0.11.0", available_kv_gib=40, tensor_parallel_size=8,
              max_model_len=32768, speculative_method="mtp")  # fmt: skip
    a = engine_plan(spec, "h200", "vllm", **kw)
    b = engine_plan("deepseek-v3", "h200", "vllm", **kw)
    blocks = 40 * GIB // (62 * 64 * 576 * 2)  # 61 + 1 MLA layers, FlashMLA blocks of 64
    assert (a.draft_layers, a.num_gpu_blocks) == (b.draft_layers, b.num_gpu_blocks) == (1, blocks)
