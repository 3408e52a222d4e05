"""--kv-cache-memory-bytes (CacheConfig.kv_cache_memory_bytes, vLLM 0.10.2 on): each worker's
KV-cache memory in bytes instead of the profiled figure (vllm/v1/worker/gpu_worker.py
determine_available_memory, read in the 0.10.2 - 0.34.0 sdists; calc/serving/vllm_kv_memory.py).

Arithmetic written out for llama-3.1-8b (32 layers, 8 KV heads of 128, bf16): a token of one
layer is 2 x 8 x 128 x 2 B = 4 KiB, so a 16-token block of all 32 layers is 2 MiB and 0.34.0's
64-token block 8 MiB. The logged figures are from public start-up logs:
- github.com/ritikraj7/cpu-centric-agentic-ai @ ce8259c3c144c266d5318935fa77d17f20c7c9b8
  mini-swe-agent/XPU.md: `--kv-cache-memory-bytes 750M` -> "Initial free memory 10.18 GiB,
  reserved 0.73 GiB memory for KV Cache as specified by kv_cache_memory_bytes config and skipped
  memory profiling. This does not respect the gpu_memory_utilization config. Only use
  kv_cache_memory_bytes config when you want manual control of KV cache memory size. If OOM'ed,
  check the difference of initial free memory between the current run and the previous run
  where kv_cache_memory_bytes is suggested and update it correspondingly."
"""

import pytest

from calc.cli.main import main
from calc.serving.grid import engine_plan_grid
from calc.serving.inverse import kv_cache_memory_for
from calc.serving.plan import engine_plan
from calc.serving.vllm_extensible import extensible_on
from calc.serving.vllm_kv_memory import parse_kv_cache_memory, reserved_line

GIB, MIB = 2**30, 2**20
V = (0, 33, 0, 0)


def plan(version="0.33.0", gpu="h100-sxm", **kw):
    kw.setdefault("max_model_len", 8192)
    return engine_plan("llama-3.1-8b", gpu, "vllm", version=version, **kw)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("1k", 1000),  # human_readable_int's docstring: '1k' -> 1,000
        ("1K", 1024),  # '1K' -> 1,024
        ("25.6k", 25600),  # '25.6k' -> 25,600
        ("750M", 750 * 2**20),  # the XPU log: reserved 0.73 GiB = 786,432,000 / 2^30
        ("500M", 500 * 2**20),  # haystack/XPU.md at the same commit: reserved 0.49 GiB
        ("8g", 8 * 10**9),
        ("8589934592", 8 * GIB),
        (" 2G ", 2 * GIB),
        (5713920000, 5713920000),
        (0, 0),
    ],
)
def test_vllm_reads_the_size_as_human_readable_int(text, expected):
    assert parse_kv_cache_memory(text, V) == expected


def test_the_parsed_sizes_print_as_the_logs_do():
    assert f"{round(parse_kv_cache_memory('750M', V) / GIB, 2)}" == "0.73"
    assert f"{round(parse_kv_cache_memory('500M', V) / GIB, 2)}" == "0.49"


@pytest.mark.parametrize(
    "text, version, words",
    [
        (
            "1.5G",
            V,
            "Decimals are not allowed with binary suffixes like G. Did you mean to use 1.5g",
        ),
        ("1T", (0, 12, 0, 0), "the suffix 'T' is read from 0.13.0 on"),
        ("8 GiB", V, "must be bytes, as an integer or with a suffix"),
        ("-1", V, "must be >= 0 bytes: got -1"),
        (-5, V, "must be >= 0 bytes: got -5"),
        (True, V, "must be a number of bytes: got True"),
        (1.5, V, "must be bytes as an integer or text"),
    ],
)
def test_what_it_refuses_names_the_field(text, version, words):
    with pytest.raises(ValueError, match="kv_cache_memory_bytes") as e:
        parse_kv_cache_memory(text, version)
    assert words in str(e.value)


def test_tera_from_0_13_0():
    assert parse_kv_cache_memory("1T", (0, 13, 0, 0)) == 2**40
    assert parse_kv_cache_memory("1t", (0, 13, 0, 0)) == 10**12


