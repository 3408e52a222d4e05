"""SGLang's --max-total-tokens (calc.serving.sglang_token_cap), the expected values written out from
SGLang's source (pypi.org sglang wheels):

- init_memory_pool (model_runner.py 0.4.0 - 0.5.6.post2, model_runner_kv_cache_mixin.py 0.5.7 -
  0.5.10): min(profiled, C), "max_total_tokens=C is larger than the profiled value T. Use the
  profiled value instead." when C > T, then // page_size x page_size; E (the request pool) from
  the capped count up to 0.4.1.post3 (the cap came first), from the uncapped one 0.4.1.post4 -
  0.5.9, from the final count from 0.5.10 (_resolve_max_num_reqs);
- 0.5.11 on (_apply_token_constraints, pool_configurator.py / kv_cache_configurator.py): the cap
  compares with the configurator's page-rounded count (a sliding pool: its full layers' tokens,
  int(rest // (F x n_full + r x S x n_swa))) and the configurator re-runs on the capped count;
- the prefill graph's max tokens min(chunk, C) from 0.5.10 (server_args.py, memory_hook.py).
"""

from __future__ import annotations

import json

import pytest

from calc.cli.main import main
from calc.serving.defaults_sglang_2026 import prefill_graph_reserve_mib
from calc.serving.engine import engine_config
from calc.serving.grid import engine_plan_grid
from calc.serving.plan import engine_plan

GIB = 2**30
LLAMA_CELL = 32 * 2 * 8 * 128 * 2  # 32 layers x K, V x 8 KV heads x 128 x bf16: 131,072 B
PROFILED = 20 * GIB // LLAMA_CELL  # 163,840 tokens from a 20 GiB budget


def sg(model="llama-3.1-8b", version="0.5.23", avail=20.0, **kw):
    return engine_plan(model, "h100-sxm", "sglang", version=version, available_kv_gib=avail, **kw)


def warning(cap, profiled):
    return (
        f"max_total_tokens={cap} is larger than the profiled value {profiled}. Use the profiled "
        "value instead."
    )


def k_line(tokens, page=1, version="0.5.23"):
    # MHATokenToKVPool: tokens + page_size rows a layer, 8 KV heads x 128, 32 layers, bf16;
    # from 0.5.13 the line names the dtype (_finalize_allocation_log, memory_pool.py)
    k = f"{(tokens + page) * 8 * 128 * 32 * 2 / GIB:.2f} GB"
    dtype = "dtype: torch.bfloat16, " if version in ("0.5.13", "0.5.23") else ""
    return f"KV Cache is allocated. {dtype}#tokens: {tokens}, K size: {k}, V size: {k}"


@pytest.mark.parametrize("version", ["0.4.2", "0.5.9", "0.5.10", "0.5.23"])
def test_a_cap_below_the_profiled_count_is_the_pool(version):
    assert PROFILED == 163840
    p = sg(version=version, max_total_tokens=100000)
    assert p.gpu_kv_cache_tokens == p.num_gpu_blocks == 100000
    # no warning: the cap binds; 0.5.3rc2 - 0.5.12 print the dtype first (configure_kv_cache_dtype)
    i = 2 if version in ("0.5.9", "0.5.10") else 1
    assert p.log_lines[i] == k_line(100000, version=version)
    assert p.k_size_gib == round((100000 + 1) * 8 * 128 * 32 * 2 / GIB, 2) == 6.10
    assert p.log_lines[i + 1].startswith("max_total_num_tokens=100000, ")


def test_the_cap_in_whole_pages():
    # min(163840, 100007) // 16 x 16 = 6250 pages of 16
    p = sg(max_total_tokens=100007, page_size=16)
    assert p.gpu_kv_cache_tokens == 100007 // 16 * 16 == 100000
    assert p.num_gpu_blocks == 6250
    assert p.log_lines[1] == k_line(100000, page=16)


