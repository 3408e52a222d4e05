"""SGLang's settings for DeepSeek DSA models (DeepSeek-V3.2, GLM-5) by release, against its
source written out here.

Sources: sglang's git history (kvcache-ai/sglang_awq fork): #11061 efbc687 (first in v0.5.3rc2)
python/sglang/srt/server_args.py _handle_model_specific_adjustments, `if is_deepseek_nsa(hf_config)`:
    self.enable_dp_attention = True; self.dp_size = self.tp_size
    self.page_size = 64; logger.warning("Setting page size to 64 for DeepSeek NSA.")
    major, _ = torch.cuda.get_device_capability()
    if major >= 10: self.kv_cache_dtype = "fp8_e4m3"
#11655 81a632a (first in v0.5.4.post2):
    if self.kv_cache_dtype == "auto":
        self.kv_cache_dtype = "fp8_e4m3" if major >= 10 else "bfloat16"
    assert self.kv_cache_dtype in ["bfloat16", "fp8_e4m3"], "DeepSeek NSA only supports ..."
#13646 decb489 (first in v0.5.6) drops `self.dp_size = self.tp_size`; the PyPI wheel 0.5.7 still
sets enable_dp_attention, 0.5.8 no longer, and says "Setting page size to 64 for DeepSeek DSA.";
the 0.5.9 wheel adds GlmMoeDsaForCausalLM to the DeepSeek branch. 0.5.23
(arg_groups/model_overrides/deepseek_v2.py): page_size = 64 * get_dsa_index_kpool(hf_config)
(getattr(config, "index_kpool", 1)); overrides.py _dsa_kv_cache_dtype_default as #11655.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from calc.hf import from_hf_config
from calc.presets import load_preset
from calc.serving.plan import engine_plan, prepare

GIB = 2**30
CONFIG = Path(__file__).parent / "fixtures" / "deepseek_v32" / "DeepSeek-V3.2-Exp.config.json"


@pytest.fixture(scope="module")
def v32():
    return from_hf_config(CONFIG, name="deepseek-v3.2-exp")


def cfg(spec, gpu, version, **kw):
    kw.setdefault("tensor_parallel_size", 8)
    return prepare(spec, gpu, "sglang", version=version, mem_fraction_static=0.8, **kw)[2]


@pytest.mark.parametrize("given", [None, 1, 16])
def test_page_size_set_to_64_whatever_was_given(v32, given):
    c = cfg(v32, "h200", "0.5.23", page_size=given)
    assert c.page_size == 64
    p = engine_plan(v32, "h200", "sglang", version="0.5.23", tensor_parallel_size=8,
                    page_size=given, available_kv_gib=40)  # fmt: skip
    assert p.log_lines[0] == "Setting page size to 64 for DeepSeek DSA."
    # H200 (sm90), "auto" -> bfloat16: (512 + 64) x 2 latent + 132 indexer bytes, 61 layers
    assert p.gpu_kv_cache_tokens == 40 * GIB // ((1152 + 132) * 61) // 64 * 64


def test_message_word_by_release(v32):
    p = engine_plan(v32, "h200", "sglang", version="0.5.7", tensor_parallel_size=8,
                    available_kv_gib=40)  # fmt: skip
    assert p.log_lines[0] == "Setting page size to 64 for DeepSeek NSA."


@pytest.mark.parametrize(
    "version, gpu, given, kv",
    [
        ("0.5.3", "h200", "auto", "auto"),  # #11061: only sm >= 10 is changed
        ("0.5.3", "b200", "bf16", "fp8_e4m3"),  # ... whatever was given
        ("0.5.4.post2", "b200", "bf16", "bf16"),  # #11655: only "auto"
        ("0.5.4.post2", "b200", "auto", "fp8_e4m3"),
        ("0.5.23", "h200", "auto", "bf16"),
    ],
)
def test_kv_cache_dtype(v32, version, gpu, given, kv):
    assert cfg(v32, gpu, version, kv_cache_dtype=given).kv_cache_dtype == kv


def test_dp_attention_by_release(v32):
    c = cfg(v32, "h200", "0.5.5")  # #11061: DP attention with dp_size = tp_size
    assert (c.enable_dp_attention, c.data_parallel_size) == (True, 8)
    c = cfg(v32, "h200", "0.5.7")  # #13646 (0.5.6): dp_size as given (1: TP attention)
    assert c.data_parallel_size == 1
    c = cfg(v32, "h200", "0.5.6", data_parallel_size=2, enable_dp_attention=True)
    assert c.data_parallel_size == 2


def test_refusals(v32):
    with pytest.raises(ValueError, match="DeepSeek DSA only supports bf16/bfloat16 or fp8_e4m3"):
        cfg(v32, "h200", "0.5.23", kv_cache_dtype="fp8_e5m2")
    with pytest.raises(ValueError, match="'version' must be at least 0.5.9 for GLM-5"):
        cfg(load_preset("glm-5"), "h200", "0.5.8")
    with pytest.raises(ValueError, match="'version' must be at least 0.5.3rc2 for DeepSeek DSA"):
        cfg(v32, "h200", "0.5.2")


def test_glm5_on_b200_stores_fp8(v32):
    # GLM-5 (78 layers) on sm100: "auto" -> fp8_e4m3: 656 + 132 bytes a token and layer
    p = engine_plan(load_preset("glm-5"), "b200", "sglang", version="0.5.23",
                    tensor_parallel_size=8, available_kv_gib=40)  # fmt: skip
    assert p.gpu_kv_cache_tokens == 40 * GIB // ((656 + 132) * 78) // 64 * 64