def test_the_memory_is_the_given_bytes_exactly():
    p = plan(kv_cache_memory_bytes="7G")
    # 7 GiB / 2 MiB = 3584 blocks of 16 tokens = 57,344 tokens; 8192 tokens take 512 blocks
    assert p.source == "kv_cache_memory_bytes"
    assert p.available_kv_cache_bytes == 7 * GIB
    assert (p.num_gpu_blocks, p.gpu_kv_cache_tokens, p.max_concurrency) == (3584, 57344, 7.0)
    assert p.activation_bytes is None and p.cudagraph_bytes is None  # nothing profiled
    assert not any(line.startswith("Available KV cache memory") for line in p.log_lines)
    reserved = [line for line in p.log_lines if line.startswith("Initial free memory")]
    assert len(reserved) == 1 and ", reserved 7.0 GiB memory for KV Cache" in reserved[0]
    assert p.log_lines[-1] == (
        "GPU KV cache size: 57,344 tokens, Maximum concurrency for 8,192 tokens per request: 7.00x"
    )


def test_the_utilization_sizes_nothing():
    a = plan(kv_cache_memory_bytes=7 * GIB, gpu_memory_utilization=0.3)
    b = plan(kv_cache_memory_bytes=7 * GIB, gpu_memory_utilization=0.95)
    assert a.num_gpu_blocks == b.num_gpu_blocks == 3584


def test_every_pipeline_rank_gets_the_bytes():
    # 16 layers a rank: a block of a rank is 1 MiB, so 7 GiB hold 7168 blocks on each
    p = plan(kv_cache_memory_bytes="7G", pipeline_parallel_size=2)
    assert p.num_gpu_blocks == 7168
    assert p.max_concurrency == 7168 / 512


def test_0_34_the_extensible_cache_is_off():
    p = plan("0.34.0", kv_cache_memory_bytes="7G")
    # 64-token blocks of 8 MiB: 896 of them, 57,344 tokens; 8192 tokens take 128 blocks
    assert not p.extensible_kv_cache and p.measured_kv_cache_bytes is None
    assert (p.num_gpu_blocks, p.gpu_kv_cache_tokens, p.max_concurrency) == (896, 57344, 7.0)
    assert not any("Memory after warmup" in line for line in p.log_lines)


def test_0_34_zero_profiles_but_still_turns_the_extensible_cache_off():
    # `if kv_cache_memory_bytes := ...` is falsy for 0, but _resolve_extensible_kv_cache tests
    # `is not None`: the profiled path at the non-extensible default utilization, 0.92
    zero = plan("0.34.0", kv_cache_memory_bytes=0)
    off = plan("0.34.0", enable_extensible_kv_cache=False)
    assert zero.source == "derived" and not zero.extensible_kv_cache
    assert zero.num_gpu_blocks == off.num_gpu_blocks
    assert zero.available_kv_cache_bytes == off.available_kv_cache_bytes
    assert plan("0.33.0", kv_cache_memory_bytes=0).num_gpu_blocks == plan("0.33.0").num_gpu_blocks


def test_the_extensible_cache_cannot_be_asked_for_with_it():
    with pytest.raises(ValueError) as e:
        plan("0.34.0", kv_cache_memory_bytes="7G", enable_extensible_kv_cache=True)
    assert str(e.value) == (
        "enable_extensible_kv_cache: it sizes the KV cache from measured memory, which "
        "kv_cache_memory_bytes overrides."
    )


def test_the_platform_reason_comes_first():
    # _resolve_extensible_kv_cache tests the platform before the sizing settings
    with pytest.raises(ValueError, match="only supported on CUDA and ROCm"):
        extensible_on((0, 34, 0, 0), "Intel", True, kv_cache_memory_bytes=GIB)
    assert extensible_on((0, 34, 0, 0), "NVIDIA", None) is True
    assert extensible_on((0, 34, 0, 0), "NVIDIA", None, kv_cache_memory_bytes=0) is False
    assert extensible_on((0, 34, 0, 0), "AMD", None, num_gpu_blocks_override=10) is False


def test_a_release_before_0_10_2_refuses_it():
    with pytest.raises(ValueError, match="'kv_cache_memory_bytes' is a vLLM setting from 0.10.2"):
        plan("0.10.1", kv_cache_memory_bytes="7G")
    assert plan("0.10.2", kv_cache_memory_bytes="7G").num_gpu_blocks == 3584


