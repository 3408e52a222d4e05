"""The options of `kvcalc plan --engine ...` (each engine's own vocabulary) and the settings they
give calc.serving.engine_config; the commands themselves are calc.serving.cli."""

from __future__ import annotations

import argparse

from calc.cli.args import int_at_least
from calc.serving.cli_engine_flags import lora_settings, refuse_sglang_flags, refuse_vllm_flags
from calc.serving.cli_spec_args import add_speculative_args, fraction
from calc.serving.sglang_cli import add_sglang_pool_args
from calc.serving.sglang_spec import NUMBER_NAMES
from calc.serving.vllm_spec import parse_speculative_config

KVCALC_DEFAULTS = {"max_batched_tokens": 8192, "reserve_gib": None, "group_size": 128}


def add_engine_args(p) -> None:
    """The engine route's options, added to `kvcalc plan` (engine vocabulary)."""
    g = p.add_argument_group("engine-exact plan (--engine)")
    g.add_argument(
        "--engine",
        choices=("vllm", "sglang"),
        default=None,
        help="plan as this engine computes it at start-up",
    )
    g.add_argument(
        "--engine-version",
        default=None,
        metavar="V",
        help="engine release (default: the newest read, vllm 0.34.0, sglang 0.5.23)",
    )
    g.add_argument(
        "--available-kv-gib",
        type=fraction,
        default=None,
        metavar="X",
        help="plan from a logged 'Available KV cache memory' instead of deriving it",
    )
    g.add_argument(
        "--calibration",
        default=None,
        metavar="FILE",
        help="a file written by `kvcalc calibrate --out`",
    )
    g.add_argument("--max-num-batched-tokens", type=int_at_least(1), default=None, metavar="N")
    g.add_argument("--max-num-seqs", type=int_at_least(1), default=None, metavar="N")
    g.add_argument(
        "--cpu-offload-gb",
        type=float,
        default=None,
        metavar="GIB",
        help="GiB of each GPU's decoder-layer weights kept in CPU memory (SGLang: whole GiB)",
    )
    # vLLM: allocate N KV-cache blocks whatever the memory
    g.add_argument("--num-gpu-blocks-override", type=int_at_least(1), default=None, metavar="N")
    g.add_argument(
        "--kv-cache-memory-bytes",
        "--kv-cache-memory",
        dest="kv_cache_memory_bytes",
        default=None,
        metavar="B",
        help="vLLM: each GPU's KV-cache memory instead of the profiled one, as vLLM reads it "
        "(8G = 8 x 2^30, 8g = 8 x 10^9)",
    )
    g.add_argument(
        "--max-running-requests",
        type=int_at_least(1),
        default=None,
        metavar="N",
        help="SGLang: the scheduler's cap on running requests (default: the release's rule)",
    )
    g.add_argument(
        "--dp",
        type=int_at_least(1),
        default=1,
        metavar="N",
        help="data-parallel size (vLLM: expert parallel spans tp x dp; SGLang: tp_size)",
    )
    g.add_argument("--enable-expert-parallel", action="store_true")
    g.add_argument(
        "--decode-context-parallel-size",
        "-dcp",
        type=int_at_least(1),
        default=1,
        metavar="N",
        help="vLLM: a request's tokens split over N of the tp GPUs (MLA; GQA from 0.12)",
    )
    g.add_argument(
        "--enable-dp-attention",
        action="store_true",
        help="SGLang: attention over tp / dp GPUs, tp GPUs in all (--tp T --dp D)",
    )
    g.add_argument(
        "--enable-dp-lm-head",
        action="store_true",
        help="SGLang: the LM head over the attention group (with --enable-dp-attention)",
    )
    g.add_argument(
        "--moe-dense-tp-size",
        type=int_at_least(1),
        default=None,
        metavar="N",
        help="SGLang: 1 replicates DeepSeek's dense MLP layers",
    )
    g.add_argument(
        "--quantization",
        default=None,
        metavar="M",
        help="vLLM --quantization: fp8 quantizes a bf16 / fp16 checkpoint at load time",
    )
    g.add_argument("--enforce-eager", action="store_true")
    g.add_argument(
        "--mem-fraction-static",
        type=fraction,
        default=None,
        metavar="F",
        help="SGLang (default: the version's rule)",
    )
    g.add_argument(
        "--page-size",
        type=int_at_least(1),
        default=None,
        metavar="N",
        help="SGLang page size (default 1)",
    )
    g.add_argument(
        "--disable-piecewise-cuda-graph",
        action="store_true",
        default=None,
        help="SGLang (default: the release's: on from 0.5.10 where its rules allow)",
    )
    add_sglang_pool_args(g)  # --max-total-tokens and the mamba pool's flags
    g.add_argument(
        "--enable-extensible-kv-cache",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="vLLM >= 0.34 (default: on on CUDA and ROCm): size the KV cache after warmup",
    )
    g.add_argument(
        "--enable-prefix-caching",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="vLLM (default: the release's): the pages a linear layer's state takes",
    )
    for flag, what in (
        ("--mamba-cache-dtype", "both states"),
        ("--mamba-ssm-cache-dtype", "the temporal state"),
    ):
        g.add_argument(
            flag,
            choices=("auto", "float32", "float16", "bfloat16"),
            default="auto",
            help=f"vLLM: the linear layers' {what} (choices by release)",
        )
    g.add_argument(
        "--mamba-cache-mode",
        choices=("all", "align", "none"),
        default=None,
        help="vLLM 0.16-0.32: the linear layers' prefix-cache mode (choices by release)",
    )
    add_speculative_args(g)  # and --attention-backend, --enable-multimodal
    g.add_argument(
        "--target-concurrency",
        type=fraction,
        default=None,
        metavar="C",
        help="also print the setting that reaches C requests of --seq tokens",
    )