def test_a_cap_above_the_profiled_count_warns_and_keeps_it():
    p = sg(max_total_tokens=200000)
    assert p.gpu_kv_cache_tokens == PROFILED
    assert p.log_lines[1:3] == [warning(200000, 163840), k_line(163840)]
    # the value printed: unrounded up to 0.5.10, the configurator's page-rounded one from 0.5.11
    avail = 20.001
    raw = int(avail * GIB) // LLAMA_CELL
    assert raw == 163848 and raw // 16 * 16 == 163840
    old = sg(version="0.5.10", avail=avail, page_size=16, max_total_tokens=200000)
    new = sg(version="0.5.11", avail=avail, page_size=16, max_total_tokens=200000)
    assert old.log_lines[1:3] == ["Using KV cache dtype: torch.bfloat16", warning(200000, 163848)]
    assert new.log_lines[1:3] == ["Using KV cache dtype: torch.bfloat16", warning(200000, 163840)]
    assert old.gpu_kv_cache_tokens == new.gpu_kv_cache_tokens == 163840
    # a cap of the profiled count exactly: no warning
    assert sg(max_total_tokens=163840).log_lines[1] == k_line(163840)


def test_speculative_headroom_counts_before_the_cap():
    # up to 0.5.6.post2 the headroom G x steps x topk + G x draft + 100 (G = 48) joins the
    # profiled count the cap is compared with
    spec = dict(
        speculative_algorithm="EAGLE",
        speculative_num_steps=3,
        speculative_eagle_topk=1,
        speculative_num_draft_tokens=4,
    )
    seen = PROFILED + 48 * 3 * 1 + 48 * 4 + 100
    assert seen == 164276
    p = sg(version="0.5.2", max_total_tokens=200000, **spec)
    assert p.gpu_kv_cache_tokens == seen
    assert p.log_lines[1] == warning(200000, seen)
    assert sg(version="0.5.2", max_total_tokens=164000, **spec).gpu_kv_cache_tokens == 164000


def test_max_running_requests_from_the_capped_count_by_release():
    # L = 32768: E = clamp(int(T / L x 512), 2048, 4096); uncapped int(163840 / 32768 x 512) =
    # 2560, capped int(100000 / 32768 x 512) = 1562 -> 2048; T // 2 = 50000 either way
    kw = dict(max_model_len=32768, max_total_tokens=100000)
    expected = {
        "0.4.1": 2048 + 1,  # cap before E (+ 1 request slot before 0.4.7)
        "0.4.1.post3": 2048 + 1,
        "0.4.1.post4": 2560 + 1,  # E from the uncapped count
        "0.4.2": 2560 + 1,
        "0.5.9": 2560,
        "0.5.10": 2048,  # _resolve_max_num_reqs(capacity): the capped count
        "0.5.23": 2048,
    }
    for version, n in expected.items():
        assert sg(version=version, **kw).max_running_requests == n, version
    # T // 2 binds: a cap of 3000 tokens runs 1500 requests
    assert sg(max_model_len=32768, max_total_tokens=3000).max_running_requests == 3000 // 2