def test_a_logged_memory_and_the_flag_are_one_too_many():
    with pytest.raises(ValueError, match="'available_kv_gib' replaces a profiled available"):
        plan(kv_cache_memory_bytes="7G", available_kv_gib=7.0)


def test_the_one_request_check_sees_the_bytes():
    # 131072 tokens need 8192 blocks (16 GiB); 7 GiB less the null block (0.29.0 on) hold 3583
    r = plan(kv_cache_memory_bytes="7G", max_model_len=131072).refusal
    assert "(16.00 GiB KV cache is needed" in r and "memory (7.00 GiB)" in r
    assert "the estimated maximum model length is 57328." in r  # 3583 x 16


def test_with_the_override_the_blocks_are_the_override():
    p = plan(kv_cache_memory_bytes="7G", num_gpu_blocks_override=1000)
    assert p.num_gpu_blocks == 1000
    # the profiled count in vLLM's line is the set memory's: 3584
    assert "Overriding num_gpu_blocks=3584 with num_gpu_blocks_override=1000" in p.log_lines


def test_speculative_decoding_needs_no_derivation():
    with pytest.raises(ValueError, match="cannot be derived"):
        plan(speculative_method="ngram", num_speculative_tokens=3)
    p = plan(kv_cache_memory_bytes="7G", speculative_method="ngram", num_speculative_tokens=3)
    assert p.available_kv_cache_bytes == 7 * GIB and p.fits


def test_a_cache_beside_the_weights_beyond_the_gpu_is_refused():
    # the L4's 22.5 GiB: 15 GiB of weights and 20 GiB of cache cannot both be resident
    p = plan(gpu="l4", kv_cache_memory_bytes="20G")
    assert not p.fits and p.refusal.startswith("CUDA out of memory (kvcalc's estimate")
    assert "kv_cache_memory_bytes 21,474,836,480 B (20.00 GiB)" in p.refusal
    assert p.log_lines[-1].startswith("torch.OutOfMemoryError: ")
    assert plan(gpu="l4", kv_cache_memory_bytes="4G").fits


@pytest.mark.parametrize(
    "version, line",
    [
        # 0.10.2 - 0.11.0: f"{GiB(free)} GiB, reserved {GiB(kv):.2f}GiB ... This does does not"
        ((0, 10, 2, 0), "Initial free memory 77.912109375 GiB, reserved 7.00GiB memory for KV "
         "Cache as specified by kv_cache_memory_bytes config and skipped memory profiling. This "
         "does does not respect the "),
        # 0.11.1 - 0.13.0: both "{:.2f} GiB"
        ((0, 11, 1, 0), "Initial free memory 77.91 GiB, reserved 7.00 GiB memory for KV Cache as "
         "specified by kv_cache_memory_bytes config and skipped memory profiling. This does not "
         "respect the "),
        # 0.14.0 on: format_gib, str(round(x, 2))
        ((0, 14, 0, 0), "Initial free memory 77.91 GiB, reserved 7.0 GiB memory for KV Cache as "
         "specified by kv_cache_memory_bytes config and skipped memory profiling. This does not "
         "respect the "),
    ],
)  # fmt: skip
def test_the_reserved_line_by_release(version, line):
    free = 77 * GIB + 467 * 2**21  # 77.912109375 GiB
    assert reserved_line(version, free, 7 * GIB).startswith(line)


def test_the_reserved_line_is_the_logs():
    # mini-swe-agent/XPU.md (module docstring): a source build between 0.20 and 0.21
    got = reserved_line((0, 21, 0, 0), int(10.18 * GIB), parse_kv_cache_memory("750M", V))
    assert got == (
        "Initial free memory 10.18 GiB, reserved 0.73 GiB memory for KV Cache as specified by "
        "kv_cache_memory_bytes config and skipped memory profiling. This does not respect the "
        "gpu_memory_utilization config. Only use kv_cache_memory_bytes config when you want "
        "manual control of KV cache memory size. If OOM'ed, check the difference of initial "
        "free memory between the current run and the previous run where kv_cache_memory_bytes "
        "is suggested and update it correspondingly."
    )


