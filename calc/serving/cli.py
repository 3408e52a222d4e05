"""`kvcalc plan MODEL --gpu GPU --engine vllm|sglang ...` and `kvcalc calibrate LOGFILE`.

`plan --engine` prints the lines the engine's start-up log prints (weights, available KV cache
memory, GPU KV cache size, maximum concurrency; SGLang's #tokens / K size / V size); `--json`
has weights_gib, available_kv_cache_gib, num_gpu_blocks, gpu_kv_cache_tokens, max_concurrency
(GiB as the engines print them). A deployment the engine would refuse prints the engine's error
and exits 2. `--target-concurrency C` adds the inverse answers for C requests of --seq tokens.
"""

from __future__ import annotations

from calc.cli.args import add_command, add_model_arg, int_at_least
from calc.cli.output import emit_json, fail, print_pairs

KVCALC_DEFAULTS = {"max_batched_tokens": 8192, "reserve_gib": None, "group_size": 128}


def _frac(text: str) -> float:
    return float(text)


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
        help="engine release (default: the newest read, vllm 0.33.0, sglang 0.5.23)",
    )
    g.add_argument(
        "--available-kv-gib",
        type=_frac,
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
        "--dp",
        type=int_at_least(1),
        default=1,
        metavar="N",
        help="data-parallel size (vLLM: expert parallel spans tp x dp; SGLang: tp_size)",
    )
    g.add_argument("--enable-expert-parallel", action="store_true")
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
        type=_frac,
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
    g.add_argument("--max-mamba-cache-size", type=int_at_least(1), default=None, metavar="N")
    g.add_argument("--mamba-full-memory-ratio", type=float, default=None, metavar="R")
    g.add_argument("--disable-radix-cache", action="store_true", default=None)
    g.add_argument("--mamba-ssm-dtype", choices=("float32", "bfloat16"), default=None)
    g.add_argument(
        "--target-concurrency",
        type=_frac,
        default=None,
        metavar="C",
        help="also print the setting that reaches C requests of --seq tokens",
    )


def add_commands(subparsers) -> None:
    p = add_command(
        subparsers,
        "calibrate",
        cmd_calibrate,
        "kvcalc beside each line of a vLLM / SGLang start-up log; save what it learns",
    )
    p.add_argument("logfile", metavar="LOGFILE")
    add_model_arg(p)
    p.add_argument("--gpu", required=True, metavar="GPU")
    p.add_argument("--engine-version", default=None, metavar="V")
    p.add_argument("--tp", type=int_at_least(1), default=1, metavar="N")
    p.add_argument("--pp", type=int_at_least(1), default=1, metavar="N")
    p.add_argument(
        "--util",
        type=_frac,
        default=None,
        metavar="F",
        help="the run's gpu_memory_utilization (default: the log's, else 0.9)",
    )
    p.add_argument("--weights", default=None, metavar="D", help="--dtype (default: auto)")
    p.add_argument("--out", default=None, metavar="FILE", help="save the calibration here")


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
        "kv_cache_dtype": args.kv,
    }
    if args.engine == "vllm":
        for flag, val, default in (
            ("--mem-fraction-static", args.mem_fraction_static, None),
            ("--page-size", args.page_size, None),
            ("--enable-dp-attention", args.enable_dp_attention, False),
            ("--enable-dp-lm-head", args.enable_dp_lm_head, False),
            ("--moe-dense-tp-size", args.moe_dense_tp_size, None),
            ("--disable-piecewise-cuda-graph", args.disable_piecewise_cuda_graph, None),
            ("--max-mamba-cache-size", args.max_mamba_cache_size, None),
            ("--mamba-full-memory-ratio", args.mamba_full_memory_ratio, None),
            ("--disable-radix-cache", args.disable_radix_cache, None),
            ("--mamba-ssm-dtype", args.mamba_ssm_dtype, None),
        ):
            if val != default:
                tail = ": vLLM takes --util / --block-size" if "dp" not in flag else ""
                raise ValueError(f"'{flag}' is an SGLang setting{tail}")
        s.update(
            gpu_memory_utilization=args.util,
            block_size=args.block_size,
            max_num_batched_tokens=args.max_num_batched_tokens,
            max_num_seqs=args.max_num_seqs,
            enforce_eager=args.enforce_eager or None,
            quantization=args.quantization,
        )
    else:
        for flag, val, default in (
            ("--util", args.util, None),
            ("--block-size", args.block_size, None),
            ("--max-num-batched-tokens", args.max_num_batched_tokens, None),
            ("--max-num-seqs", args.max_num_seqs, None),
            ("--quantization", args.quantization, None),
        ):
            if val != default:
                raise ValueError(
                    f"'{flag}' is a vLLM setting: SGLang takes --mem-fraction-static / --page-size"
                )
        s.update(
            mem_fraction_static=args.mem_fraction_static,
            page_size=args.page_size,
            enable_dp_attention=args.enable_dp_attention or None,
            enable_dp_lm_head=args.enable_dp_lm_head or None,
            moe_dense_tp_size=args.moe_dense_tp_size,
            disable_piecewise_cuda_graph=args.disable_piecewise_cuda_graph,
            max_mamba_cache_size=args.max_mamba_cache_size,
            mamba_full_memory_ratio=args.mamba_full_memory_ratio,
            disable_radix_cache=args.disable_radix_cache,
            mamba_ssm_dtype=args.mamba_ssm_dtype,
        )
    return s


