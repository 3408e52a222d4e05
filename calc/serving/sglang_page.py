"""The page size SGLang's token pool takes on a CUDA GPU when --attention-backend is not given,
by release, compute capability and architecture: the default backend ServerArgs picks (in
ModelRunner up to 0.5.4, where only model-specific server_args defaults could force a page;
server_args._handle_attention_backend_compatibility / _get_default_attn_backend from
0.5.4.post1; arg_groups/overrides.py and model_overrides/*.py from 0.5.15) and the page its
kernels need. Read in the PyPI wheels 0.4.0 - 0.5.23 (every .postN of 0.4.3 - 0.5.6).

Blackwell datacenter parts (capability 10.x: is_sm100_supported, B200 / B300, CUDA >= 12.8):
- DeepseekV3ForCausalLM (DeepSeek-V3 / R1, Kimi K2; KimiK25ForConditionalGeneration joins the
  family's list in 0.5.9) from 0.5.3.post2: trtllm_mla, page 32 or 64 kept, else 64: "TensorRT-
  LLM MLA only supports page_size of 32 or 64, changing page_size from None to 64." (other MLA
  architectures, e.g. DeepSeek-V2 or GLM-4.7-Flash, take FlashInfer MLA: page as given);
- GptOssForCausalLM from 0.5.1, Llama 4 from 0.5.6, every other attention model (the generic
  MHA default) from 0.5.6.post1: trtllm_mha, page 16 / 32 / 64 (and 128 from 0.5.17) kept,
  else 64: "TensorRT-LLM MHA only supports page_size of 16, 32 or 64, changing page_size from
  None to 64." (0.5.17 on: "16, 32, 64 or 128");
- Qwen3-Next / Qwen3.5 (Gated DeltaNet): triton, page as given; 0.5.3 - 0.5.5.post3 refuse to
  start: "triton ... backend(s) ... the only supported backend(s) on Blackwell GPUs for hybrid
  GDN models" (HybridLinearAttnBackend's assertion; the wording by release below).
RTX Blackwell (12.x): the generic MHA default of 0.5.6.post1 - 0.5.6.post2 (is_blackwell() then
includes 12) picks trtllm_mha and raises "TRTLLM MHA backend is only supported on Blackwell GPUs
(SM100). Please use a different backend."; the Gated DeltaNet assertion holds there from
0.5.4.post2 to 0.5.9. Llama 4 on any GPU, 0.4.9.post4 - 0.5.5.post3: an assertion on the still
unset backend ("... is required for Llama4 model"). Everywhere else the page stays as given (1
by default): fa3 on Hopper, flashinfer / triton elsewhere. Mamba-2 hybrids (NemotronH,
GraniteMoeHybrid) and AMD GPUs are not read here: their page stays as given.
"""

from __future__ import annotations

from calc.serving.defaults_sglang import release_name

TRTLLM_MLA_FROM = (0, 5, 3, 2)
KIMI_K25_FROM = (0, 5, 9, 0)
GPT_OSS_FROM = (0, 5, 1, 0)
LLAMA4_FROM = (0, 5, 6, 0)
GENERIC_FROM = (0, 5, 6, 1)
MHA_128_FROM = (0, 5, 17, 0)
SM120_BUG = ((0, 5, 6, 1), (0, 5, 6, 3))  # [from, until)
GDN_SM100_FAIL = ((0, 5, 3, 0), (0, 5, 6, 0))
GDN_SM120_FAIL = ((0, 5, 4, 2), (0, 5, 10, 0))
LLAMA4_FAIL = ((0, 4, 9, 4), (0, 5, 6, 0))
GDN_ONLY_TRITON = ((0, 5, 3, 1), (0, 5, 5, 2))  # the assertion names triton alone


