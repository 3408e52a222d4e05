"""SGLang's server defaults from v0.5.7 to v0.5.23 (chunked_prefill_size, the decode CUDA graph's
max batch size, mem_fraction_static), read in the released wheels' sources (pypi.org sglang
<version> wheels: python/sglang/srt/server_args.py ServerArgs._handle_gpu_memory_settings up to
0.5.18; from 0.5.19 sglang/srt/arg_groups/memory_hook.py handle_gpu_memory_settings and
cuda_graph_hook.py, run in that order by arg_groups/pipeline.py run_resolution_pipeline).
calc/serving/defaults_sglang.py keeps the tables and the reserve formula (one home for every
release); this module adds what changed after v0.5.6.post2.

mem_fraction_static when unset = round((gpu_mem - reserved) / gpu_mem, 3), gpu_mem nvidia-smi's
MiB, reserved = 512 + max(chunked_prefill_size, 2048) x 1.5 + cuda_graph_max_bs x 2
+ tp x pp / 8 x 1024 (+ cuda_graph_max_bs x dp x 3, x 1.5 more over 300, with DP attention)
+ the prefill graph's reserve, then at least 10 GiB on GPUs over 60 GiB; as v0.5.6.post2 except:
- 0.5.7: the NPU rows leave the table (NVIDIA unchanged). --enable-piecewise-cuda-graph (off by
  default) reserved max tokens // 8 after the floor; 0.5.8 moved it before the floor as
  len(piecewise_cuda_graph_tokens) x 8 MiB. kvcalc refuses it before 0.5.10 (off = the default).
- 0.5.10: the piecewise CUDA graph is ON by default (--disable-piecewise-cuda-graph);
  _handle_piecewise_cuda_graph, run before the memory settings, turns it off for the archs of
  model_config.piecewise_cuda_graph_disabled_model_archs (Qwen3NextForCausalLM; DeepSeek NSA,
  DeepseekV32 / GlmMoeDsa and is_deepseek_nsa, up to 0.5.12), DP attention, pp > 1, non-CUDA,
  LoRA, multimodal, speculative decoding (to 0.5.10.post1), torch compile, ... Reserve: 1.5 GiB
  with an MLA backend (model_config.attention_arch == MLA), else len(tokens) x 8 MiB, tokens =
  _generate_piecewise_cuda_graph_tokens(max tokens) (the 0.5.9 list: 4..32 step 4, 48..256 /16,
  288..512 /32, 576..1024 /64, 1280..4096 /256, 4608.. /512), max tokens = chunked_prefill_size
  (2048 with MLA), at most 4096 when "llama-2" is in the model path. Speculative decoding's
  reserve (+4 GiB from 0.5.10 to 0.5.13, was +2) is calc/serving/sglang_spec.py's reserve_mib.
- 0.5.13: the max tokens are capped by context_length when it is given (#21112; in the memory
  settings until 0.5.17); DeepSeek NSA leaves the list (graph on, MLA: 1.5 GiB).
- 0.5.14: --disable-piecewise-cuda-graph is an alias of --cuda-graph-backend-prefill=disabled
  (cuda_graph_config.prefill; decode max_bs = cuda_graph_max_bs); same rules
  (_disable_tc_piecewise_cudagraph_if_incompatible).
- 0.5.15: the prefill default on CUDA is the breakable graph (default_prefill_backend), whose
  rules differ: off for MLA, DP attention, LoRA, MoE a2a, multimodal, DeepSeek-V4; the arch list
  and pp > 1 no longer turn it off. 0.5.17: MLA off only without DSA (DeepSeek NSA keeps it),
  NemotronH off, DP attention and LoRA no longer off. 0.5.18: MLA no longer off (1.5 GiB).
- 0.5.16: SGLANG_ENABLE_POST_CAPTURE_KV_SIZING (environ.py: default False, taken here) would skip
  the graph reserve; 0.5.15 adds DeepEP (+2 GiB, not modelled: kvcalc has no a2a backend).
- 0.5.19: pp > 1 turns the breakable prefill graph off by default (apply_cuda_graph_compatibility).
- 0.5.20: GPUs of 20 - 35 GiB: chunked_prefill_size 4096, cuda_graph_max_bs 48 (160 at tp >= 4).
  KDA linear attention turns the graph off (kvcalc's linear attention is Gated DeltaNet).
- 0.5.22: a default cuda_graph_max_bs is capped by max_running_requests; DP attention's width is
  attn_dp_size (= --dp-size with --enable-dp-attention, handle_deprecated_dp_attention).
- 0.5.23: the MLA prefill graph's max tokens are min(8192, chunk) (the reserve stays 1.5 GiB).
- A multimodal model (SGLang's is_multimodal: calc.serving.sglang_multimodal): the prefill graph is
  off in 0.5.10 - 0.5.13 (_handle_piecewise_cuda_graph "9. Multimodal / VLM models"), in 0.5.14
  unless on multimodal_piecewise_cuda_graph_supported_model_archs (only
  Cohere2VisionForConditionalGeneration, which kvcalc does not read) and in 0.5.15 for any
  ("multimodal model": "Multimodal prefill replay faults under BCG"); from 0.5.16 unless on
  multimodal_breakable_cuda_graph_supported_model_archs, where the text model's rules apply:
  Qwen3_5(Moe)ForConditionalGeneration from 0.5.16, KimiK25ForConditionalGeneration from 0.5.18
  (0.5.16 - 0.5.17 switch Kimi K2.5, piecewise-allowlisted, to the tc_piecewise graph unless its
  attention backend is trtllm_mla: refused, kvcalc does not resolve the backend there).
Post releases (0.5.8.post1, 0.5.10.post1, 0.5.12.post1, 0.5.13.post1, 0.5.15.post1): the same
memory settings and graph rules as their release (their server_args.py compared).
Refused (ValueError): a linear-attention model on 0.5.10 - 0.5.14 whose name does not say
Qwen3-Next (the arch list decides, and kvcalc's spec has no architecture); NemotronH and
GraniteMoeHybrid are not on that list (tc piecewise graph on, 0.5.10 - 0.5.14); NemotronH turns
the breakable graph off in 0.5.17 only (_disable_breakable_cudagraph_if_incompatible).
A given --max-total-tokens caps the prefill graph's max tokens (0.5.10 - 0.5.13 "cap pcg tokens
to not exceed max_total_tokens", prefill max_bs from 0.5.14; memory_hook.py from 0.5.19), so
fewer captured sizes are reserved for (MLA's 1.5 GiB does not change).
Speculative decoding's graph and reserve rules live in calc/serving/sglang_spec.py. Not modelled:
the conditions kvcalc has no setting for (LoRA, torch compile, DeepEP, PD disaggregation, CPU
offload).
"""

