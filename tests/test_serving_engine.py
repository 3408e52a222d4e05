"""EngineConfig defaults and refusals, the vLLM / SGLang arithmetic written out from their source."""

import pytest
from pydantic import ValidationError

from calc.serving.engine import engine_config, parse_version
from calc.serving.plan import engine_plan
from calc.serving.sharding import pp_layer_split
from calc.spec import ModelSpec

GIB = 2**30


def test_version_defaults_for_vllm_batches():
    # V1 (0.8.0 on), API server, >= 70 GiB non-A100: 8192 tokens / 1024 seqs; else 2048 / 256
    big = engine_config("vllm", version="0.11.0", gpu_memory_gib=79.2, gpu_name="h100-sxm")
    small = engine_config("vllm", version="0.11.0", gpu_memory_gib=79.2, gpu_name="a100-80gb")
    assert (big.max_num_batched_tokens, big.max_num_seqs) == (8192, 1024)
    assert (small.max_num_batched_tokens, small.max_num_seqs) == (2048, 256)
    # V0: max(max_model_len, 2048) without chunked prefill; 512 above 32K
    v0 = engine_config("vllm", version="0.6.4", max_model_len=20000, model_max_len=131072)
    assert v0.max_num_batched_tokens == 20000 and not v0.is_v1
    v0_long = engine_config("vllm", version="0.6.4", max_model_len=65536, model_max_len=131072)
    assert v0_long.max_num_batched_tokens == 512


def test_sglang_mem_fraction_by_tp_in_the_04_series():
    for tp, frac in ((1, 0.88), (2, 0.87), (4, 0.85), (8, 0.81), (16, 0.79)):
        cfg = engine_config("sglang", version="0.4.6", tensor_parallel_size=tp)
        assert cfg.mem_fraction_static == frac
    # after the newest release read (v0.5.23, tests/test_serving_sglang_2026.py): refused
    with pytest.raises(ValueError, match="'mem_fraction_static' must be given for sglang 0.5.24"):
        engine_config("sglang", version="0.5.24")
    assert engine_config("sglang", version="0.5.24", mem_fraction_static=0.8).page_size == 1


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"gpu_memory_utilization": 0.0}, "'gpu_memory_utilization' must be in (0, 1]"),
        ({"gpu_memory_utilization": 1.2}, "'gpu_memory_utilization' must be in (0, 1]"),
        ({"block_size": 24}, "'block_size' must be one of"),
        ({"kv_cache_dtype": "int3"}, "'kv_cache_dtype' must be one of"),
        ({"mem_fraction_static": 0.8}, "'mem_fraction_static' is not a vllm setting"),
        ({"version": "latest"}, "'version' must look like"),
    ],
)
def test_bad_vllm_settings_are_refused(kwargs, message):
    with pytest.raises(
        (ValueError, ValidationError),
        match=message.replace("(", r"\(").replace(")", r"\)").replace("]", r"\]"),
    ):
        engine_config("vllm", **kwargs)


def test_max_model_len_over_the_model_is_refused_as_vllm_words_it():
    with pytest.raises(ValueError, match=r"User-specified max_model_len \(200000\) is greater"):
        engine_config("vllm", max_model_len=200000, model_max_len=131072)


def test_tp_not_dividing_heads_is_refused():
    with pytest.raises(ValueError, match="'tp' must divide num_attention_heads=32"):
        engine_plan("llama-3.1-8b", "h100-sxm", tensor_parallel_size=3)


def test_parse_version():
    assert parse_version("v0.10.1.1") == (0, 10, 1, 1)
    assert parse_version("0.9.2rc1") == (0, 9, 2, 0)
    assert parse_version("0.4.5.post3") == (0, 4, 5, 3)
    assert parse_version("0.4.5") < parse_version("0.4.5.post3") < parse_version("0.4.6")
    with pytest.raises(ValueError, match="'version' must look like 0.11.0 or 0.4.5.post3"):
        parse_version("0.4.5.dev")


