"""The capacity page's Engine section, for a model with linear layers (Qwen3-Next / 3.5, Mamba-2
hybrids): the settings of their state (calc.serving.vllm_mamba, vllm_state_dtype, sglang_ssm)."""

import streamlit as st

from dashboard import state

PREFIX_CACHING = {"default": None, "on": True, "off": False}


def state_inputs(engine: str, spec) -> tuple[list[str], dict]:
    """A linear layer's state settings (Qwen3-Next / 3.5, Mamba-2 hybrids): vLLM's prefix
    caching and state dtype, SGLang's --mamba-ssm-dtype; the release's rule when left default."""
    if not {"linear_attention", "mamba"} & set(spec.attention_counts):
        return [], {}
    c = st.columns(4)
    if engine == "sglang":
        opts = ["default", "float32", "bfloat16", "float16"]
        ssm = state.select(
            c[0],
            "esgssm",
            "mamba_ssm_dtype",
            opts,
            help="The linear layers' temporal state; default: the flag left out (float32, or "
            "from 0.5.9 the config.json's mamba_ssm_dtype).",
        )
        return ["esgssm"], ({} if ssm == "default" else {"mamba_ssm_dtype": ssm})
    pc = state.select(
        c[0],
        "epc",
        "enable_prefix_caching",
        list(PREFIX_CACHING),
        help="Default: on from 0.26. On, each request holds 2 or more state pages (a state "
        "per block for Nemotron-H / Granite up to 0.27); off, one.",
    )
    modes = ["default", "all", "align", "none"]
    mode = state.select(
        c[2],
        "emode",
        "mamba_cache_mode",
        modes,
        help="With prefix caching, vLLM 0.16 - 0.32: 'all' keeps a state per block "
        "(Nemotron-H / Granite; others fall back to 'align'), 'align' 2 or 3 pages; default: "
        "the flag left out. Refused before 0.16 and ('all') from 0.32; no effect from 0.33.",
    )
    opts = ["auto", "float32", "float16", "bfloat16"]
    ssm = state.select(
        c[1],
        "essm",
        "mamba_ssm_cache_dtype",
        opts,
        help="The linear layers' temporal state; auto: the model's config (Nemotron-H, "
        "Qwen3.5), else the model dtype.",
    )
    return ["epc", "essm", "emode"], {
        "enable_prefix_caching": PREFIX_CACHING[pc],
        "mamba_ssm_cache_dtype": ssm,
        "mamba_cache_mode": None if mode == "default" else mode,
    }
