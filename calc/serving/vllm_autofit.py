"""vLLM's --max-model-len -1 ("auto" from 0.34.0): the longest context the KV cache holds one
request of, found after the memory is known (vllm/v1/core/kv_cache_utils.py from 0.14.0,
kv_cache_planning.py from 0.33.0: _auto_fit_max_model_len, _estimate_max_model_len_from_groups;
absent from 0.13.0).

The engine's config is made with the model's own max_model_len (the batch defaults follow it);
get_kv_cache_configs then binary-searches, on each worker, the largest length whose blocks fit in
its memory (from 0.29.0 less the null block, the same memory as the one-request check), and keeps
the smallest over the workers, at most the model's. Logged (INFO) before the KV-cache size lines:
- 0.14.0 - 0.31.x: "Auto-fit max_model_len: full model context length L fits in available GPU
  memory", or "Auto-fit max_model_len: reduced from L to N to fit in available GPU memory (X GiB
  available for KV cache)";
- 0.32.0 - 0.33.x: "... fits in available KV cache memory (X GiB GPU)" and "... reduced from L to
  N to fit in available KV cache memory (X GiB GPU)" ("XPU" on Intel);
- 0.34.0 (the extensible KV cache off): "... fits in available KV cache memory (X GiB GPU)", or
  "--max-model-len auto reduced max_model_len from L to N (X GiB GPU available for the KV
  cache)." (a warning below 8,192 tokens, naming what to change).
No token fits: "Cannot auto-fit max_model_len: not enough GPU memory available to serve even a
single token. Try increasing `gpu_memory_utilization`." (0.14 - 0.33).
0.34.0's extensible KV cache fits twice: on the profiled memory ("...; the final length is set
after CUDA graph capture and warmup"), then, after warmup, on the measured blocks less one
within that length ("Auto-fit max_model_len: using max_model_len=N, which fits in the KV cache
memory left after CUDA graph capture and warmup (X GiB GPU)." or "--max-model-len auto reduced
max_model_len from N to M (X GiB GPU left for the KV cache after CUDA graph capture and
warmup)."); kv_cache_planning.py finalize after warmup.
Planned for a model of full-attention layers only (one group: the search is then the whole
blocks of the one-request check); hybrid, sliding, chunked or state layers are refused as not
modelled.
"""

from __future__ import annotations

from calc.serving.vllm_lines import gib_text

AUTO_FIT_FROM = (0, 14, 0)
KV_WORDS_FROM = (0, 32, 0)
AUTO_WORD_FROM = (0, 34, 0)
SHORT = 8192  # AUTO_FIT_SHORT_MAX_MODEL_LEN (0.34.0)


def check_auto_fit(spec, config, lay) -> None:
    v = config.version_tuple[:3]
    if v < AUTO_FIT_FROM:
        raise ValueError(
            "'max_model_len' -1 (auto-fit) is a vLLM option from 0.14.0: got vLLM "
            + ".".join(map(str, v))
        )
    if [g.kind for g in lay.groups] != ["full_attention"]:
        raise ValueError(
            "'max_model_len' auto-fit with a model with more than full-attention layers is not "
            "modelled"
        )


def _memory(b: int, v, device: str) -> str:
    return f"{gib_text(b, v)} GiB {device}"


def _reduced_034(config, L: int, fit: int, left: str) -> str:
    line = f"--max-model-len auto reduced max_model_len from {L} to {fit} ({left})."
    if fit >= SHORT:
        return line
    hint = (
        "Increase `gpu_memory_utilization` or set --max-model-len explicitly."
        if config.gpu_memory_utilization < 1.0
        else "Use more GPUs or set --max-model-len explicitly."
    )
    return f"{line[:-1]}. Requests longer than {fit} tokens will be rejected. {hint}"


def auto_fit(config, r: dict, vendor: str) -> tuple[int, list[str], list[str], str | None]:
    """(the fitted max_model_len, vLLM's lines before warmup, after it (0.34.0's extensible KV
    cache fits again on the measured blocks), its refusal or None) from vllm_figures' `r` at the
    model's own length."""
    from calc.serving.vllm_refusal import vllm_refusal_hint

    v, L = config.version_tuple[:3], config.max_model_len
    ext, device = bool(config.enable_extensible_kv_cache), "XPU" if vendor == "Intel" else "GPU"
    fit = min(L, r["longest_len"])
    if fit <= 0:
        hint = "Try increasing `gpu_memory_utilization`."
        if v >= AUTO_WORD_FROM:
            hint = vllm_refusal_hint(ext, config.gpu_memory_utilization, after_warmup=False)
        no = "Cannot auto-fit max_model_len: not enough GPU memory available to serve even a "
        return L, [], [], f"{no}single token. {hint}"
    mem = _memory(r["check_bytes"], v, device)
    tentative = "; the final length is set after CUDA graph capture and warmup" if ext else ""
    if v < KV_WORDS_FROM:
        full = f"Auto-fit max_model_len: full model context length {L} fits in available GPU memory"
        cut = (
            f"Auto-fit max_model_len: reduced from {L} to {fit} to fit in available GPU memory "
            f"({gib_text(r['check_bytes'], v)} GiB available for KV cache)"
        )
    else:
        full = f"Auto-fit max_model_len: full model context length {L} fits in available KV cache memory ({mem}){tentative}"
        cut = f"Auto-fit max_model_len: reduced from {L} to {fit} to fit in available KV cache memory ({mem}){tentative}"
        if v >= AUTO_WORD_FROM and not ext and fit < L:
            cut = _reduced_034(config, L, fit, f"{mem} available for the KV cache")
    before = [full if fit >= L else cut]
    if not ext:
        return fit, before, [], None
    # after warmup: (the measured blocks - 1) x the block, fitted again within the first fit
    again = min(fit, r["longest_after_len"])
    if again <= 0:
        return (
            fit,
            before,
            [],
            (
                "Cannot auto-fit max_model_len: not enough GPU memory available to serve even a "
                "single token. CUDA graph capture and warmup left no memory for the KV cache. "
                "Increase `gpu_memory_utilization`, reduce the memory CUDA graphs take (fewer or "
                "smaller capture sizes in the compilation config), or use more GPUs."
            ),
        )
    left = _memory(r["after_warmup_bytes"], v, device)
    if again >= fit:
        after = (
            f"Auto-fit max_model_len: using max_model_len={fit}, which fits in the KV cache "
            f"memory left after CUDA graph capture and warmup ({left})."
        )
    else:
        after = _reduced_034(
            config, fit, again, f"{left} left for the KV cache after CUDA graph capture and warmup"
        )
    return again, before, [after], None
