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
Planned for a model of full-attention layers only (one group: the search is then the whole
blocks of the one-request check); hybrid, sliding, chunked or state layers, and 0.34.0's
extensible KV cache (fitted again after warmup), are refused as not modelled.
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
    what = None
    if [g.kind for g in lay.groups] != ["full_attention"]:
        what = "a model with more than full-attention layers"
    elif config.enable_extensible_kv_cache:
        what = "0.34.0's extensible KV cache (fitted again after warmup)"
    if what:
        raise ValueError(f"'max_model_len' auto-fit with {what} is not modelled")


def auto_fit(config, r: dict, vendor: str) -> tuple[int, str, str | None]:
    """(the fitted max_model_len, vLLM's line, its refusal or None) from vllm_figures' `r` at the
    model's own length."""
    v, L = config.version_tuple[:3], config.max_model_len
    fit = min(L, r["longest_len"])
    mem = gib_text(r["check_bytes"], v)
    device = "XPU" if vendor == "Intel" else "GPU"
    if fit <= 0:
        return (
            L,
            "",
            (
                "Cannot auto-fit max_model_len: not enough GPU memory available to serve even a "
                "single token. Try increasing `gpu_memory_utilization`."
            ),
        )
    where = (
        "available GPU memory"
        if v < KV_WORDS_FROM
        else f"available KV cache memory ({mem} GiB {device})"
    )
    if fit >= L:
        return L, f"Auto-fit max_model_len: full model context length {L} fits in {where}", None
    if v < KV_WORDS_FROM:
        return (
            fit,
            (
                f"Auto-fit max_model_len: reduced from {L} to {fit} to fit in available GPU memory "
                f"({mem} GiB available for KV cache)"
            ),
            None,
        )
    if v < AUTO_WORD_FROM:
        return fit, f"Auto-fit max_model_len: reduced from {L} to {fit} to fit in {where}", None
    line = f"--max-model-len auto reduced max_model_len from {L} to {fit} ({mem} GiB {device} available for the KV cache)."
    if fit < SHORT:
        hint = (
            "Increase `gpu_memory_utilization` or set --max-model-len explicitly."
            if config.gpu_memory_utilization < 1.0
            else "Use more GPUs or set --max-model-len explicitly."
        )
        line = f"{line[:-1]}. Requests longer than {fit} tokens will be rejected. {hint}"
    return fit, line, None