def test_grid_rows_equal_plans():
    lens, utils = [4096, 8192, 131072], [0.5, 0.9]
    g = engine_plan_grid(
        "llama-3.1-8b", "h100-sxm", "vllm", version="0.33.0", kv_cache_memory_bytes="7G",
        max_model_len=lens, gpu_memory_utilization=utils,
    )  # fmt: skip
    assert len(g) == 6
    for _, row in g.iterrows():
        p = plan(kv_cache_memory_bytes="7G", max_model_len=int(row.max_model_len),
                 gpu_memory_utilization=float(row.gpu_memory_utilization))  # fmt: skip
        assert row.num_gpu_blocks == p.num_gpu_blocks == 3584
        assert row.gpu_kv_cache_tokens == p.gpu_kv_cache_tokens
        assert row.max_concurrency == p.max_concurrency
        assert row.available_kv_cache_gib == 7.0


def test_the_least_memory_for_a_concurrency():
    # 10 requests of 8192 tokens: 10 x 512 blocks of 2 MiB = 10,240 MiB
    got = kv_cache_memory_for("llama-3.1-8b", "h100-sxm", 10, version="0.33.0", max_model_len=8192)
    assert got == 10240 * MIB
    assert plan(kv_cache_memory_bytes=got).max_concurrency == 10.0
    assert plan(kv_cache_memory_bytes=got - MIB).max_concurrency < 10.0


def _cli(capsys, *args):
    rc = main(["plan", "llama-3.1-8b", "--gpu", "h100-sxm", *args])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_cli_takes_vllms_flag_and_its_short_form(capsys):
    for flag in ("--kv-cache-memory-bytes", "--kv-cache-memory"):
        rc, out, err = _cli(
            capsys, "--engine", "vllm", "--engine-version", "0.33.0", flag, "7G", "--seq", "8192"
        )
        assert rc == 0, err
        assert "reserved 7.0 GiB memory for KV Cache" in out
        assert "57,344 tokens" in out


def test_cli_target_concurrency_answers_in_bytes(capsys):
    rc, out, err = _cli(capsys, "--engine", "vllm", "--engine-version", "0.33.0",
                        "--kv-cache-memory-bytes", "7G", "--seq", "8192",
                        "--target-concurrency", "10")  # fmt: skip
    assert rc == 0, err
    assert "kv_cache_memory_bytes  10737418240" in out


@pytest.mark.parametrize(
    "args, words",
    [
        (("--engine", "sglang", "--kv-cache-memory-bytes", "7G"),
         "'--kv-cache-memory-bytes' is a vLLM setting"),
        (("--engine", "vllm", "--kv-cache-memory-bytes", "7.5G"), "Decimals are not allowed"),
        (("--engine", "vllm", "--kv-cache-memory-bytes", "20G", "--gpu", "l4"),
         "CUDA out of memory"),
    ],
)  # fmt: skip
def test_cli_errors_are_one_line(capsys, args, words):
    rc, out, err = _cli(capsys, *args)
    assert rc == 2
    assert words in out + err and "Traceback" not in out + err


XPU_EXCERPT = """\
(EngineCore pid=2122) INFO 09-19 12:40:20 [gpu_model_runner.py:4883] Model loading took 5.79 GiB memory and 2.949057 seconds
(EngineCore pid=2122) INFO 09-19 12:40:21 [gpu_worker.py:381] Initial free memory 10.18 GiB, reserved 0.73 GiB memory for KV Cache as specified by kv_cache_memory_bytes config and skipped memory profiling. This does not respect the gpu_memory_utilization config. Only use kv_cache_memory_bytes config when you want manual control of KV cache memory size. If OOM'ed, check the difference of initial free memory between the current run and the previous run where kv_cache_memory_bytes is suggested and update it correspondingly.
(EngineCore pid=2122) INFO 09-19 12:40:21 [kv_cache_utils.py:1710] GPU KV cache size: 21,328 tokens
(EngineCore pid=2122) INFO 09-19 12:40:21 [kv_cache_utils.py:1711] Maximum concurrency for 16,384 tokens per request: 1.30x
"""  # noqa: E501  (mini-swe-agent/XPU.md, the module docstring's source)


