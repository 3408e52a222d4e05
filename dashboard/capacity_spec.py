"""The capacity page's Engine section: vLLM's speculative decoding (calc.serving.vllm_spec: an
MTP drafter's layers and the speculative tokens in the KV cache), SGLang's (calc.serving.
sglang_spec: --speculative-algorithm, its three numbers and the draft's layers and weights) and
a logged "Available KV cache memory" to plan from instead of deriving it (needed with vLLM's
speculative decoding, whose profile run kvcalc does not model; the MTP drafter's weights are
in the weights figure, calc.serving.vllm_drafter), and vLLM's --kv-cache-memory-bytes (calc.
serving.vllm_kv_memory) or SGLang's --max-total-tokens (calc.serving.sglang_token_cap)."""

import streamlit as st

from calc.limits import limit as size_limit
from calc.serving.vllm_draft_group import KNOWN
from calc.serving.vllm_lora import MAX_LORA_RANKS
from dashboard import state, ui

METHODS = ["none", "mtp", "ngram"]
ALGORITHMS = ["none", "EAGLE", "EAGLE3", "NEXTN", "STANDALONE"]
MAX_GIVEN_GIB = 4096.0
SGLANG_NUMBERS = (  # URL key, server argument, its largest value here
    ("esteps", "speculative_num_steps", 64),
    ("etopk", "speculative_eagle_topk", 64),
    ("edraft", "speculative_num_draft_tokens", 1024),
    ("edlay", "speculative_draft_num_layers", 256),
    ("edw", "speculative_draft_weights_gib", MAX_GIVEN_GIB),
)
MAX_SPEC_TOKENS = 64
BACKENDS = ["auto", *KNOWN]  # calc.serving.vllm_draft_group


def spec_inputs(engine: str) -> tuple[list[str], dict, float | None]:
    """vLLM's --speculative-config method and tokens, SGLang's --speculative-algorithm and its
    numbers, and (both engines) a given available memory; returns their URL keys, the settings
    they set and the given GiB (None: derive)."""
    c = st.columns(4)
    keys, out = [], {}
    if engine == "sglang":
        keys, out = _sglang_inputs(c[0])
        _select(c[3], "emm", "enable_multimodal", {"default": None, "on": True}, keys, out,
                help="SGLang 0.4.6+: --enable-multimodal. By default Gemma 3 and Llama 4 run as "
                "text models (no VLM fraction factor, no VLM cache, Llama 4's vision encoder not "
                "built); on, as every other vision checkpoint. Nothing happens for a text-only "
                "model.")  # fmt: skip
    if engine == "vllm":
        method = state.select(
            c[0],
            "espec",
            "speculative method",
            METHODS,
            help="--speculative-config's method: mtp drafts with the model's own MTP layers "
            "(DeepSeek-V3 / R1, GLM-4.5, Qwen3-Next, Qwen3.5), one more attention layer each in "
            "the KV cache, its weights in the weights figure; ngram has no drafter. Both "
            "change a linear layer's state. The speculative profile run is not modelled, so "
            "give the logged available memory or set kv_cache_memory_bytes.",
        )
        keys.append("espec")
        if method != "none":
            with c[1]:
                k = ui.optional_input(
                    "espk",
                    "num_speculative_tokens",
                    1,
                    MAX_SPEC_TOKENS,
                    whole=True,
                    blank="the MTP layers (mtp)",
                    field="num_speculative_tokens",
                )
            keys.append("espk")
            out = {"speculative_method": method, "num_speculative_tokens": k}
        if method == "mtp":
            backend = state.select(
                c[3],
                "eab",
                "attention backend",
                BACKENDS,
                help="--attention-backend: the target's only; the drafter picks its own, and "
                "in vLLM 0.24 - 0.28 a backend with another KV layout (a forced TRITON_ATTN on "
                "AMD) puts the drafter's layers in KV-cache groups of their own",
            )
            keys.append("eab")
            if backend != "auto":
                out["attention_backend"] = backend
    with c[2]:
        given = ui.optional_input(
            "egiven",
            "Available KV cache memory, GiB (from a log)",
            0.01,
            MAX_GIVEN_GIB,
            whole=False,
            blank="derived",
            field="available_kv_gib",
        )
    keys.append("egiven")
    if engine == "vllm":
        row = st.columns(4)
        _number(row[0], "ekvmem", "kv_cache_memory_bytes, GiB", (0.01, MAX_GIVEN_GIB, False),
                "profiled", "kv_cache_memory_bytes", keys, out, scale=2**30,
                help="vLLM 0.10.2 on: each GPU's KV cache in bytes (here GiB x 2^30) instead of "
                "the profiled memory; gpu_memory_utilization then sizes nothing, and vLLM does "
                "not check that the cache fits beside the weights (kvcalc does).")  # fmt: skip
        _select(row[1], "elmo", "language_model_only", {"off": None, "on": True}, keys, out,
                help="vLLM 0.17+ --language-model-only: a vision checkpoint's language model "
                "alone (its tower not loaded, no images profiled). Nothing changes for a "
                "text-only model.")  # fmt: skip
        _select(row[2], "eenc", "mm_encoder_tp_mode", {"weights": None, "data": "data"}, keys,
                out, help="vLLM 0.10.2+ --mm-encoder-tp-mode: data keeps the vision tower whole "
                "on every TP rank (Llama 4, Kimi K2.5, Qwen3.5; Gemma 3 and Mistral 3 fall back "
                "to weights).")  # fmt: skip
        _number(row[3], "eoff", "cpu_offload_gb", (0.01, MAX_GIVEN_GIB, False), "none",
                "cpu_offload_gb", keys, out,
                help="vLLM --cpu-offload-gb: GiB of each GPU's decoder-layer weights kept in CPU "
                "memory (read through UVA); they leave the weights, and the KV cache gains "
                "them.")  # fmt: skip
        lora_keys, lora = _lora_inputs()
        keys += lora_keys
        out.update(lora)
    else:
        row = st.columns(4)
        _number(row[0], "emtt", "max_total_tokens", (1, size_limit("seq_len"), True),
                "the profiled count", "max_total_tokens", keys, out,
                help="SGLang --max-total-tokens: a cap on the token pool, in whole pages; above "
                "the profiled count SGLang warns and keeps the profiled one. From 0.5.11 a "
                "sliding-window pool is capped on its full layers' tokens.")  # fmt: skip
        _number(row[1], "esoff", "cpu_offload_gb", (1, 4096, True), "none", "cpu_offload_gb",
                keys, out, help="SGLang --cpu-offload-gb (whole GiB): each GPU's first "
                "decoder-layer weights kept in CPU memory; they leave the weights, and the pool "
                "gains them.")  # fmt: skip
    return keys, out, given