def cmd_engine_plan(args) -> int:
    from calc.cli.plan import gpu_arg
    from calc.presets import resolve_model
    from calc.serving.calibrate import load_calibration
    from calc.serving.plan import engine_plan

    spec, hw = resolve_model(args.model), gpu_arg(args.gpu, args.gpu_memory_gib)
    settings = engine_settings(args, spec)
    cal = load_calibration(args.calibration) if args.calibration else None
    p = engine_plan(
        spec,
        hw,
        args.engine,
        available_kv_gib=args.available_kv_gib,
        calibration=cal,
        weight_dtype=args.weights,
        **settings,
    )
    inverse = _inverse(args, spec, hw, settings) if args.target_concurrency else None
    if args.json:
        data = p.model_dump()
        if inverse is not None:
            data["inverse"] = inverse
        emit_json(data)
    else:
        print(
            f"{p.engine} {p.version}: {p.model} on {p.gpu} (tp={p.tensor_parallel_size}, "
            f"pp={p.pipeline_parallel_size}, {p.source})"
        )
        for line in p.log_lines:
            print(f"  {line}")
        if inverse:
            print(f"for {args.target_concurrency:g} requests of {p.max_model_len:,} tokens:")
            print_pairs([(k, "not reachable" if v is None else v) for k, v in inverse.items()])
    return 2 if p.refusal else 0


def _inverse(args, spec, hw, settings) -> dict:
    from calc.serving import inverse as inv

    c, e = args.target_concurrency, args.engine
    key = "gpu_memory_utilization" if e == "vllm" else "mem_fraction_static"
    return {
        key: inv.utilization_for(spec, hw, e, c, **settings),
        "max_model_len": inv.max_model_len_for(spec, hw, e, c, **settings),
        "tensor_parallel_size": inv.tp_for(spec, hw, e, c, **settings),
    }


def cmd_calibrate(args) -> int:
    from calc.serving.calibrate import calibrate, save_calibration

    try:
        text = open(args.logfile, encoding="utf-8", errors="replace").read()
    except OSError as exc:
        return fail(f"cannot read {args.logfile!r}: {exc.strerror}")
    settings = {
        "version": args.engine_version,
        "tensor_parallel_size": args.tp,
        "pipeline_parallel_size": args.pp,
        "gpu_memory_utilization": args.util,
    }
    cal = calibrate(text, args.model, args.gpu, weight_dtype=args.weights, **settings)
    if args.out:
        save_calibration(cal, args.out)
    if args.json:
        emit_json(cal)
        return 0
    print(f"{cal.engine}: {cal.model} on {cal.gpu}")
    for r in cal.rows:
        err = "" if r["error_pct"] is None else f"  ({r['error_pct']:+.2f} %)"
        print(f"  {r['figure']:<34} logged {r['logged']!s:<12} kvcalc {r['kvcalc']!s}{err}")
    print(
        "learned: "
        + ", ".join(
            f"{k}={v}" for k, v in cal.learned.items() if k not in ("engine", "model", "gpu")
        )
    )
    if args.out:
        print(f"saved to {args.out}")
    return 0