def kind_of(spec) -> str:
    """The architecture classes the rules above tell apart."""
    counts = spec.attention_counts
    if "indexed_attention" in counts:  # DeepSeek-V3.2 / GLM-5: indexed_sglang's page
        return "dsa"
    if "linear_attention" in counts:
        return "gdn"
    if "mamba" in counts:
        return "mamba2"
    if spec.is_mla:
        v3 = spec.family in ("deepseek", "deepseek_v3", "kimi", "kimi_k2", "kimi_k25")
        return ("kimi_k25" if spec.vision else "deepseek_v3") if v3 else "mla"
    if spec.family in ("gpt-oss", "gpt_oss"):
        return "gpt_oss"
    if spec.family in ("llama-4", "llama4", "llama4_text"):
        return "llama4"
    return "mha"


def _within(v, span) -> bool:
    return span[0] <= v < span[1]


def _check_launch(v, major: int, kind: str) -> None:
    if kind == "llama4" and _within(v, LLAMA4_FAIL):
        raise ValueError(f"{_llama4_needs(v)} is required for Llama4 model (SGLang {release_name(v)}"
                         " asserts before choosing a default: give --attention-backend)")  # fmt: skip
    gdn_fail = (major == 10 and _within(v, GDN_SM100_FAIL)) or (
        major == 12 and _within(v, GDN_SM120_FAIL)
    )
    if kind == "gdn" and gdn_fail:
        if _within(v, GDN_ONLY_TRITON):
            raise ValueError(
                "triton backend is the only supported backend on Blackwell GPUs for hybrid GDN "
                "models, use --attention-backend triton to specify the backend."
            )
        raise ValueError(
            "triton or trtllm_mha backend are the only supported backends on Blackwell GPUs for "
            "hybrid GDN models, use --attention-backend triton or --attention-backend trtllm_mha "
            "to specify the backend."
        )
    if major == 12 and kind == "mha" and _within(v, SM120_BUG):
        raise ValueError(
            "TRTLLM MHA backend is only supported on Blackwell GPUs (SM100). Please use a "
            "different backend."
        )


def _llama4_needs(v) -> str:
    if v < (0, 5, 1, 0):
        return "fa3"
    if v < (0, 5, 2, 0):
        return "fa3 or aiter"
    if v < (0, 5, 4, 1):
        return "fa3, aiter, or triton"
    if v < (0, 5, 5, 1):
        return "fa3, aiter, triton, or trtllm_mha"
    return "fa3, aiter, triton, trtllm_mha or intel_xpu"


def sglang_page(
    v: tuple[int, ...],
    capability: tuple[int, int] | None,
    kind: str,
    given: int | None,
    trtllm_decode: bool = False,
) -> tuple[int, str | None]:
    """(the page size, the line SGLang logs when it changes it, or None); `given`: --page-size,
    None when not given (module docstring); `trtllm_decode`: trtllm_mha decodes whatever the
    GPU's default (an nvfp4 pool on SM120 from 0.5.21: calc.serving.sglang_nvfp4)."""
    page = 1 if given is None else given
    if capability is None:
        return page, None
    major = capability[0]
    _check_launch(v, major, kind)
    if trtllm_decode and major != 10:
        return _snapped(page, given, (16, 32, 64, 128), "TensorRT-LLM MHA", "16, 32, 64 or 128")
    if major != 10:
        return page, None
    mla = kind == "deepseek_v3" and v >= TRTLLM_MLA_FROM
    mla = mla or (kind == "kimi_k25" and v >= KIMI_K25_FROM)
    if mla:
        return _snapped(page, given, (32, 64), "TensorRT-LLM MLA", "32 or 64")
    starts = {"gpt_oss": GPT_OSS_FROM, "llama4": LLAMA4_FROM, "mha": GENERIC_FROM}
    if kind not in starts or v < starts[kind]:
        return page, None
    if v >= MHA_128_FROM:
        return _snapped(page, given, (16, 32, 64, 128), "TensorRT-LLM MHA", "16, 32, 64 or 128")
    return _snapped(page, given, (16, 32, 64), "TensorRT-LLM MHA", "16, 32 or 64")


def _snapped(page: int, given, sizes: tuple[int, ...], backend: str, listed: str):
    """A trtllm kernel's page: kept when it takes it, else 64 with SGLang's line."""
    if page in sizes:
        return page, None
    shown = "None" if given is None else given
    return 64, (
        f"{backend} only supports page_size of {listed}, changing page_size from {shown} to 64."
    )