def test_gpt_oss_sliding_pools():
    # gpt-oss-20b at TP 1: 12 full + 12 sliding layers, 8 KV heads x 64, bf16: F = S = 2048 B
    token = 8 * (64 + 64) * 2
    rest = 20 * GIB
    # 0.5.10: the one-pool count T = rest // (24 x F), capped, then split
    T = rest // (24 * token)
    assert T == 436906
    full = int(100000 * 24 / (12 + 0.8 * 12))
    assert (full, int(full * 0.8)) == (111111, 88888)  # the full pool over the cap
    old = sg("gpt-oss-20b", "0.5.10", max_total_tokens=100000)
    assert old.gpu_kv_cache_tokens == 111111
    assert "full_layer_tokens=111111, swa_layer_tokens=88888" in old.log_lines[2]
    high = sg("gpt-oss-20b", "0.5.10", max_total_tokens=10**7)
    assert high.log_lines[2] == warning(10**7, T)  # after "Using KV cache dtype"
    # 0.5.23: HybridSWAPoolConfigurator's full tokens from the budget, the cap on them
    full0 = int(rest // (token * 12 + 0.8 * token * 12))
    assert (full0, int(full0 * 0.8)) == (485451, 388360)
    new = sg("gpt-oss-20b", "0.5.23", max_total_tokens=100000)
    assert new.gpu_kv_cache_tokens == 100000
    pools = [x for x in new.log_lines if "memory pool" in x]
    assert [x.split(". ", 1)[1] for x in pools] == [
        "full_layer_tokens=485451, swa_layer_tokens=388360",  # profiled, logged first
        "full_layer_tokens=100000, swa_layer_tokens=80000",  # the re-run on the cap
    ]
    high = sg("gpt-oss-20b", "0.5.23", max_total_tokens=10**7)
    assert high.gpu_kv_cache_tokens == 485451
    assert high.log_lines[2] == warning(10**7, 485451)
    assert len([x for x in high.log_lines if "memory pool" in x]) == 1
    # from 0.5.20 a sliding pool of at most window - 1 + page_size tokens is refused:
    # cap 100 -> swa int(100 x 0.8) = 80 <= 127 + 1
    tiny = sg("gpt-oss-20b", "0.5.23", max_total_tokens=100)
    assert tiny.refusal == (
        "SWA pool (80 tokens) cannot hold even one request: the prefill admission floor is "
        "sliding_window_size (127) + page_size (1). Increase --swa-full-tokens-ratio or the "
        "total KV budget."
    )
    assert sg("gpt-oss-20b", "0.5.19", max_total_tokens=100).refusal is None
    assert sg("gpt-oss-20b", "0.5.23", max_total_tokens=200).refusal is None  # 160 > 128


def test_qwen3_next_mamba_pool_unchanged():
    # the mamba state pool leaves the budget first; the cap bounds the 12 full-attention
    # layers' pool: 2 KV heads over TP 4 (one a rank) x 256, bf16
    kw = dict(tensor_parallel_size=4)
    free = sg("qwen3-next-80b-a3b", **kw)
    p = sg("qwen3-next-80b-a3b", max_total_tokens=100, **kw)
    assert p.gpu_kv_cache_tokens == 100
    k = f"{(100 + 1) * 1 * 256 * 12 * 2 / GIB:.2f} GB"
    assert p.log_lines[2] == (
        f"KV Cache is allocated. dtype: torch.bfloat16, #tokens: 100, K size: {k}, V size: {k}"
    )
    assert p.max_mamba_cache_size == free.max_mamba_cache_size
    assert p.log_lines[1] == free.log_lines[1]  # the same "Mamba Cache is allocated" line
    # max_running_requests = min(E, T // 2, max_mamba_cache_size // 5): T // 2 = 50 binds
    assert free.max_mamba_cache_size // 5 > 50
    assert p.max_running_requests == 100 // 2


def test_the_mtp_draft_worker_repeats_the_warning_up_to_0_5_8():
    # DeepSeek-V3 NEXTN at TP 8: its draft worker compares the cap with the target's count
    v3 = dict(tensor_parallel_size=8, speculative_algorithm="NEXTN", page_size=1)
    latent = (512 + 64) * 2
    for version, head, times in (("0.5.4", 48 * 3 + 48 * 4 + 100, 2), ("0.5.10", 0, 1)):
        p = engine_plan(
            "deepseek-v3", "h200", "sglang", version=version, available_kv_gib=40,
            max_total_tokens=10**7, **v3,
        )  # fmt: skip
        tokens = 40 * GIB // (latent * 61) + head
        assert p.gpu_kv_cache_tokens == tokens
        assert p.log_lines.count(warning(10**7, tokens)) == times
        assert p.log_lines[-2].startswith(f"KV Cache is allocated. #tokens: {tokens}, ")


def test_the_prefill_graph_reserve_counts_the_cap():
    # 4..32 /4, 48..256 /16, 288..512 /32, 576..1024 /64, 1280..4096 /256, 4608.. /512
    up_to_8192 = 8 + 14 + 8 + 8 + 12 + 8
    up_to_4000 = 8 + 14 + 8 + 8 + 11
    v = (0, 5, 23, 0)
    kw = dict(mla=False, model_name="llama-3.1-8b", context_length=None)
    assert prefill_graph_reserve_mib(v, 8192, **kw) == up_to_8192 * 8
    assert prefill_graph_reserve_mib(v, 8192, max_total_tokens=4000, **kw) == up_to_4000 * 8
    assert prefill_graph_reserve_mib(v, 8192, **{**kw, "mla": True}, max_total_tokens=4000) == 1536
    # 0.5.23's default: round((mem - reserved) / mem, 3), reserved = 512 + 8192 x 1.5 + 256 x 2
    # + 1 / 8 x 1024 + the graph's
    mem = 80 * 1024
    for cap, sizes in ((None, up_to_8192), (4000, up_to_4000)):
        cfg = engine_config(
            "sglang", version="0.5.23", gpu_memory_gib=80.0, mla=False, model_name="llama-3.1-8b",
            chunked_prefill_size=8192, cuda_graph_max_bs=256, max_total_tokens=cap,
        )  # fmt: skip
        reserved = 512 + 8192 * 1.5 + 256 * 2 + 1 / 8 * 1024 + sizes * 8
        assert cfg.mem_fraction_static == round((mem - reserved) / mem, 3)
    assert round((mem - 13904) / mem, 3) == 0.830 and round((mem - 13832) / mem, 3) == 0.831


def test_grid_rows_equal_engine_plan():
    kw = dict(version="0.5.23", max_total_tokens=100000)
    df = engine_plan_grid("llama-3.1-8b", "h100-sxm", "sglang", available_kv_gib=[10.0, 20.0], **kw)
    assert list(df["gpu_kv_cache_tokens"]) == [10 * GIB // LLAMA_CELL, 100000] == [81920, 100000]
    for row, gib in zip(df.itertuples(), (10.0, 20.0), strict=True):
        p = sg(avail=gib, max_total_tokens=100000)
        assert row.gpu_kv_cache_tokens == p.gpu_kv_cache_tokens
        assert row.max_running_requests == p.max_running_requests
        assert row.max_concurrency == p.max_concurrency
    fr = [0.7, 0.85]
    df = engine_plan_grid("gpt-oss-20b", "h100-sxm", "sglang", mem_fraction_static=fr, **kw)
    for row, f in zip(df.itertuples(), fr, strict=True):
        p = engine_plan("gpt-oss-20b", "h100-sxm", "sglang", mem_fraction_static=f, **kw)
        assert row.gpu_kv_cache_tokens == p.gpu_kv_cache_tokens
        assert row.max_running_requests == p.max_running_requests


def test_parsing_and_refusals():
    # human_readable_int from 0.5.10; type=int before
    assert sg(max_total_tokens="128k").gpu_kv_cache_tokens == 128000
    assert sg(max_total_tokens="100Ki").gpu_kv_cache_tokens == 102400
    with pytest.raises(ValueError, match=r"'max_total_tokens' must be an integer for sglang 0.5.9"):
        sg(version="0.5.9", max_total_tokens="128k")
    for bad in (0, -5, "0"):
        with pytest.raises(ValueError, match=r"'max_total_tokens' must be positive: got -?\d"):
            sg(max_total_tokens=bad)
    # a cap under one page leaves no token: the pool's own refusal
    p = sg(max_total_tokens=10, page_size=16)
    assert p.gpu_kv_cache_tokens == 0
    assert p.refusal.startswith("Not enough memory")


def test_cli(capsys):
    argv = ["plan", "llama-3.1-8b", "--gpu", "h100-sxm", "--available-kv-gib", "20"]
    assert main([*argv, "--engine", "sglang", "--max-total-tokens", "100000", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["gpu_kv_cache_tokens"] == data["num_gpu_blocks"] == 100000
    assert data["k_size_gib"] == round((100000 + 1) * 8 * 128 * 32 * 2 / GIB, 2)
    assert data["log_lines"][1] == k_line(100000)
    assert main([*argv, "--engine", "sglang", "--max-total-tokens", "200000"]) == 0
    assert warning(200000, 163840) in capsys.readouterr().out
    assert main([*argv, "--engine", "sglang", "--max-total-tokens", "0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'max_total_tokens' must be positive: got 0" in err
    assert main([*argv, "--engine", "vllm", "--max-total-tokens", "100000"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "'--max-total-tokens' is an SGLang setting: vLLM takes --num-gpu-blocks-override" in err


def test_a_binding_cap_allocates_fewer_bytes_than_the_budget():
    # MHATokenToKVPool allocates (100000 + 1 page row) x 32 layers x 8 heads x 128 x 2 B, for K
    # and for V: the rest of the 20 GiB stays free; an unbinding cap allocates the whole budget
    p = sg(max_total_tokens=100000)
    assert p.allocated_kv_cache_bytes == 2 * (100000 + 1) * 32 * 8 * 128 * 2
    assert p.available_kv_cache_bytes == 20 * GIB
    assert sg(max_total_tokens=200000).allocated_kv_cache_bytes is None
    assert sg().allocated_kv_cache_bytes is None
