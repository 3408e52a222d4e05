"""vLLM's --mamba-cache-dtype / --mamba-ssm-cache-dtype: the linear layers' state dtypes a user
sets, every expected byte written out from vLLM's source (PyPI sdists 0.10.1 - 0.33.0).

- config/cache.py: CacheConfig.mamba_cache_dtype (conv + temporal state) and
  mamba_ssm_cache_dtype (temporal state only), each a MambaDType, from 0.10.1 (absent in 0.10.0):
  Literal["auto", "float32"] to 0.12.0, + "float16" from 0.13.0, + "bfloat16" from 0.22.0.
- layers/mamba/mamba_utils.py _mamba_state_dtype: conv = get_kv_cache_torch_dtype(
  mamba_cache_dtype, model dtype) ("auto" = the model's); temporal = mamba_ssm_cache_dtype unless
  "auto", then the conv state's.
- models/config.py NemotronHForCausalLMConfig (0.13.0 on): an "auto" mamba_ssm_cache_dtype
  becomes the config.json's mamba_ssm_cache_dtype (NVIDIA-Nemotron-3-Nano-30B-A3B-BF16:
  "float32"); a given one is kept.
- models/qwen3_next.py get_mamba_state_dtype_from_config: gated_delta_net_state_dtype(model
  dtype, mamba_cache_dtype) alone up to 0.16.0 (both states in it), + mamba_ssm_cache_dtype from
  0.17.0.
- The page: the attention block is 16 x cdiv(state, 16 x one token's attention page), and the
  state page is padded to block x token (platforms/interface.py; tests/test_serving_kinds.py).

Shapes (tests/fixtures/hf/modern/*.json, each citing its Hub source):
- Nemotron 3 Nano 30B-A3B: 64 Mamba heads of 64, state 128, 8 groups, kernel 4 -> conv
  (64 x 64 + 2 x 8 x 128) x 3 = 18,432 values, SSM 64 x 64 x 128 = 524,288 values a layer; its
  attention layers 2 KV heads of 128 (bf16: 1,024 B a token).
- Qwen3-Next-80B-A3B: 16 key / 32 value heads of 128, kernel 4 -> conv (2 x 16 x 128 + 32 x 128)
  x 3 = 24,576, recurrent 32 x 128 x 128 = 524,288 values; 2 KV heads of 256 (2,048 B a token).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import calc
from calc.serving.plan import engine_plan

MODERN = Path(__file__).parent / "fixtures" / "hf" / "modern"
NANO = calc.from_hf_config(json.loads((MODERN / "nemotron-3-nano-30b-a3b.json").read_text()))
NEXT = calc.from_hf_config(json.loads((MODERN / "qwen3-next-80b-a3b.json").read_text()))

NANO_CONV, NANO_SSM, NANO_TOKEN = 18432, 524288, 1024
NEXT_CONV, NEXT_REC, NEXT_TOKEN = 24576, 524288, 2048


def cdiv(a, b):
    return -(-a // b)


def page(state: int, token: int) -> int:
    return 16 * cdiv(state, 16 * token) * token


def vllm_page(spec, version, **flags):
    plan = engine_plan(spec, "h100-sxm", "vllm", version=version, max_model_len=32768, **flags)
    return plan.page_bytes


def test_nemotron_h_flags():
    # default on 0.30.0: conv bf16, SSM the config's float32
    assert vllm_page(NANO, "0.30.0") == page(NANO_CONV * 2 + NANO_SSM * 4, NANO_TOKEN)
    # a given --mamba-ssm-cache-dtype wins over the config's
    fp16 = NANO_CONV * 2 + NANO_SSM * 2
    assert vllm_page(NANO, "0.30.0", mamba_ssm_cache_dtype="float16") == page(fp16, NANO_TOKEN)
    bf16 = vllm_page(NANO, "0.30.0", mamba_ssm_cache_dtype="bfloat16")
    assert bf16 == page(fp16, NANO_TOKEN)
    # --mamba-cache-dtype float32: the conv state too; the SSM state stays the config's
    both = NANO_CONV * 4 + NANO_SSM * 4
    assert vllm_page(NANO, "0.30.0", mamba_cache_dtype="float32") == page(both, NANO_TOKEN)
    assert page(both, NANO_TOKEN) != page(NANO_CONV * 2 + NANO_SSM * 4, NANO_TOKEN)


def test_gated_delta_net_reads_the_ssm_flag_from_0_17():
    bf16 = (NEXT_CONV + NEXT_REC) * 2
    fp32_rec = NEXT_CONV * 2 + NEXT_REC * 4
    assert vllm_page(NEXT, "0.16.0") == page(bf16, NEXT_TOKEN)
    # 0.16.0: qwen3_next.py passes mamba_cache_dtype alone, so the flag changes nothing
    assert vllm_page(NEXT, "0.16.0", mamba_ssm_cache_dtype="float32") == page(bf16, NEXT_TOKEN)
    assert vllm_page(NEXT, "0.17.0", mamba_ssm_cache_dtype="float32") == page(fp32_rec, NEXT_TOKEN)
    # --mamba-cache-dtype float32 puts both states in float32 in either release
    for version in ("0.16.0", "0.17.0"):
        got = vllm_page(NEXT, version, mamba_cache_dtype="float32")
        assert got == page((NEXT_CONV + NEXT_REC) * 4, NEXT_TOKEN)


@pytest.mark.parametrize(
    ("version", "flag", "value", "message"),
    [
        ("0.10.0", "mamba_cache_dtype", "float32", r"from 0\.10\.1: got 'float32' for 0\.10\.0"),
        ("0.12.0", "mamba_ssm_cache_dtype", "float16", r"one of auto, float32 in vLLM 0\.12\.0"),
        ("0.21.0", "mamba_ssm_cache_dtype", "bfloat16", r"auto, float32, float16 in vLLM 0\.21"),
        ("0.33.0", "mamba_cache_dtype", "int8", r"float16, bfloat16 in vLLM 0\.33\.0: got 'int8'"),
    ],
)
def test_choices_by_release(version, flag, value, message):
    with pytest.raises(ValueError, match=rf"'{flag}' .*{message}"):
        calc.serving.engine_config("vllm", version=version, **{flag: value})


def test_choices_accepted_from_their_release():
    for version, value in (("0.10.1", "float32"), ("0.13.0", "float16"), ("0.22.0", "bfloat16")):
        cfg = calc.serving.engine_config("vllm", version=version, mamba_ssm_cache_dtype=value)
        assert cfg.state_args[:2] == ("auto", value)


def kvcalc(*args):
    cmd = [sys.executable, "-m", "calc", "plan", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def test_cli_flags():
    run = kvcalc("nemotron-3-nano-30b-a3b", "--gpu", "h100-sxm", "--engine", "vllm", "--json",
                 "--seq", "32768", "--engine-version", "0.30.0", "--mamba-ssm-cache-dtype",
                 "float16")  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["page_bytes"] == page(NANO_CONV * 2 + NANO_SSM * 2, NANO_TOKEN)
    run = kvcalc("qwen3.5-27b", "--gpu", "h100-sxm", "--engine", "sglang",
                 "--mamba-cache-dtype", "float32")  # fmt: skip
    assert run.returncode == 2
    assert run.stderr.strip().endswith(
        "'--mamba-cache-dtype' is a vLLM setting: SGLang takes --mamba-ssm-dtype"
    )
    run = kvcalc("qwen3.5-27b", "--gpu", "h100-sxm", "--engine", "vllm", "--mamba-ssm-dtype",
                 "float16")  # fmt: skip
    assert run.returncode == 2 and "is an SGLang setting" in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1


# --- --[no-]enable-prefix-caching --------------------------------------------------------------
# vLLM's MambaModelConfig.verify_and_update_config (model_executor/models/config.py), by release:
# 0.10.2 - 0.11.0 turns prefix caching off for every hybrid model; 0.12.0 - 0.15.x keeps it only
# for SupportsMambaPrefixCaching models (nemotron_h.py, granitemoehybrid.py declare it;
# qwen3_next.py does not) and sizes MambaSpec as cdiv(max_model_len, mamba_block_size) pages;
# from 0.16.0 mamba_cache_mode "all" (those models, to 0.27.x) or "align" (2 pages);
# off: "none", 1 page, mamba_block_size = max_model_len. The default: off before 0.26.0
# (is_prefix_caching_supported: "Hybrid models do not support prefix caching"), on from 0.26.0.
# "all": platforms/interface.py (HybridAttentionMambaModelConfig before 0.26) rounds the state's
# attention tokens up to lcm(mamba chunk size, 16): Nemotron 3 Nano's config chunk_size 128 and
# state 2,134,016 B (conv bf16 + SSM float32) over 1,024 B a token -> 128 x cdiv(2,084, 128) =
# 2,176 tokens; otherwise 16 x cdiv(2,084, 16) = 2,096.
# Nemotron 3 Nano at tp 1: 23 mamba + 6 attention layers -> 4 mamba groups + 1 attention group.

AVAIL = 40 * 2**30
L = 65536
NANO_STATE = NANO_CONV * 2 + NANO_SSM * 4  # the config's float32 SSM state
ALL_BLOCK, BLOCK = 128 * cdiv(NANO_STATE // 1024, 128), 16 * cdiv(NANO_STATE // 1024, 16)


def nano(version, **kw):
    return engine_plan(NANO, "h100-sxm", "vllm", version=version, max_model_len=L,
                       available_kv_gib=40.0, **kw)  # fmt: skip


def concurrency(block, state_pages):
    blocks = AVAIL // (block * 1024) // 6
    return blocks / (4 * state_pages + cdiv(L, block))


@pytest.mark.parametrize(
    ("version", "given", "block", "pages"),
    [
        ("0.20.0", None, BLOCK, 1),  # off by default before 0.26.0
        ("0.20.0", True, ALL_BLOCK, cdiv(L, ALL_BLOCK)),  # "all"
        ("0.13.0", True, ALL_BLOCK, cdiv(L, ALL_BLOCK)),  # before mamba_cache_mode: the same
        ("0.27.0", None, ALL_BLOCK, cdiv(L, ALL_BLOCK)),  # on by default: "all"
        ("0.27.0", False, BLOCK, 1),
        ("0.30.0", None, BLOCK, 2),  # "align"
        ("0.30.0", False, BLOCK, 1),
        ("0.33.0", None, BLOCK, 3),  # + MambaMixer2's checkpoint block
        ("0.33.0", False, BLOCK, 1),
    ],
)
def test_nemotron_prefix_caching(version, given, block, pages):
    assert (ALL_BLOCK, BLOCK) == (2176, 2096)
    p = nano(version, enable_prefix_caching=given)
    assert p.page_bytes == block * 1024
    assert p.max_concurrency == pytest.approx(concurrency(block, pages))


def test_prefix_caching_turned_off_where_vllm_turns_it_off():
    # Qwen3-Next before 0.16.0: no SupportsMambaPrefixCaching, so turned off: 1 page, and the
    # GPU KV cache line's block is the smaller of the attention block and max_model_len
    short = 128
    for version in ("0.12.0", "0.14.1"):
        p = engine_plan(NEXT, "h100-sxm", "vllm", version=version, max_model_len=short,
                        available_kv_gib=40.0, enable_prefix_caching=True)  # fmt: skip
        off = engine_plan(NEXT, "h100-sxm", "vllm", version=version, max_model_len=short,
                          available_kv_gib=40.0)  # fmt: skip
        assert p.max_concurrency == off.max_concurrency
        assert p.gpu_kv_cache_tokens == p.num_gpu_blocks // p.kv_groups * short
    # the same model from 0.16.0: "align", 2 pages, the attention block in the token line
    p = engine_plan(NEXT, "h100-sxm", "vllm", version="0.16.0", max_model_len=short,
                    available_kv_gib=40.0, enable_prefix_caching=True)  # fmt: skip
    block = 16 * cdiv((NEXT_CONV + NEXT_REC) * 2, 16 * NEXT_TOKEN)
    assert p.gpu_kv_cache_tokens == p.num_gpu_blocks // p.kv_groups * block
    # a model without linear layers: the flag changes no count
    a = engine_plan("llama-3-8b", "h100-sxm", "vllm", enable_prefix_caching=False)
    assert a == engine_plan("llama-3-8b", "h100-sxm", "vllm", enable_prefix_caching=True)


def test_cli_prefix_caching():
    base = ("nemotron-3-nano-30b-a3b", "--gpu", "h100-sxm", "--engine", "vllm", "--json", "--seq",
            str(L), "--available-kv-gib", "40", "--engine-version", "0.30.0")  # fmt: skip
    on, off = kvcalc(*base), kvcalc(*base, "--no-enable-prefix-caching")
    assert on.returncode == off.returncode == 0, on.stderr + off.stderr
    assert json.loads(on.stdout)["max_concurrency"] == pytest.approx(concurrency(BLOCK, 2))
    assert json.loads(off.stdout)["max_concurrency"] == pytest.approx(concurrency(BLOCK, 1))
    run = kvcalc("nemotron-3-nano-30b-a3b", "--gpu", "h100-sxm", "--engine", "sglang",
                 "--enable-prefix-caching")  # fmt: skip
    assert run.returncode == 2
    assert "SGLang takes --disable-radix-cache" in run.stderr


# --mamba-cache-mode (vllm/config/cache.py CacheConfig.mamba_cache_mode, absent in 0.14.1;
# MambaCacheMode all / align / none in 0.16.0 - 0.31.0, align / none in 0.32.0; 0.33.0's
# engine/arg_utils.py: "deprecated ... It has no effect"). models/config.py MambaModelConfig,
# prefix caching on: "none" -> the default ("all" for SupportsMambaPrefixCaching models before
# 0.28.0, else "align"); "all" without SupportsMambaPrefixCaching -> "align"; prefix caching off
# -> "none" whatever was given.
@pytest.mark.parametrize(
    ("version", "given", "mode", "block", "pages"),
    [
        ("0.20.0", True, "align", BLOCK, 2),  # "align" instead of the default "all"
        ("0.27.0", None, "align", BLOCK, 2),
        ("0.27.0", None, "none", ALL_BLOCK, cdiv(L, ALL_BLOCK)),  # "none" takes the default
        ("0.30.0", None, "all", ALL_BLOCK, cdiv(L, ALL_BLOCK)),  # "all" kept: NemotronH supports it
        ("0.30.0", False, "all", BLOCK, 1),  # prefix caching off: "none"
        ("0.32.0", None, "align", BLOCK, 3),  # align + MambaMixer2's checkpoint block
        ("0.33.0", None, "none", BLOCK, 3),  # no effect in 0.33.0: align, as by default
    ],
)
def test_nemotron_mamba_cache_mode(version, given, mode, block, pages):
    p = nano(version, enable_prefix_caching=given, mamba_cache_mode=mode)
    assert p.page_bytes == block * 1024
    assert p.max_concurrency == pytest.approx(concurrency(block, pages))


def test_gated_delta_net_all_mode_falls_back_to_align():
    # Qwen3-Next declares no SupportsMambaPrefixCaching: "all" -> "align", the default plan
    kw = {"max_model_len": 4096, "available_kv_gib": 40.0, "version": "0.30.0"}
    default = engine_plan(NEXT, "h100-sxm", "vllm", **kw)
    given = engine_plan(NEXT, "h100-sxm", "vllm", mamba_cache_mode="all", **kw)
    assert given == default
    # 36 Gated DeltaNet + 12 attention layers: groups of 12 (3 state + 1 attention), a block id
    # a page in each of a group's 12 layers; a request: 2 state pages a state group ("align")
    block = 16 * cdiv((NEXT_CONV + NEXT_REC) * 2, 16 * NEXT_TOKEN)
    assert given.max_concurrency == pytest.approx(
        AVAIL // (block * NEXT_TOKEN) // 12 / (3 * 2 + cdiv(4096, block))
    )


@pytest.mark.parametrize(
    ("version", "mode", "message"),
    [
        ("0.14.1", "align", "'mamba_cache_mode' is a vLLM setting from 0.16.0"),
        ("0.32.0", "all", "'mamba_cache_mode' must be one of align, none in vLLM 0.32.0"),
        ("0.30.0", "some", "must be one of all, align, none in vLLM 0.30.0"),
    ],
)
def test_mamba_cache_mode_refused(version, mode, message):
    with pytest.raises(ValueError, match=message):
        nano(version, mamba_cache_mode=mode)


def test_all_mode_runs_model_runner_v1_in_0_30_and_0_31():
    # vllm/config/vllm.py _get_v2_model_runner_unsupported_features: "mamba cache mode 'all'"
    # from 0.30.0 (absent in 0.29.0); V2 runs every CUDA model from 0.29.0 otherwise
    from calc.serving.engine import VllmConfig
    from calc.serving.vllm_v2 import vllm_uses_v2_runner

    def v2(version, **kw):
        cfg = VllmConfig(version=version, max_model_len=L, max_num_batched_tokens=8192,
                         max_num_seqs=256, **kw)  # fmt: skip
        return vllm_uses_v2_runner(NANO, cfg)

    assert v2("0.29.0", mamba_cache_mode="all")
    assert not v2("0.30.0", mamba_cache_mode="all")
    assert not v2("0.31.0", mamba_cache_mode="all")
    assert v2("0.31.0", mamba_cache_mode="all", enable_prefix_caching=False)  # then "none"
    assert v2("0.31.0", mamba_cache_mode="align") and v2("0.31.0")


def test_dense_mamba2_hybrid_runs_v1_in_0_25_to_0_28():
    # 0.25.0 - 0.28.x: V2 for every non-MoE model except hybrid ones (is_hybrid: mamba layers);
    # a dense Nemotron-H (the Nano fixture with its MoE blocks "E" made MLP blocks "-")
    from calc.serving.engine import VllmConfig
    from calc.serving.vllm_v2 import vllm_uses_v2_runner

    cfg = json.loads((MODERN / "nemotron-3-nano-30b-a3b.json").read_text())
    cfg["hybrid_override_pattern"] = cfg["hybrid_override_pattern"].replace("E", "-")
    dense = calc.from_hf_config(cfg)
    assert not dense.is_moe
    for version, expected in (("0.25.0", False), ("0.28.0", False), ("0.29.0", True)):
        c = VllmConfig(version=version, max_model_len=L, max_num_batched_tokens=8192,
                       max_num_seqs=256)  # fmt: skip
        assert vllm_uses_v2_runner(dense, c) is expected, version


def test_cli_mamba_cache_mode():
    base = ("nemotron-3-nano-30b-a3b", "--gpu", "h100-sxm", "--engine", "vllm", "--json", "--seq",
            str(L), "--available-kv-gib", "40", "--engine-version", "0.30.0")  # fmt: skip
    run = kvcalc(*base, "--mamba-cache-mode", "all")
    assert run.returncode == 0, run.stderr
    expected = concurrency(ALL_BLOCK, cdiv(L, ALL_BLOCK))
    assert json.loads(run.stdout)["max_concurrency"] == pytest.approx(expected)
    old = kvcalc(*base[:-1], "0.32.0", "--mamba-cache-mode", "all")
    assert old.returncode == 2 and "must be one of align, none" in old.stderr
    assert "Traceback" not in old.stderr and len(old.stderr.strip().splitlines()) == 1
    run = kvcalc("nemotron-3-nano-30b-a3b", "--gpu", "h100-sxm", "--engine", "sglang",
                 "--mamba-cache-mode", "align")  # fmt: skip
    assert run.returncode == 2 and "SGLang takes --disable-radix-cache" in run.stderr


def test_hybrid_config_lines_of_a_published_log():
    # guardkit/guardkit docs/reviews/agentic-factory/qwen-run-2.md (vLLM 0.18.1rc1, GB10):
    # "Setting attention block size to 1056 tokens ..." and "Padding mamba page size by 0.76%
    # ..."; the state 49,152 + 2,097,152 B, a bf16 attention token 2 x 256 x 2 x 2 B
    state, token = 2 * 16 * 128 * 3 * 2 + 32 * 128 * 3 * 2 + 32 * 128 * 128 * 4, 2 * 256 * 2 * 2
    block = 16 * -(-state // (16 * token))
    assert (state, block) == (2146304, 1056)
    p = engine_plan("qwen3.5-35b-a3b", "h100-sxm", "vllm", version="0.18.0",
                    available_kv_gib=55.72, max_model_len=262144, enable_prefix_caching=True)  # fmt: skip
    assert p.log_lines[:2] == [
        "Setting attention block size to 1056 tokens to ensure that attention page size is >= "
        "mamba page size.",
        f"Padding mamba page size by {100 * (block * token - state) / state:.2f}% to ensure "
        "that mamba page size and attention page size are exactly equal.",
    ]
    assert "0.76%" in p.log_lines[1]
    # no linear layer, no such line
    p = engine_plan("qwen3-8b", "h100-sxm", "vllm", version="0.18.0", available_kv_gib=10)
    assert p.log_lines[0].startswith("Model loading took")