def test_parse_log_reads_the_reserved_line():
    from calc.serving.logs import parse_log

    got = parse_log(XPU_EXCERPT)
    assert got["init_free_gib"] == 10.18 and got["reserved_kv_gib"] == 0.73
    assert got["gpu_kv_cache_tokens"] == 21328 and got["max_concurrency"] == 1.30
    # 0.10.2's words: the free memory unformatted, "X.XXGiB"; and the API server's echo
    old = parse_log(
        "Initial free memory 77.912109375 GiB, reserved 7.00GiB memory for KV Cache as "
        "specified by kv_cache_memory_bytes config and skipped memory profiling.\n"
        "non-default args: {'model_tag': 'Qwen/Qwen3-8B', 'kv_cache_memory_bytes': 5713920000}"
    )
    assert old["init_free_gib"] == 77.912109375 and old["reserved_kv_gib"] == 7.0
    assert old["kv_cache_memory_bytes"] == 5713920000


def test_calibrate_reads_the_reserved_line_and_learns_the_free_memory(tmp_path, capsys):
    # the XPU run of Qwen2.5-Coder-3B (the shapes of presets/models/qwen2.5-3b.toml)
    log = tmp_path / "xpu.log"
    log.write_text(XPU_EXCERPT)
    argv = ["calibrate", str(log), "qwen2.5-3b", "--gpu", "h100-sxm", "--engine-version", "0.21.0",
            "--kv-cache-memory-bytes", "750M", "--json"]  # fmt: skip
    assert main(argv) == 0
    import json

    cal = json.loads(capsys.readouterr().out)
    rows = {r["figure"]: r for r in cal["rows"]}
    assert rows["reserved KV cache memory, GiB (kv_cache_memory_bytes)"]["kvcalc"] == 0.73
    # 786,432,000 // (16 x 36 x 2 x 128 x 2 x 2 B) = 1,333 blocks; int(1333 / 1024 x 16384)
    assert rows["GPU KV cache size, tokens"]["kvcalc"] == 21328
    assert cal["learned"]["init_free_bytes"] == int(10.18 * GIB)
    p = engine_plan("qwen2.5-3b", "h100-sxm", "vllm", version="0.21.0", max_model_len=16384,
                    kv_cache_memory_bytes="750M", calibration=cal["learned"])  # fmt: skip
    assert p.initial_free_bytes == int(10.18 * GIB)
    assert "Initial free memory 10.18 GiB, reserved 0.73 GiB" in p.log_lines[1]


def test_deepseek_v4_takes_the_bytes():
    # benchmarks/engine_logs/vllm-nepenth-gb10-v4-flash-0731-1m-kvmem.toml (its comment writes
    # the blocks out): --kv-cache-memory 28,235,618,304 B at TP 2, 1M tokens, async scheduling
    kw = dict(version="0.27.1", tensor_parallel_size=2, max_model_len=1048576, block_size=256,
              kv_cache_dtype="fp8", max_num_batched_tokens=8192, max_num_seqs=6)  # fmt: skip
    p = engine_plan("deepseek-v4-flash", "h200", "vllm", kv_cache_memory_bytes=28235618304, **kw)
    assert p.source == "kv_cache_memory_bytes"
    assert (p.gpu_kv_cache_tokens, f"{p.max_concurrency:.2f}") == (2740813, "2.61")
    assert p.log_lines[0].startswith("Initial free memory ")
    assert ", reserved 26.3 GiB memory for KV Cache" in p.log_lines[0]
    with pytest.raises(ValueError, match="'available_kv_gib' replaces a profiled"):
        engine_plan("deepseek-v4-flash", "h200", "vllm", kv_cache_memory_bytes=2**34,
                    available_kv_gib=16.0, **kw)  # fmt: skip


def test_cli_target_concurrency_with_speculative_decoding_and_the_bytes(capsys):
    # ngram adds no drafter layers: the same 512 blocks of 2 MiB a request as without it
    rc, out, err = _cli(capsys, "--engine", "vllm", "--engine-version", "0.33.0",
                        "--kv-cache-memory-bytes", "7G", "--seq", "8192", "--target-concurrency",
                        "10", "--speculative-config", '{"method": "ngram", "num_speculative_tokens": 3}')  # fmt: skip
    assert rc == 0, err
    assert "kv_cache_memory_bytes  10737418240" in out