from __future__ import annotations

AFTER_056 = (0, 5, 6, 2)  # defaults_sglang.py's newest; this module from 0.5.7
PCG_ON_FROM = (0, 5, 10, 0)  # piecewise CUDA graph on by default
NSA_PCG_OFF_UNTIL = (0, 5, 13, 0)  # DeepSeek NSA on the disabled list (and is_deepseek_nsa)
CONTEXT_CLAMP = ((0, 5, 13, 0), (0, 5, 18, 0))  # [from, until): max tokens <= context_length
BREAKABLE_FROM = (0, 5, 15, 0)  # the breakable prefill graph is CUDA's default
BREAKABLE_MLA_OFF_UNTIL = (0, 5, 18, 0)  # breakable off for MLA (0.5.17: MLA without DSA only)
BREAKABLE_DSA_FROM = (0, 5, 17, 0)
MM_BREAKABLE_LISTED_FROM = (0, 5, 16, 0)  # multimodal_breakable_..._supported_model_archs
MM_BREAKABLE_FROM = {"qwen3_5": (0, 5, 16, 0), "moonvit": (0, 5, 18, 0)}  # by vision kind
BREAKABLE_DP_OFF_UNTIL = (0, 5, 17, 0)
BREAKABLE_PP_OFF_FROM = (0, 5, 19, 0)
BREAKABLE_NEMOTRON_H_OFF = (0, 5, 17)  # is_nemotron_h rule: in 0.5.17's list, not in 0.5.18's
SMALL_GPU_FROM = (0, 5, 20, 0)  # 20 - 35 GiB: chunk 4096, max_bs 48 / 160
GRAPH_BS_MRR_CAP_FROM = (0, 5, 22, 0)
SGLANG_NEWEST_2026 = (0, 5, 23, 0)
MLA_PCG_MIB = 1.5 * 1024


def prefill_graph_tokens(max_tokens: int) -> list[int]:
    """_generate_piecewise_cuda_graph_tokens (0.5.9 - 0.5.13) / generate_prefill_cuda_graph_batch
    _sizes (0.5.14 on): the token counts the prefill graph captures, up to max_tokens."""
    sizes = (
        [*range(4, 33, 4), *range(48, 257, 16), *range(288, 513, 32)]
        + [*range(576, 1024 + 1, 64), *range(1280, 4096 + 1, 256)]
        + list(range(4608, max_tokens + 1, 512))
    )
    return [s for s in sizes if s <= max_tokens]


def check_piecewise_setting(version: tuple[int, ...], disable: bool | None) -> None:
    """disable_piecewise_cuda_graph=False asks for the graph: SGLang's default from 0.5.10;
    before, --enable-piecewise-cuda-graph, which kvcalc does not model."""
    if disable is False and version < PCG_ON_FROM:
        raise ValueError(
            "'disable_piecewise_cuda_graph' must be True or None (off, the default) before "
            "sglang 0.5.10: kvcalc does not model --enable-piecewise-cuda-graph: got False"
        )