def test_pp_split_as_vllm_get_pp_indices():
    # 80 layers / 3 ranks: 26 each, the 2 extra go to the ranks before the last
    assert pp_layer_split(80, 3) == (27, 27, 26)
    assert pp_layer_split(48, 2, (16, 32)) == (16, 32)
    with pytest.raises(ValueError, match="'pp_layer_partition' must have 2 parts"):
        pp_layer_split(48, 2, (16, 30))


def test_vllm_v1_blocks_tokens_concurrency_written_out():
    # Qwen3-14B-like geometry is not needed: llama-3.1-8b, 32 layers x 8 KV heads x 128, bf16
    page = 2 * 16 * 8 * 128 * 2  # AttentionSpec.page_size_bytes, one layer
    avail = 10 * GIB
    blocks = avail // page // 32  # get_num_blocks
    p = engine_plan(  # 0.33.0: CacheConfig.DEFAULT_BLOCK_SIZE 16 (64 from 0.34.0)
        "llama-3.1-8b", "h100-sxm", available_kv_gib=10, max_model_len=10000, version="0.33.0"
    )
    assert p.num_gpu_blocks == blocks
    assert p.gpu_kv_cache_tokens == blocks * 16
    assert p.max_concurrency == blocks / -(-10000 // 16)


def test_gpt_oss_groups_split_the_pool():
    # gpt-oss-120b: 18 full + 18 sliding layers -> 2 groups of 18
    spec = dict(
        name="g",
        num_hidden_layers=36,
        hidden_size=2880,
        num_attention_heads=64,
        num_key_value_heads=8,
        head_dim=64,
        intermediate_size=2880,
        num_local_experts=128,
        num_experts_per_tok=4,
        vocab_size=201088,
        max_position_embeddings=131072,
        sliding_window=128,
        sliding_window_pattern=2,
    )
    from calc.spec import ModelSpec

    p = engine_plan(ModelSpec(**spec), "h100-sxm", available_kv_gib=5.38, version="0.33.0")
    page = 2 * 16 * 8 * 64 * 2
    blocks = int(5.38 * GIB) // page // 18
    assert (p.kv_groups, p.num_gpu_blocks) == (2, blocks)
    # per request: ceil(131072 / 16) full blocks + ceil((128 - 1 + 8192) / 16) + 1 sliding
    assert p.max_concurrency == blocks / (8192 + 520 + 1)
    # the token line: int(concurrency x max_model_len) from vLLM 0.21.0 (0.33.0 here), blocks // groups x block before (_report_kv_cache_config, 0.20.0 / 0.21.0 sdists)
    assert p.gpu_kv_cache_tokens == int(blocks / (8192 + 520 + 1) * 131072)
    old = engine_plan(ModelSpec(**spec), "h100-sxm", available_kv_gib=5.38, version="0.20.0")
    assert (old.num_gpu_blocks, old.gpu_kv_cache_tokens) == (blocks, blocks // 2 * 16)


def test_sglang_pool_written_out():
    # rest = total x frac - weights (free after start-up = total - reserve); cell = G x d x L x 2 x 2
    p = engine_plan("llama-3.1-8b", "h100-sxm", "sglang", available_kv_gib=20)
    cell = 8 * 128 * 32 * 2 * 2
    assert p.gpu_kv_cache_tokens == 20 * GIB // cell
    assert p.k_size_gib == round((p.gpu_kv_cache_tokens + 1) * 8 * 128 * 32 * 2 / GIB, 2)


def test_nothing_available_is_refused_in_vllm_words():
    p = engine_plan("llama-3.1-8b", "h100-sxm", available_kv_gib=-1)
    assert p.refusal.startswith("No available memory for the cache blocks")


def test_sglang_mem_fraction_default_by_release():
    # python/sglang/srt/server_args.py ServerArgs.__post_init__ at each version bump in sglang's
    # history (gpu_mem: nvidia-smi memory.total, MiB). v0.4.5.post2: the tp table only.
    h200 = 139.8  # GiB: 143,155 MiB
    before = engine_config(
        "sglang", version="0.4.5.post2", gpu_memory_gib=h200, tensor_parallel_size=8
    )
    assert before.mem_fraction_static == 0.81  # "tp_size >= 8: 0.81"
    # v0.4.5.post3 (#5604): the table if gpu_mem <= 81920, else (gpu_mem - 1024 * 13) / gpu_mem
    mem = h200 * 1024
    cfg = engine_config("sglang", version="0.4.6", gpu_memory_gib=h200, tensor_parallel_size=8)
    assert cfg.mem_fraction_static == (mem - 13312) / mem
    h100 = engine_config("sglang", version="0.4.6", gpu_memory_gib=79.6, tensor_parallel_size=8)
    assert h100.mem_fraction_static == 0.81
    # v0.4.6.post2 (#5893, #5724): the table by tp x pp up to 81920 MiB, else 0.88; above 96 GiB
    # min(f + 48 * 1024 * (1 - f) / gpu_mem, (gpu_mem - 1024 * 18) / gpu_mem)
    cfg = engine_config("sglang", version="0.4.6.post2", gpu_memory_gib=h200)
    assert cfg.mem_fraction_static == min(0.88 + 48 * 1024 * 0.12 / mem, (mem - 18432) / mem)
    pp = engine_config(
        "sglang", version="0.4.6.post2", gpu_memory_gib=79.6, tensor_parallel_size=2,
        pipeline_parallel_size=2,
    )  # fmt: skip
    assert pp.mem_fraction_static == 0.85  # parallel_size 4
    nvl = engine_config("sglang", version="0.4.7", gpu_memory_gib=93.0)  # 95,232 MiB
    assert nvl.mem_fraction_static == 0.88
    # v0.4.7 (#6718): gpu_mem > 180 * 1000 on CUDA: 0.79
    b200 = engine_config("sglang", version="0.4.7", gpu_memory_gib=178.4)  # 182,682 MiB
    assert b200.mem_fraction_static == 0.79
    # v0.4.7.post1 (#7054) on: a reserve by GPU memory (tests/test_serving_sglang.py)
    # 80 GiB = 81,920 MiB, tp 1: "H100, A100" reserve (9.5 + parallel_size / 2) * 1024
    got = engine_config("sglang", version="0.4.7.post1").mem_fraction_static
    assert got == round((81920 - (9.5 + 1 / 2) * 1024) / 81920, 3)


def test_vllm_v1_batch_defaults_before_the_memory_rule():
    # Read in the PyPI sdists (vllm/engine/arg_utils.py, EngineArgs._set_default_args_v1):
    # 0.8.3: `if "h100" in device_name or "h200" in device_name:` 8192 else 2048 API-server
    # tokens, `default_max_num_seqs = 1024` for every GPU; 0.8.4 (vllm #16158): 1024 in the
    # h100 / h200 branch, 256 in the other; 0.8.5 (vllm #17073): `device_memory >= 70 *
    # GiB_bytes` decides, with no A100 exception (0.8.5.post1 the same)
    l40 = engine_config("vllm", version="0.8.3", gpu_memory_gib=44.4, gpu_name="l40s")
    assert (l40.max_num_batched_tokens, l40.max_num_seqs) == (2048, 1024)
    l40 = engine_config("vllm", version="0.8.4", gpu_memory_gib=44.4, gpu_name="l40s")
    assert (l40.max_num_batched_tokens, l40.max_num_seqs) == (2048, 256)
    b200 = engine_config("vllm", version="0.8.4", gpu_memory_gib=178.4, gpu_name="b200")
    assert (b200.max_num_batched_tokens, b200.max_num_seqs) == (2048, 256)  # not by name yet
    b200 = engine_config("vllm", version="0.8.5", gpu_memory_gib=178.4, gpu_name="b200")
    assert (b200.max_num_batched_tokens, b200.max_num_seqs) == (8192, 1024)
    h100 = engine_config("vllm", version="0.8.2", gpu_memory_gib=79.2, gpu_name="h100-sxm")
    assert (h100.max_num_batched_tokens, h100.max_num_seqs) == (8192, 1024)


def test_vllm_batch_defaults_a100_and_160_gib_tiers_by_release():
    # PyPI sdists, get_batch_defaults: 0.8.5 / 0.8.5.post1 `device_memory >= 70 * GiB_bytes`
    # (an A100-80GB is large); 0.9.0 adds `and "a100" not in device_name` (vllm #17885);
    # 0.28.0 adds `if device_memory >= 160 * GiB_bytes:` 16384 / 1024 for the API server
    # (absent in 0.27.1)
    for version, a100_expected in (("0.8.5.post1", (8192, 1024)), ("0.9.0", (2048, 256))):
        a100 = engine_config("vllm", version=version, gpu_memory_gib=79.2, gpu_name="a100-80gb")
        assert (a100.max_num_batched_tokens, a100.max_num_seqs) == a100_expected
    for version, b200_tokens in (("0.27.1", 8192), ("0.28.0", 16384)):
        b200 = engine_config("vllm", version=version, gpu_memory_gib=178.4, gpu_name="b200")
        assert (b200.max_num_batched_tokens, b200.max_num_seqs) == (b200_tokens, 1024)
    h200 = engine_config("vllm", version="0.28.0", gpu_memory_gib=139.8, gpu_name="h200")
    assert (h200.max_num_batched_tokens, h200.max_num_seqs) == (8192, 1024)


def test_vllm_v0_chunked_prefill_budget_by_release():
    # SchedulerConfig with chunked prefill on (turned on above 32768 tokens): 0.6.4.post1's
    # vllm/config.py sets `max_num_batched_tokens = 512`, 0.6.5's `= 2048` (vllm #10544)
    old = engine_config("vllm", version="0.6.4.post1", max_model_len=65536, model_max_len=131072)
    new = engine_config("vllm", version="0.6.5", max_model_len=65536, model_max_len=131072)
    assert (old.max_num_batched_tokens, new.max_num_batched_tokens) == (512, 2048)
    assert old.enable_chunked_prefill and new.enable_chunked_prefill


def test_vllm_gpu_memory_utilization_and_cudagraph_estimate_from_0_20():
    # PyPI sdists: vllm/config/cache.py `gpu_memory_utilization: float = Field(default=0.9` in
    # 0.19.0, `default=0.92` in 0.20.0; vllm/envs.py VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS
    # "0" in 0.19.0, "1" in 0.20.0 (vllm #38284; the log line says "default since v0.21.0")
    assert engine_config("vllm", version="0.19.0").gpu_memory_utilization == 0.9
    assert engine_config("vllm", version="0.20.0").gpu_memory_utilization == 0.92
    assert engine_config("vllm", version="0.6.4").gpu_memory_utilization == 0.9
    kw = dict(max_model_len=8192, cudagraph_memory_gib=1.5)
    before = engine_plan("llama-3.1-8b", "h100-sxm", version="0.19.0", **kw)
    after = engine_plan("llama-3.1-8b", "h100-sxm", version="0.20.0", **kw)
    assert (before.cudagraph_bytes, after.cudagraph_bytes) == (0, int(1.5 * GIB))


def test_vllm_v1_reports_tokens_from_0_8_0():
    # vllm/v1/core/kv_cache_utils.py: 0.7.3 logs "# GPU blocks: %d", 0.8.0 "GPU KV cache size:
    # %s tokens" (and 0.8.0 is the first release with V1 on by default)
    old = engine_plan("llama-3.1-8b", "h100-sxm", version="0.7.3", available_kv_gib=10)
    new = engine_plan("llama-3.1-8b", "h100-sxm", version="0.8.0", available_kv_gib=10)
    assert any(line.startswith("# GPU blocks: ") for line in old.log_lines)
    assert any(line.startswith("GPU KV cache size: ") for line in new.log_lines)


@pytest.mark.parametrize(("version", "layers"), [("0.13.0", 32), ("0.15.2", 48), ("0.17.0", 32)])
def test_pp_one_request_check_counts_all_layers_in_0_14_to_0_16_only(version, layers):
    """vllm#34076 (0.15.2rc1): a 48-layer Qwen3-30B-A3B-class model on PP 2 split 16 / 32 is told
    one 262,144-token request needs 24.0 GiB: 262144 x 48 layers x 2 x 4 KV heads x 128 x 2 B.
    PyPI sdists of vllm/v1/core/kv_cache_utils.py: 0.14.0 - 0.16.0 check the global groups;
    0.13.0 and 0.17.0 check each rank's own layers (the 32-layer rank: 16.0 GiB)."""
    spec = ModelSpec(
        name="qwen3-30b-a3b-class", num_hidden_layers=48, hidden_size=2048,
        num_attention_heads=32, num_key_value_heads=4, head_dim=128, intermediate_size=768,
        num_local_experts=128, num_experts_per_tok=8, vocab_size=151936,
        max_position_embeddings=262144,
    )  # fmt: skip
    p = engine_plan(
        spec, "h100-sxm", version=version, pipeline_parallel_size=2, pp_layer_partition=(16, 32),
        max_model_len=262144, available_kv_gib=3.18,
    )  # fmt: skip
    needed = 262144 * layers * 2 * 4 * 128 * 2 / 2**30
    printed = p.refusal.split("), (")[1].split(" GiB KV cache is needed")[0]
    assert float(printed) == needed  # 24.0 / 16.00: the figure's format is the release's own


def test_vllm_cudagraph_estimate_unset_is_the_median_of_logged_estimates():
    """From 0.20.0 vLLM subtracts the CUDA-graph memory it measures at start-up; unset, kvcalc
    takes the median of the "Estimated CUDA graph memory" vLLM 0.19.0 logged in llm-d-planner's
    H100 runs (the fixture, cited there): a calibration, which a given value replaces."""
    import json
    import statistics
    from pathlib import Path

    runs = json.loads(
        (Path(__file__).parent / "fixtures" / "engine_runs" / "llmd-planner.json").read_text()
    )["vllm_0_19_0"]
    median = statistics.median(r["cuda_graph_estimated_gib"] for r in runs)
    p = engine_plan("llama-3.1-8b", "h100-sxm", version="0.20.0", max_model_len=8192)
    assert p.cudagraph_bytes == int(median * GIB)
    eager = engine_plan(
        "llama-3.1-8b", "h100-sxm", version="0.20.0", max_model_len=8192, enforce_eager=True
    )
    assert eager.cudagraph_bytes == 0
    assert engine_plan("llama-3.1-8b", "h100-sxm", version="0.19.0").cudagraph_bytes == 0


def test_a_vllm_release_newer_than_the_newest_read_is_refused_by_name():
    """vLLM 0.34.0 is the newest sdist read (calc/serving/defaults.py); 0.35.0 may have changed
    its defaults, so it is refused, not planned as if it had not."""
    import pytest

    from calc.serving.plan import engine_plan

    assert engine_plan("llama-3.1-8b", "h100-sxm", "vllm", version="0.34.0").version == "0.34.0"
    with pytest.raises(ValueError, match=r"'version' 0\.35\.0 is newer than vLLM 0\.34\.0"):
        engine_plan("llama-3.1-8b", "h100-sxm", "vllm", version="0.35.0")


def test_a_copy_with_another_version_parses_it_again():
    # version_tuple is cached on the frozen config; model_copy must not carry it over
    cfg = engine_config("vllm", version="0.20.0", gpu_memory_gib=79.2, gpu_name="h100-sxm")
    assert cfg.version_tuple == (0, 20, 0, 0)
    assert cfg.model_copy(update={"version": "0.11.0"}).version_tuple == (0, 11, 0, 0)
    assert cfg.model_copy(update={"block_size": 32}).version_tuple == (0, 20, 0, 0)
