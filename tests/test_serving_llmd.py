"""llm-d-planner's vLLM 0.19.0 start-up runs on one H100-80GB (benchmarks/engine_logs/llmd-*.toml,
from https://github.com/llm-d-incubation/llm-d-planner at d3121e059da88662db39a926a3ead964be97359b,
accuracy/results/v0.19.0/logs/). The expected figures are the logs' lines; the arithmetic that
connects them is written out here from vLLM 0.19.0's source (PyPI sdist)."""

from pathlib import Path

import pytest

from calc.serving.evidence import evaluate, load_cases
from calc.serving.logs import parse_log
from calc.serving.plan import engine_plan, prepare

GIB = 2**30
FOLDER = Path(__file__).parent.parent / "benchmarks" / "engine_logs"
CASES = {c["id"]: c for c in load_cases(FOLDER) if c["id"].startswith("llmd-")}
H100 = "h100-sxm"


def test_llmd_runs_are_committed_with_their_sources():
    assert len(CASES) >= 50
    for case in CASES.values():
        assert case["url"].startswith(
            "https://github.com/llm-d-incubation/llm-d-planner/blob/d3121e059da88662db39a926a3ead964"
        )
        assert case["total_gpu_memory_gib"] == 79.19


def test_every_llmd_token_count_lies_in_the_interval_of_the_logged_memory():
    for case in CASES.values():
        for check in evaluate(case):
            if check.figure in ("GPU KV cache size, tokens", "GPU blocks", "maximum concurrency"):
                assert check.verdict in ("exact", "in interval"), check


def test_llama31_8b_pp4_blocks_come_from_the_last_rank():
    # The log's DEBUG lines: total non-KV memory 5.43 / 4.4 / 4.4 / 6.34 GiB on PP ranks 0-3,
    # INFO "Available KV cache memory: 69.8 GiB" from rank 0 only. Each rank: requested - its
    # own non-KV total (gpu_worker.py determine_available_memory), so rank 3 had
    # 69.8 + 5.43 - 6.34 = 68.89 GiB. 32 layers / 4 = 8 a rank; a block of one rank:
    # 8 layers x 16 tokens x 2 (K, V) x 8 KV heads x 128 x 2 B = 524,288 B.
    block = 8 * 16 * 2 * 8 * 128 * 2
    blocks = 2_257_264 // 16  # "GPU KV cache size: 2,257,264 tokens"
    assert blocks == 141_079
    assert abs(blocks * block / GIB - (69.8 + 5.43 - 6.34)) < 0.015
    (check,) = [
        c
        for c in evaluate(CASES["llmd-019-llama31-8b-tp1-pp4-8192"])
        if c.figure == "GPU KV cache size, tokens"
    ]
    assert check.verdict == "in interval" and "limiting rank 3" in check.note
    # rank 0's 69.8 GiB alone would allow 142,950 blocks: not what the engine kept
    assert int(69.795 * GIB) // block * 16 > 2_257_264


def test_llama31_8b_pp4_weights_per_rank():
    # "weights memory: 4.26 / 3.28 / 3.28 / 4.26 GiB" (DEBUG, ranks 0-3). Llama-3.1-8B: a layer
    # is q, o 4096 x 4096, k, v 1024 x 4096, gate, up, down 4096 x 14336, two norms of 4096;
    # rank 0 adds the embedding, rank 3 the final norm and the LM head (128,256 x 4096 each);
    # every rank builds the rotary table, 131,072 x 128, bf16. Every tensor is a whole multiple
    # of 2 MiB or of 512 B, so torch's caching allocator counts them as they are; each attention
    # layer adds 7 fp32 scalars of one 512 B block each (_k/_v/_q/_prob_scale and q/k/v_range:
    # vllm 0.19.0 sdist, model_executor/layers/attention/attention.py set_default_quant_scales).
    layer = 2 * 4096 * 4096 + 2 * 1024 * 4096 + 3 * 4096 * 14336 + 2 * 4096
    table, rope = 128256 * 4096, 131072 * 128
    want = [8 * layer + table + rope, 8 * layer + rope, 8 * layer + rope]
    want.append(8 * layer + 4096 + table + rope)
    w = prepare("llama-3.1-8b", H100, pipeline_parallel_size=4, version="0.19.0")[4]
    assert list(w) == [2 * n + 8 * 7 * 512 for n in want]
    for got, logged in zip(w, (4.26, 3.28, 3.28, 4.26), strict=True):
        assert abs(got / GIB - logged) / logged < 0.005


def test_llama4_scout_chunked_layers_are_their_own_groups_in_0_19():
    # VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE: "1" in 0.19.0's envs.py (printed True
    # in the log's compile-cache factors). 36 chunked + 12 full layers: 4 groups of 12.
    # The log: "num_gpu_blocks is: 91495", "GPU KV cache size: 365,968 tokens",
    # "Maximum concurrency for 8,192 tokens per request: 44.68x". Tokens = blocks // 4 x 16;
    # a request needs 8192 / 16 = 512 blocks in each of the 4 groups (the chunk, 8192, is not
    # shorter than the request).
    assert 91495 // 4 * 16 == 365_968
    assert f"{91495 / (4 * 512):.2f}" == "44.68"
    page = 16 * 2 * (8 // 4) * 128 * 2  # one layer's block, TP4: 2 KV heads a rank
    p = engine_plan("llama-4-scout", H100, available_kv_gib=91495 * 12 * page / GIB,
                    tensor_parallel_size=4, max_model_len=8192, version="0.19.0")  # fmt: skip
    assert (p.kv_groups, p.num_gpu_blocks, p.gpu_kv_cache_tokens) == (4, 91495, 365_968)
    assert f"{p.max_concurrency:.2f}" == "44.68"
    old = engine_plan("llama-4-scout", H100, available_kv_gib=1.0, tensor_parallel_size=4,
                      max_model_len=8192, version="0.13.0")  # fmt: skip
    assert old.kv_groups == 1  # "0" in 0.10.1 - 0.13.0


@pytest.mark.parametrize(
    ("cid", "blocks", "tokens", "groups"),
    [
        # Gemma 2 / 3 (sliding + full): tokens = blocks // groups x 16
        ("llmd-019-gemma2-27b-tp1-8192", 7335, 58672, 2),  # 23 sliding + 23 full: groups of 23
        # 29 sliding + 5 full: groups of 5, 6 sliding groups (one slot unused) + 1 full
        ("llmd-019-gemma3-4b-tp1-8192", 204817, 468144, 7),
    ],
)
def test_sliding_models_token_line_is_blocks_per_group(cid, blocks, tokens, groups):
    case = CASES[cid]
    assert case["logged"]["num_gpu_blocks"] == blocks
    checks = {c.figure: c for c in evaluate(case)}
    lay = prepare(case["preset"], H100, version="0.19.0", max_model_len=8192)[3]
    assert blocks // groups * 16 == tokens
    assert len(lay.groups) == groups
    assert checks["GPU blocks"].verdict == "in interval"


def test_the_v1_debug_profile_line_parses():
    line = (
        "(Worker_PP0 pid=441) DEBUG 04-22 01:44:15 [v1/worker/gpu_worker.py:435] Memory profiling "
        "takes 9.27 seconds. Total non KV cache memory: 5.43GiB; torch peak memory increase: "
        "1.1GiB; non-torch forward increase memory: 0.07GiB; weights memory: 4.26GiB."
    )
    got = parse_log(line)
    assert (got["non_kv_total_gib"], got["activation_peak_gib"], got["non_torch_gib"]) == (
        5.43,
        1.1,
        0.07,
    )
