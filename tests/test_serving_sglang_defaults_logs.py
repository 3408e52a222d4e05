"""SGLang's default mem_fraction_static (calc/serving/defaults_sglang*.py, through the plan)
against the value server_args printed in SGLang's own docs CI runs (benchmarks/engine_logs/
sglang-docs-05*.toml: docs.sglang.ai pages executed on 2026-02-21 .. 2026-03-21, each citing its
page, date and the server_args.py line numbers that place it between the v0.5.9 and v0.5.10
wheels).

The expected values are the printed ones; beside each, SGLang's rule written out from
ServerArgs._handle_gpu_memory_settings (pypi sglang 0.5.9 / 0.5.10 wheels):
  reserved = 512 + max(chunked_prefill_size, 2048) * 1.5 + cuda_graph_max_bs * 2
             + tp_size * pp_size / 8 * 1024 [+ len(piecewise_cuda_graph_tokens) * 8, 0.5.10]
  reserved = max(reserved, 10 * 1024) on GPUs over 60 GiB
  mem_fraction_static = round((gpu_mem - reserved) / gpu_mem, 3), gpu_mem nvidia-smi MiB.
"""

import tomllib
from pathlib import Path

import pytest

from calc.serving.evidence import evaluate
from calc.serving.hardware import load_hardware

LOGS = Path(__file__).resolve().parents[1] / "benchmarks" / "engine_logs"
H100, H200 = 81559, 143771  # nvidia-smi MiB (h100-sxm preset; sglang#3196's nvidia-smi table)
PCG_TOKENS = 58  # the printed piecewise_cuda_graph_tokens list, 4 .. 8192


def _case(name: str) -> dict:
    return tomllib.loads((LOGS / f"{name}.toml").read_text())


def _rule(gpu_mib: int, piecewise: bool) -> float:
    # chunked_prefill_size 8192 (printed); cuda_graph_max_bs 256 when the rule ran (the printed
    # cuda_graph_bs list ends at 256; sglang.test.doc_patch sets 4 afterwards); tp 1, pp 1
    reserved = 512 + max(8192, 2048) * 1.5 + 256 * 2 + 1 * 1 / 8 * 1024
    if piecewise:
        reserved += PCG_TOKENS * 8
    reserved = max(reserved, 10 * 1024)
    return round((gpu_mib - reserved) / gpu_mib, 3)


@pytest.mark.parametrize(
    ("name", "printed", "gpu_mib", "piecewise"),
    [
        # "mem_fraction_static=0.835" (2026-02-21, enable_piecewise_cuda_graph=False)
        ("sglang-docs-0509-qwen25-05b-h100-engine", 0.835, H100, False),
        # "mem_fraction_static=0.907" (2026-02-27, capture at avail_mem=135.47 GB)
        ("sglang-docs-0509-qwen25-05b-h200-engine", 0.907, H200, False),
        # "mem_fraction_static=0.83" (2026-03-12, disable_piecewise_cuda_graph=False)
        ("sglang-docs-0510pre-r1-qwen7b-h100-engine", 0.83, H100, True),
        # "mem_fraction_static=0.903" (2026-03-21, capture at avail_mem=101.38 GB)
        ("sglang-docs-0510pre-r1-qwen7b-h200-engine", 0.903, H200, True),
    ],
)
def test_default_fraction_is_the_printed_one(name, printed, gpu_mib, piecewise):
    case = _case(name)
    assert case["logged"]["mem_fraction_static_printed"] == printed
    assert _rule(gpu_mib, piecewise) == printed  # the source's rule reproduces the log
    checks = evaluate(case)
    # a server_args line only: the default is the one check (no pool, weights or K size)
    assert [c.figure for c in checks] == ["default mem_fraction_static"]
    assert checks[0].kvcalc == printed and checks[0].verdict == "exact"


def test_h200_default_needs_the_nvidia_smi_total():
    # the nominal 141 GiB (144384 MiB) would print 0.904 where SGLang printed 0.903
    assert round((141 * 1024 - 13904) / (141 * 1024), 3) == 0.904
    assert load_hardware("h200").driver_total_bytes == H200 * 2**20
    (check,) = evaluate(_case("sglang-docs-0510pre-r1-qwen7b-h200-engine"))
    assert check.kvcalc == 0.903


