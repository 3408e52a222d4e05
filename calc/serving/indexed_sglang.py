"""SGLang's settings for DeepSeek DSA models (DeepSeek-V3.2, GLM-5), as ServerArgs overrides them.

Read in sglang's history (the kvcache-ai/sglang_awq fork's git, up to v0.5.6.post2; "first in"
is the oldest SGLang version bump that has the commit as an ancestor), the PyPI wheels 0.5.7 -
0.5.23 (server_args.py; 0.5.15 on it calls arg_groups/overrides.py) and 0.5.23's full tree
(sglang/srt/arg_groups/model_overrides/deepseek_v2.py, configs/model_config.py):
- which models: is_deepseek_nsa / is_deepseek_dsa (index_topk set) inside the DeepSeek branch of
  _handle_model_specific_adjustments; a deepseek_v32 config is loaded as DeepseekV3ForCausalLM
  (utils/hf_transformers_utils.py _load_deepseek_v32_model). GlmMoeDsaForCausalLM joins the
  branch in 0.5.9 (absent from the 0.5.8 wheel's list): before it kvcalc refuses GLM-5.
- page size (CUDA; NPUs and ROCm have their own): sglang #11061 (efbc687, first in v0.5.3rc2)
  sets page_size = 64 whatever was given, "Setting page size to 64 for DeepSeek NSA." (the 0.5.7
  wheel; "... DeepSeek DSA." from 0.5.8); 0.5.23 sets 64 x get_dsa_index_kpool(hf_config)
  (config.json "index_kpool", default 1; the 0.5.22 wheel already reads it in
  pool_configurator.py). kvcalc's ModelSpec has no index_kpool: 64.
- DP attention: #11061 set enable_dp_attention and dp_size = tp_size ("DP attention is enabled
  for DeepSeek NSA."); #13646 (decb489, first in v0.5.6) keeps dp_size as given, still turning
  DP attention on (the 0.5.7 wheel); the 0.5.8 wheel no longer turns it on.
- KV cache dtype: #11061 set fp8_e4m3 on sm >= 10 whatever was given ("Setting KV cache dtype to
  fp8."); #11655 (81a632a, first in v0.5.4.post2): "auto" becomes fp8_e4m3 on sm >= 10, else
  bfloat16 ("Setting KV cache dtype to {dtype} for DeepSeek NSA."), and asserts "DeepSeek NSA
  only supports bf16/bfloat16 or fp8_e4m3 kv_cache_dtype" (DSA from 0.5.8). 0.5.23 keeps it
  (overrides.py _dsa_kv_cache_dtype_default; bfloat16 for learnable attention sinks, which
  V3.2 and GLM-5 do not have).
"""

from __future__ import annotations

from calc.serving.hardware import cuda_capability

SGLANG_DSA_FROM = (0, 5, 3, -98)  # #11061: v0.5.3rc2
SGLANG_GLM_DSA_FROM = (0, 5, 9, 0)  # GlmMoeDsaForCausalLM in the DeepSeek branch
SGLANG_DSA_DP_KEPT_FROM = (0, 5, 6, 0)  # #13646: dp_size as given
SGLANG_DSA_AUTO_FROM = (0, 5, 4, 2)  # #11655: only "auto" is replaced
SGLANG_DSA_WORD_FROM = (0, 5, 8, 0)  # "DeepSeek DSA" in the messages (0.5.7: "NSA")
SGLANG_DSA_PAGE = 64  # x index_kpool (1) in 0.5.23


def sglang_dsa_settings(sv, kw: dict, gpu_name: str, gpu_vendor: str, glm: bool) -> dict:
    """The settings `kw` (sglang_settings' dict) with what ServerArgs sets for a DSA model in
    release `sv` on `gpu_name`; `glm`: GlmMoeDsaForCausalLM (GLM-5). Without a `gpu_name` (a
    bare engine_config call; plans always pass the preset) the KV dtype, which depends on the
    GPU's capability, is left as given."""
    v = ".".join(map(str, sv))
    if sv < SGLANG_DSA_FROM:
        raise ValueError(f"'version' must be at least 0.5.3rc2 for DeepSeek DSA (#11061): got {v}")
    if glm and sv < SGLANG_GLM_DSA_FROM:
        raise ValueError(
            f"'version' must be at least 0.5.9 for GLM-5 (GlmMoeDsaForCausalLM joins sglang's "
            f"DeepSeek DSA settings there): got {v}"
        )
    cc = cuda_capability(gpu_name) if gpu_name else None
    if gpu_vendor.upper() != "NVIDIA" or (cc is None and gpu_name):
        raise ValueError(
            f"'gpu' must be an NVIDIA preset of known capability for sglang's DeepSeek DSA "
            f"settings (ROCm's page size depends on aiter's paged-MQA kernel, which kvcalc "
            f"cannot know): got {gpu_name!r}"
        )
    out = dict(kw, page_size=SGLANG_DSA_PAGE)
    tp = out.get("tensor_parallel_size", 1)
    if sv < SGLANG_DSA_DP_KEPT_FROM and tp > 1:  # DP attention over every TP rank
        out.update(enable_dp_attention=True, data_parallel_size=tp)
    # [0.5.6, 0.5.8): enable_dp_attention on with dp_size as given: at dp_size 1 the attention
    # stays TP-sharded (attn_tp_size = tp // dp), which kvcalc's settings say by dp 1 alone
    kv = out.get("kv_cache_dtype", "auto")
    if cc is None:
        return out
    if sv < SGLANG_DSA_AUTO_FROM:
        if cc[0] >= 10:
            out["kv_cache_dtype"] = "fp8_e4m3"
        return out
    if kv == "auto":
        kv = "fp8_e4m3" if cc[0] >= 10 else "bf16"
    if kv not in ("bf16", "fp8_e4m3"):
        word = "DSA" if sv >= SGLANG_DSA_WORD_FROM else "NSA"
        raise ValueError(
            f"'kv_cache_dtype' must be bf16 or fp8_e4m3 for sglang's DeepSeek DSA: got {kv!r} "
            f"(AssertionError: DeepSeek {word} only supports bf16/bfloat16 or fp8_e4m3 "
            "kv_cache_dtype)"
        )
    out["kv_cache_dtype"] = kv
    return out


def sglang_dsa_lines(config, lay) -> list[str]:
    """ServerArgs' page-size warning for a DSA model (NSA pool: `lay.index_bytes`) on CUDA."""
    if not lay.index_bytes:
        return []
    word = "DSA" if config.version_tuple >= SGLANG_DSA_WORD_FROM else "NSA"
    return [f"Setting page size to {SGLANG_DSA_PAGE} for DeepSeek {word}."]