def _sglang_inputs(col) -> tuple[list[str], dict]:
    algorithm = state.select(
        col,
        "esalg",
        "speculative algorithm",
        ALGORITHMS,
        help="SGLang 0.4.7.post1 - 0.5.23: --speculative-algorithm. Up to 0.5.6.post2 the "
        "target's pool gets max_running_requests x (steps x topk + draft tokens) + 100 more "
        "tokens; from 0.5.14 its cell counts the draft's layers (speculative_draft_num_layers: "
        "the draft checkpoint's num_hidden_layers; an MTP model's own by default); "
        "max_running_requests defaults to 48 and the default mem_fraction_static reserves "
        "2 GiB more (4 in 0.5.10 - 0.5.13, STANDALONE 6); from 0.5.14 the draft loads before "
        "the target's pool is sized, so its weights (speculative_draft_weights_gib: the draft "
        "worker's 'Load weight end ... mem usage') are needed to derive the pool. NEXTN drafts "
        "with the model's own MTP layers (DeepSeek-V3 / R1: its pool is the second 'KV Cache "
        "is allocated' line).",
    )
    if algorithm == "none":
        return ["esalg"], {}
    keys, out = ["esalg"], {"speculative_algorithm": algorithm}
    blanks = {
        "esteps": "SGLang's auto choice",
        "edlay": "the MTP layers",
        "edw": "none (needed from 0.5.14)",
    }
    for c, (key, field, hi) in zip(st.columns(5), SGLANG_NUMBERS, strict=True):
        whole = key != "edw"
        with c:
            out[field] = ui.optional_input(
                key,
                field,
                1 if whole else 0.01,
                hi,
                whole=whole,
                blank=blanks.get(key, "by the others"),
                field=field,
            )
        keys.append(key)
    return keys, out


def _lora_inputs() -> tuple[list[str], dict]:
    """vLLM's --enable-lora, --max-loras and --max-lora-rank (calc.serving.vllm_lora)."""
    row, keys, out = st.columns(4), [], {}
    _select(row[0], "elora", "enable_lora", {"off": None, "on": True}, keys, out,
            help="vLLM --enable-lora: the adapter slots (A and B per linear slice, the "
            "embedding's and LM head's where the model wraps them) and punica buffers, in the "
            "weights.")  # fmt: skip
    if not out:
        return keys, out
    _number(row[1], "elorn", "max_loras", (1, 1024, True), "vLLM's 1", "max_loras", keys, out,
            help="vLLM --max-loras: adapters resident at once (their slots).")  # fmt: skip
    ranks = {"vLLM's 16": None, **{str(r): r for r in MAX_LORA_RANKS}}  # unset: vLLM's default
    _select(row[2], "elorr", "max_lora_rank", ranks, keys, out,
            help="vLLM --max-lora-rank: the slots' rank (the release's choices).")  # fmt: skip
    return keys, out


def _select(col, key: str, label: str, values: dict, keys: list, out: dict, help: str) -> None:
    """A selectbox whose option maps to a setting's value (None: the setting left out)."""
    keys.append(key)
    value = values[state.select(col, key, label, list(values), help=help)]
    if value is not None:
        out[label] = value


def _number(col, key, label, bounds, blank, field, keys, out, help, scale=None) -> None:
    """An optional number input for setting `field` (blank: left out); `scale` multiplies it."""
    lo, hi, whole = bounds
    with col:
        x = ui.optional_input(key, label, lo, hi, whole=whole, blank=blank, field=field, help=help)
    keys.append(key)
    if x is not None:
        out[field] = int(x * scale) if scale else x
