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
from calc.serving.cli_settings import add_engine_args, engine_settings, fraction

__all__ = ["add_commands", "add_engine_args", "cmd_engine_plan"]


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
        type=fraction,
        default=None,
        metavar="F",
        help="the run's gpu_memory_utilization (default: the log's, else the release's)",
    )
    p.add_argument("--weights", default=None, metavar="D", help="--dtype (default: auto)")
    p.add_argument(
        "--kv-cache-memory-bytes",
        "--kv-cache-memory",
        dest="kv_cache_memory_bytes",
        default=None,
        metavar="B",
        help="vLLM: the run's flag (default: the log's non-default args, else its reserved GiB)",
    )
    p.add_argument("--out", default=None, metavar="FILE", help="save the calibration here")


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
        if p.engine == "sglang" and p.speculative_method:
            draft = "not computed (the draft checkpoint's own config)"
            if p.draft_kv_size_gib is not None:
                draft = (
                    f"{p.draft_kv_size_gib} GiB, {p.draft_layers} MTP layer(s): the 2nd pool line"
                )
            held = ""
            if p.draft_weights_bytes:
                held = f"; draft weights {p.draft_weights_bytes / 2**30:.2f} GiB before the pool"
            print(
                f"speculative {p.speculative_method}: {p.num_speculative_tokens} draft tokens, "
                f"max_running_requests {p.max_running_requests}; draft pool {draft}{held}"
            )
        if inverse:
            print(f"for {args.target_concurrency:g} requests of {p.max_model_len:,} tokens:")
            print_pairs([(k, "not reachable" if v is None else v) for k, v in inverse.items()])
    return 2 if p.refusal else 0


def _inverse(args, spec, hw, settings) -> dict:
    from calc.serving import inverse as inv

    c, e = args.target_concurrency, args.engine
    kv_set = bool(settings.get("kv_cache_memory_bytes"))  # then no answer derives the memory
    if settings.get("speculative_method") and not kv_set:  # each answer derives the memory
        raise ValueError(
            "'--target-concurrency' derives the available memory for each setting it tries, "
            "which speculative decoding does not allow (calc.serving.vllm_spec): drop it"
        )
    key, value = inv.memory_setting_for(spec, hw, e, c, **settings)
    return {
        key: value,
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
        "kv_cache_memory_bytes": args.kv_cache_memory_bytes,
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