def prefill_graph_off(version: tuple[int, ...], multimodal: str | None) -> bool:
    """Whether SGLang turns the prefill graph off for a model it runs as multimodal (`multimodal`:
    sglang_multimodal's kind; None: a text model, False) from 0.5.10 (module docstring: a multimodal model)."""
    if multimodal is None:
        return False
    if version < MM_BREAKABLE_LISTED_FROM:
        return True
    since = MM_BREAKABLE_FROM.get(multimodal)
    if multimodal == "moonvit" and version < since:
        raise ValueError(
            "'disable_piecewise_cuda_graph' must be given for Kimi K2.5 on sglang "
            f"{'.'.join(map(str, version[:3]))}: it switches to the tc_piecewise prefill graph "
            "unless the attention backend is trtllm_mla, which kvcalc does not resolve there"
        )
    return since is None or version < since


def prefill_graph_on(
    version: tuple[int, ...],
    *,
    disable: bool | None,
    mla: bool,
    nsa: bool,
    linear_attention: bool,
    model_name: str,
    dp_attention: bool,
    pp: int,
    nemotron_h: bool = False,
    multimodal: str | None = None,
) -> bool:
    """Whether the prefill (piecewise / breakable) CUDA graph is on when the memory settings
    run: the user's --disable-piecewise-cuda-graph, else the release's rules (docstring; a
    multimodal model's: calc.serving.sglang_multimodal.prefill_graph_off)."""
    if disable is not None or version < PCG_ON_FROM:
        return disable is False
    if prefill_graph_off(version, multimodal):
        return False
    if version < BREAKABLE_FROM:  # tc_piecewise and its auto-disable rules
        if nsa and version < NSA_PCG_OFF_UNTIL:
            return False
        if linear_attention:
            name = model_name.lower().replace("_", "-")
            if "qwen3-next" not in name:
                raise ValueError(
                    f"'disable_piecewise_cuda_graph' must be given for a linear-attention model "
                    f"on sglang {'.'.join(map(str, version[:3]))}: the piecewise CUDA graph is "
                    f"off for Qwen3NextForCausalLM only (model_config.py "
                    f"piecewise_cuda_graph_disabled_model_archs), and kvcalc cannot tell the "
                    f"architecture of {model_name!r}"
                )
            return False
        return not dp_attention and pp == 1
    if mla and version < BREAKABLE_MLA_OFF_UNTIL:
        if version < BREAKABLE_DSA_FROM or not nsa:
            return False
    if dp_attention and version < BREAKABLE_DP_OFF_UNTIL:
        return False
    if nemotron_h and version[:3] == BREAKABLE_NEMOTRON_H_OFF:
        return False
    return not (pp > 1 and version >= BREAKABLE_PP_OFF_FROM)


def prefill_graph_reserve_mib(
    version: tuple[int, ...],
    chunk: int,
    *,
    mla: bool,
    model_name: str,
    context_length: int | None,
    max_total_tokens: int | None = None,
) -> float:
    """The prefill graph's reserve (MiB) when it is on (0.5.10 on): 1.5 GiB with MLA, else 8 MiB
    per captured token count up to chunked_prefill_size (at most max_total_tokens when given;
    llama-2: <= 4096; context_length when given, 0.5.13 - 0.5.17)."""
    if mla:
        return MLA_PCG_MIB
    max_tokens = chunk if max_total_tokens is None else min(chunk, max_total_tokens)
    if "llama-2" in model_name.lower():
        max_tokens = min(max_tokens, 4096)
    if context_length is not None and CONTEXT_CLAMP[0] <= version < CONTEXT_CLAMP[1]:
        max_tokens = min(max_tokens, context_length)
    return len(prefill_graph_tokens(max_tokens)) * 8


def prefill_graph_extra_mib(
    version: tuple[int, ...],
    chunk: int,
    pp: int = 1,
    *,
    dp_attention: bool = False,
    disable_piecewise_cuda_graph: bool | None = None,
    mla: bool | None = None,
    nsa: bool = False,
    linear_attention: bool = False,
    model_name: str = "",
    context_length: int | None = None,
    nemotron_h: bool = False,
    multimodal: str | None = None,
    max_total_tokens: int | None = None,
) -> float:
    """What releases after v0.5.6.post2 add to the default's reserve (MiB) before the 10 GiB
    floor (module docstring): the prefill graph's, when it is on. `mla` (the model's attention
    is MLA) is needed once the graph is on by default (0.5.10)."""
    check_piecewise_setting(version, disable_piecewise_cuda_graph)
    on = prefill_graph_on(
        version,
        disable=disable_piecewise_cuda_graph,
        mla=bool(mla),
        nsa=nsa,
        linear_attention=linear_attention,
        model_name=model_name,
        nemotron_h=nemotron_h,
        dp_attention=dp_attention,
        pp=pp,
        multimodal=multimodal,
    )
    if not on:
        return 0
    if mla is None:
        raise ValueError(
            f"'mla' must be given for sglang {'.'.join(map(str, version[:3]))}'s default "
            "mem_fraction_static: its prefill CUDA graph reserves 1.5 GiB with MLA"
        )
    return prefill_graph_reserve_mib(
        version,
        chunk,
        mla=mla,
        model_name=model_name,
        context_length=context_length,
        max_total_tokens=max_total_tokens,
    )