def test_the_piecewise_graph_moves_the_third_digit_on_the_same_card():
    # v0.5.9 -> v0.5.10 rules on one GPU class: 58 x 8 MiB more reserved
    h100 = [
        evaluate(_case(n))[0].kvcalc
        for n in (
            "sglang-docs-0509-qwen25-05b-h100-engine",
            "sglang-docs-0510pre-r1-qwen7b-h100-engine",
        )
    ]
    h200 = [
        evaluate(_case(n))[0].kvcalc
        for n in (
            "sglang-docs-0509-qwen25-05b-h200-engine",
            "sglang-docs-0510pre-r1-qwen7b-h200-engine",
        )
    ]
    assert h100 == [0.835, 0.83] and h200 == [0.907, 0.903]


def test_v0519_kv_total_from_the_reported_tokens():
    # llm-d README2 (sglang v0.5.19, Qwen3-32B, 1 x H100): "9.54 GB for 39,078 tokens";
    # Qwen3-32B config.json: 64 layers, 8 KV heads, head_dim 128, bf16; the pool has #tokens + 1
    # rows (page 1): K = V = 39,079 x 64 x 8 x 128 x 2 B
    k = 39_079 * 64 * 8 * 128 * 2
    assert f"{2 * k / 2**30:.2f}" == "9.54"
    checks = evaluate(_case("sglang-llmd-snapshot-qwen3-32b-h100-0519"))
    (kv,) = [c for c in checks if c.figure.startswith("K + V size")]
    assert kv.logged == kv.kvcalc == "9.54" and kv.verdict == "exact"
    # the free-memory path lands 26 rows above the reported count (a known miss, see the case)
    (t,) = [c for c in checks if c.figure == "#tokens (from the logged avail mem)"]
    assert t.verdict == "miss" and t.kvcalc[0] - 39_078 == 26


def test_b200_tp4_pool_from_the_rank_with_least_free_memory():
    # sglang#22537 (v0.5.10, Qwen3-32B, 4 x B200): "Memory pool end. avail mem=25.37 GB" on TP1 /
    # TP2 vs 25.40 on TP0, after the same pool: they had 160.78 - 0.03 = 160.75 GB after the
    # weights. SGLang (model_runner.profile_max_num_token): rest = after - before x (1 - 0.852),
    # max_total_num_tokens = rest // cell, cell = 2 KV heads x 128 x 64 layers x 2 B x (K, V), in
    # whole pages of 64 (trtllm_mha, the default on a B200 from 0.5.6.post1: sglang_page)
    cell, gib = 2 * 128 * 64 * 2 * 2, 2**30
    assert 2_206_208 % 64 == 0

    def tokens(after, before):
        return int((after - before * (1 - 0.852)) * gib) // cell // 64 * 64

    assert tokens(160.74, 176.29) <= 2_206_208 <= tokens(160.76, 176.27)  # TP1 / TP2
    assert tokens(160.775, 176.285) > 2_206_208  # TP0's own figure: too many
    case = _case("sglang-22537-qwen3-32b-b200-tp4")
    checks = {c.figure: c for c in evaluate(case)}
    assert checks["K size, GiB (from the logged #tokens)"].verdict == "exact"
    assert checks["#tokens (from the logged avail mem)"].verdict == "miss"  # from TP0's line
    # the default it was sized with (no --mem-fraction-static assumed): 0.852 (74 piecewise
    # sizes up to chunked_prefill_size 16384: the 58 to 8192 and 16 more, 8704..16384 / 512)
    reserved = 512 + 16384 * 1.5 + 512 * 2 + 4 / 8 * 1024 + 74 * 8
    assert round((183359 - reserved) / 183359, 3) == 0.852


def test_v057_default_from_an_issue_command_without_the_flag():
    # LMCache#2400 (2026-01-14, main just after v0.5.7): "launch_server --model-path
    # Qwen/Qwen3-14B ... --enable-lmcache" printed mem_fraction_static=0.835: no piecewise term
    # before v0.5.10, H100 80GB (81559 MiB)
    assert _rule(H100, piecewise=False) == 0.835
    checks = {c.figure: c for c in evaluate(_case("sglang-lmcache2400-qwen3-14b-h100-057"))}
    default = checks["default mem_fraction_static"]
    assert default.logged == default.kvcalc == 0.835 and default.verdict == "exact"
    assert checks["weights_gib"].logged == 27.69  # "mem usage=27.69 GB", checked to 0.5 %