def _refuse_kvcalc_only(args) -> None:
    for name, default in KVCALC_DEFAULTS.items():
        if getattr(args, name, default) != default:
            flag = "--" + name.replace("_", "-")
            raise ValueError(
                f"'{flag}' is not an engine setting: with --engine use the engine's "
                "own (--max-num-batched-tokens; --calibration for the overheads)"
            )


def engine_settings(args, spec) -> dict:
    _refuse_kvcalc_only(args)
    tp = args.tp or args.gpus
    if args.gpus % tp:
        raise ValueError(f"'gpus' must be a multiple of tp={tp} (pp = gpus / tp): got {args.gpus}")
    s = {
        "version": args.engine_version,
        "tensor_parallel_size": tp,
        "pipeline_parallel_size": args.gpus // tp,
        "data_parallel_size": args.dp,
        "enable_expert_parallel": args.enable_expert_parallel or None,
        "max_model_len": args.seq,
        "kv_cache_dtype": args.kv or "auto",
    }
    if args.engine == "vllm":
        refuse_sglang_flags(args)
        s.update(
            decode_context_parallel_size=args.decode_context_parallel_size,
            gpu_memory_utilization=args.util,
            block_size=args.block_size,
            max_num_batched_tokens=args.max_num_batched_tokens,
            max_num_seqs=args.max_num_seqs,
            enforce_eager=args.enforce_eager or None,
            quantization=args.quantization,
            mamba_cache_dtype=args.mamba_cache_dtype,
            mamba_ssm_cache_dtype=args.mamba_ssm_cache_dtype,
            enable_prefix_caching=args.enable_prefix_caching,
            mamba_cache_mode=args.mamba_cache_mode,
            attention_backend=args.attention_backend,
            enable_extensible_kv_cache=args.enable_extensible_kv_cache,
            num_gpu_blocks_override=args.num_gpu_blocks_override,
            kv_cache_memory_bytes=args.kv_cache_memory_bytes,
            language_model_only=args.language_model_only or False,
            limit_mm_per_prompt=args.limit_mm_per_prompt,
            skip_mm_profiling=args.skip_mm_profiling or False,
            cpu_offload_gb=args.cpu_offload_gb or 0,
            mm_encoder_tp_mode=args.mm_encoder_tp_mode or "weights",
            **lora_settings(args),
            **({"max_model_len": -1} if args.auto_max_model_len else {}),
        )
        if args.speculative_config is not None:
            method, tokens = parse_speculative_config(args.speculative_config)
            s.update(speculative_method=method, num_speculative_tokens=tokens)
    else:
        refuse_vllm_flags(args)
        s.update(
            mem_fraction_static=args.mem_fraction_static,
            page_size=args.page_size,
            max_running_requests=args.max_running_requests,
            max_total_tokens=args.max_total_tokens,
            enable_dp_attention=args.enable_dp_attention or None,
            enable_dp_lm_head=args.enable_dp_lm_head or None,
            moe_dense_tp_size=args.moe_dense_tp_size,
            disable_piecewise_cuda_graph=args.disable_piecewise_cuda_graph,
            max_mamba_cache_size=args.max_mamba_cache_size,
            mamba_full_memory_ratio=args.mamba_full_memory_ratio,
            disable_radix_cache=args.disable_radix_cache,
            mamba_ssm_dtype=args.mamba_ssm_dtype,
            enable_multimodal=args.enable_multimodal,
            mm_feature_transport=args.mm_feature_transport,
            cpu_offload_gb=args.cpu_offload_gb or 0,
            speculative_algorithm=args.speculative_algorithm,
            **{f"speculative_{n}": getattr(args, f"speculative_{n}") for n in NUMBER_NAMES},
        )
    return s
