"""The Gated DeltaNet recurrent state's dtype: config.json `mamba_ssm_dtype` (Qwen3.5; Qwen3-Next's
config carries none), as each engine reads it, every expected byte written out from the source.

Qwen/Qwen3.5-27B (tests/fixtures/checkpoints/hub-configs/qwen3.5-27b.json; its source in
hub_dtype_counts.json): text_config "mamba_ssm_dtype": "float32"; 64 layers, full_attention_interval
4 -> 48 Gated DeltaNet layers (16 key heads, 48 value heads, dk = dv = 128, conv kernel 4) and 16
full-attention layers (4 KV heads of 256), bf16.

vLLM (PyPI sdists):
- models/registry.py: Qwen3_5ForConditionalGeneration / Qwen3_5MoeForConditionalGeneration from
  0.17.0 (absent in 0.16.0); Qwen3_5ForCausalLM / Qwen3_5MoeForCausalLM from 0.27.0 (absent in
  0.26.0);
- models/config.py Qwen3_5ForConditionalGenerationConfig.verify_and_update_config (0.17.0 on;
  Qwen3_5ForCausalLMConfig calls it, 0.27.0 on): an "auto" cache_config.mamba_ssm_cache_dtype
  becomes hf_text_config.mamba_ssm_dtype;
- layers/mamba/mamba_utils.py gated_delta_net_state_dtype -> _mamba_state_dtype: conv state in
  mamba_cache_dtype "auto" = the model dtype, temporal state in mamba_ssm_cache_dtype ("auto" =
  the conv state's); gated_delta_net_state_shape: conv (conv_dim / tp, kernel - 1), conv_dim =
  2 x key heads x dk + value heads x dv; temporal (value heads / tp, dk, dv);
- Qwen3-Next (qwen3_next.py) has no such config class: mamba_ssm_cache_dtype stays "auto";
- platforms/interface.py: attention block = 16 x cdiv(state page, 16 x one token's attention
  page) (0.33.0 on sm90: the FlashInfer GDN prefill's 64-token alignment,
  tests/test_serving_kinds.py).
SGLang (PyPI wheels): configs/mamba_utils.py mamba2_state_dtype: 0.5.7 - 0.5.8 read only
SGLANG_MAMBA_SSM_DTYPE, which server_args.py always sets from --mamba-ssm-dtype (default
"float32", choices float32 | bfloat16); from 0.5.9 the default is None and mamba2_state_dtype(config)
takes the flag's, else config.mamba_ssm_dtype (text_config's for a VL config), else float32, with
choices float32 | bfloat16 | float16; configs/qwen3_next.py mamba2_cache_params passes its config,
configs/qwen3_5.py Qwen3_5TextConfig subclasses Qwen3NextConfig; qwen3_5.py first in the 0.5.9
wheel. Per request: (conv_dim / tp x 3 x 2 + value heads / tp x dk x dv x ssm bytes) x linear layers.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

import calc
from calc.serving.plan import engine_plan

FIX = Path(__file__).parent / "fixtures"
QWEN35 = json.loads((FIX / "checkpoints/hub-configs/qwen3.5-27b.json").read_text())
NEXT = json.loads((FIX / "hf/modern/qwen3-next-80b-a3b.json").read_text())
GIB = 2**30

CONV = (2 * 16 * 128 + 48 * 128) * 3  # 30720 values a layer
RECURRENT = 48 * 128 * 128  # 786432 values a layer
TOKEN = 4 * 256 * 2 * 2  # one full layer's K and V of one token, bf16: 4096 B


def cdiv(a, b):
    return -(-a // b)


def spec_with(dtype: str | None = "float32", vision: bool = True):
    data = copy.deepcopy(QWEN35)
    if dtype is None:
        del data["text_config"]["mamba_ssm_dtype"]
    else:
        data["text_config"]["mamba_ssm_dtype"] = dtype
    return calc.from_hf_config(data if vision else data["text_config"])


def vllm_page(spec, version):
    return engine_plan(spec, "h100-sxm", "vllm", version=version, max_model_len=32768).page_bytes


def test_import_reads_and_validates_mamba_ssm_dtype():
    assert spec_with().mamba_ssm_cache_dtype == "fp32"
    assert spec_with("bfloat16").mamba_ssm_cache_dtype == "bf16"
    assert spec_with(None).mamba_ssm_cache_dtype is None
    assert spec_with(vision=False).mamba_ssm_cache_dtype == "fp32"  # a text-only config
    with pytest.raises(ValueError, match="'mamba_ssm_dtype' must be one of float32, bfloat16, "):
        spec_with("int8")
    # Qwen3-Next: SGLang reads it too, so it is imported (vLLM ignores it, below)
    nxt = calc.from_hf_config({**NEXT, "mamba_ssm_dtype": "bfloat16"})
    assert nxt.mamba_ssm_cache_dtype == "bf16"
    assert calc.from_hf_config(NEXT).mamba_ssm_cache_dtype is None


def test_vllm_keeps_qwen35_recurrent_state_in_the_config_dtype():
    fp32 = CONV * 2 + RECURRENT * 4
    assert fp32 == 3207168
    for version in ("0.17.0", "0.26.0", "0.32.0"):
        assert vllm_page(spec_with(), version) == 16 * cdiv(fp32, 16 * TOKEN) * TOKEN  # 784
    assert vllm_page(spec_with(), "0.33.0") == 64 * cdiv(fp32, 64 * TOKEN) * TOKEN  # 832
    bf16 = CONV * 2 + RECURRENT * 2  # "bfloat16" in the config
    assert vllm_page(spec_with("bfloat16"), "0.17.0") == 16 * cdiv(bf16, 16 * TOKEN) * TOKEN
    assert vllm_page(spec_with(None), "0.17.0") == 16 * cdiv(bf16, 16 * TOKEN) * TOKEN  # "auto"
    # the text-only architectures from 0.27.0 (Qwen3_5ForCausalLMConfig), the same dtype rule
    assert vllm_page(spec_with(vision=False), "0.27.0") == 16 * cdiv(fp32, 16 * TOKEN) * TOKEN
    with pytest.raises(ValueError, match=r"at least 0\.27\.0 for Qwen3\.5 .*Qwen3_5ForCausalLM"):
        vllm_page(spec_with(vision=False), "0.26.0")
    with pytest.raises(
        ValueError, match=r"at least 0\.17\.0 for Qwen3\.5 .*ConditionalGen.*got 0\.16\.0$"
    ):
        vllm_page(spec_with(), "0.16.0")


def test_vllm_ignores_mamba_ssm_dtype_for_qwen3_next():
    # Qwen3-Next 80B-A3B: 36 linear layers, 16 key / 32 value heads of 128; 2 KV heads of 256
    with_field = calc.from_hf_config({**NEXT, "mamba_ssm_dtype": "float32"})
    state = ((2 * 16 * 128 + 32 * 128) * 3 + 32 * 128 * 128) * 2  # both in bf16
    token = 2 * 256 * 2 * 2
    for version in ("0.17.0", "0.33.0"):
        align = 64 if version == "0.33.0" else 16
        assert vllm_page(with_field, version) == align * cdiv(state, align * token) * token


def sg(spec, version, **kw):
    return engine_plan(
        spec, "h100-sxm", "sglang", version=version, available_kv_gib=40.0,
        tensor_parallel_size=1, max_mamba_cache_size=100, max_model_len=32768, **kw,
    )  # fmt: skip


def test_sglang_reads_the_config_dtype_from_0_5_9():
    rest, cell = 40 * GIB, 16 * TOKEN  # the token pool's cell: the 16 full layers
    fp32 = (CONV * 2 + RECURRENT * 4) * 48  # one request's state over the 48 linear layers
    bf16 = (CONV * 2 + RECURRENT * 2) * 48
    fp16 = bf16
    assert (fp32, bf16) == (153944064, 78446592)
    # 0.5.9 - 0.5.16: the given 100 states; 0.5.17 on: 101 (the padding slot)
    assert sg(spec_with(), "0.5.9").gpu_kv_cache_tokens == (rest - 100 * fp32) // cell
    assert sg(spec_with("bfloat16"), "0.5.9").gpu_kv_cache_tokens == (rest - 100 * bf16) // cell
    assert sg(spec_with("float16"), "0.5.23").gpu_kv_cache_tokens == (rest - 101 * fp16) // cell
    assert sg(spec_with(None), "0.5.23").gpu_kv_cache_tokens == (rest - 101 * fp32) // cell
    # the flag wins over the config
    p = sg(spec_with("bfloat16"), "0.5.23", mamba_ssm_dtype="float32")
    assert p.gpu_kv_cache_tokens == (rest - 101 * fp32) // cell
    # Qwen3.5 is not in the 0.5.8 wheel
    with pytest.raises(ValueError, match=r"'version' must be at least 0\.5\.9 for Qwen3\.5"):
        sg(spec_with(), "0.5.8")


def test_sglang_qwen3_next_config_dtype_by_release():
    # Qwen3-Next 80B-A3B at tp 4 (36 linear layers): temporal state 32 / 4 value heads x 128 x 128
    spec = calc.from_hf_config({**NEXT, "mamba_ssm_dtype": "bfloat16"})

    def state(version, **kw):
        p = engine_plan(
            spec, "h100-sxm", "sglang", version=version, available_kv_gib=40.0,
            tensor_parallel_size=4, max_mamba_cache_size=100, **kw,
        )  # fmt: skip
        return next(x for x in p.log_lines if x.startswith("Mamba Cache is allocated"))

    # 101 slots a layer x 36 layers; ssm_state size in GiB to two decimals
    rows = 101 * 36
    assert f"ssm_state size: {rows * 8 * 128 * 128 * 4 / GIB:.2f}GB" in state("0.5.8")
    assert f"ssm_state size: {rows * 8 * 128 * 128 * 2 / GIB:.2f}GB" in state("0.5.9")
    # float16 is a --mamba-ssm-dtype choice from 0.5.9
    with pytest.raises(ValueError, match="'mamba_ssm_dtype' float16 is a --mamba-ssm-dtype"):
        state("0.5.8", mamba_ssm_dtype="float16")
