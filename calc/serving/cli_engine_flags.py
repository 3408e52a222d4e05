"""`kvcalc plan --engine`'s flags of the other engine, refused with the one it takes instead
(calc.serving.cli_settings reads the engine's own)."""

from __future__ import annotations

from calc.serving.sglang_spec import NUMBER_NAMES

SGLANG_ALTERNATIVE = {
    "--decode-context-parallel-size": "no flag of that kind that kvcalc models",
    "--max-num-seqs": "--max-running-requests",
    "--mamba-cache-dtype": "--mamba-ssm-dtype",
    "--mamba-ssm-cache-dtype": "--mamba-ssm-dtype",
    "--[no-]enable-prefix-caching": "--disable-radix-cache",
    "--mamba-cache-mode": "--disable-radix-cache",
    "--attention-backend": "no flag of that kind that kvcalc models",
    "--kv-cache-memory-bytes": "no flag of that kind that kvcalc models",
    "--language-model-only": "--enable-multimodal's default (off: Gemma 3 and Llama 4 as text)",
    "--speculative-config": "--speculative-algorithm and its --speculative-num-steps, "
    "--speculative-eagle-topk, --speculative-num-draft-tokens",
}
VLLM_ALTERNATIVE = {
    "--max-running-requests": "--max-num-seqs",
    "--enable-multimodal": "no such flag (it plans a checkpoint's vision encoder as vLLM does)",
    "--mm-feature-transport": "no flag of that kind that kvcalc models",
    "--max-total-tokens": "--num-gpu-blocks-override (the blocks it allocates, not a cap)",
}


def refuse_sglang_flags(args) -> None:
    """With --engine vllm: an SGLang flag given is an error naming vLLM's own."""
    for flag, val, default in (
        ("--mem-fraction-static", args.mem_fraction_static, None),
        ("--page-size", args.page_size, None),
        ("--max-running-requests", args.max_running_requests, None),
        ("--enable-dp-attention", args.enable_dp_attention, False),
        ("--enable-dp-lm-head", args.enable_dp_lm_head, False),
        ("--moe-dense-tp-size", args.moe_dense_tp_size, None),
        ("--disable-piecewise-cuda-graph", args.disable_piecewise_cuda_graph, None),
        ("--max-total-tokens", args.max_total_tokens, None),
        ("--max-mamba-cache-size", args.max_mamba_cache_size, None),
        ("--mamba-full-memory-ratio", args.mamba_full_memory_ratio, None),
        ("--disable-radix-cache", args.disable_radix_cache, None),
        ("--mamba-ssm-dtype", args.mamba_ssm_dtype, None),
        ("--speculative-algorithm", args.speculative_algorithm, None),
        ("--enable-multimodal", args.enable_multimodal, None),
        ("--mm-feature-transport", args.mm_feature_transport, None),
        *(
            ("--speculative-" + n.replace("_", "-"), getattr(args, f"speculative_{n}"), None)
            for n in NUMBER_NAMES
        ),
    ):
        if val != default:
            if flag.startswith("--speculative"):
                raise ValueError(f"'{flag}' is an SGLang setting: vLLM takes --speculative-config")
            alt = VLLM_ALTERNATIVE.get(flag, "" if "dp" in flag else "--util / --block-size")
            tail = f": vLLM takes {alt}" if alt else ""
            raise ValueError(f"'{flag}' is an SGLang setting{tail}")


def refuse_vllm_flags(args) -> None:
    """With --engine sglang: a vLLM flag given is an error naming SGLang's own."""
    for flag, val, default in (
        ("--util", args.util, None),
        ("--block-size", args.block_size, None),
        ("--max-num-batched-tokens", args.max_num_batched_tokens, None),
        ("--max-num-seqs", args.max_num_seqs, None),
        ("--decode-context-parallel-size", args.decode_context_parallel_size, 1),
        ("--quantization", args.quantization, None),
        ("--mamba-cache-dtype", args.mamba_cache_dtype, "auto"),
        ("--mamba-ssm-cache-dtype", args.mamba_ssm_cache_dtype, "auto"),
        ("--[no-]enable-prefix-caching", args.enable_prefix_caching, None),
        ("--mamba-cache-mode", args.mamba_cache_mode, None),
        ("--speculative-config", args.speculative_config, None),
        ("--attention-backend", args.attention_backend, None),
        ("--[no-]enable-extensible-kv-cache", args.enable_extensible_kv_cache, None),
        ("--num-gpu-blocks-override", args.num_gpu_blocks_override, None),
        ("--kv-cache-memory-bytes", args.kv_cache_memory_bytes, None),
        ("--language-model-only", args.language_model_only, None),
        ("--limit-mm-per-prompt", args.limit_mm_per_prompt, None),
        ("--skip-mm-profiling", args.skip_mm_profiling, None),
        ("--mm-encoder-tp-mode", args.mm_encoder_tp_mode, None),
        ("--enable-lora", args.enable_lora, None),
        ("--max-loras", args.max_loras, None),
        ("--max-lora-rank", args.max_lora_rank, None),
        ("--fully-sharded-loras", args.fully_sharded_loras, None),
        ("--auto-max-model-len", args.auto_max_model_len, None),
    ):
        if val != default:
            alt = SGLANG_ALTERNATIVE.get(flag, "--mem-fraction-static / --page-size")
            raise ValueError(f"'{flag}' is a vLLM setting: SGLang takes {alt}")


def lora_settings(args) -> dict:
    """vLLM's LoRA flags as VllmConfig fields (left out when not given: vLLM's defaults)."""
    out = {"enable_lora": bool(args.enable_lora)}
    if args.max_loras is not None:
        out["max_loras"] = args.max_loras
    if args.max_lora_rank is not None:
        out["max_lora_rank"] = args.max_lora_rank
    if args.fully_sharded_loras:
        out["fully_sharded_loras"] = True
    return out
