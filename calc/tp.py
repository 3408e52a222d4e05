"""Which tensor-parallel degrees a model allows on N GPUs, and which to pick when none is given.

The rules are calc.sharding.check_split's (tp divides the query heads, and divides or is a
multiple of the KV heads; pp = gpus / tp stages of at most one layer each): the split's own, for
the generic planner and the engines alike (a model the generic planner does not plan is refused
there, by name, not here). This module only searches them, so the CLI (`kvcalc plan --gpus 3`)
and the dashboard's TP menu offer what works and say why the rest does not.

>>> from calc.presets import load_preset
>>> valid_tps(load_preset("llama-2-70b"), 8)     # 64 query heads, 8 KV heads
[1, 2, 4, 8]
>>> pick_tp(load_preset("llama-2-70b"), 3)[0]    # tp=3 splits no head count: one stage per GPU
1
"""

from __future__ import annotations

from calc.errors import check_count
from calc.sharding import check_plannable, check_split
from calc.spec import ModelSpec


def tp_problem(spec: ModelSpec, gpus: int, tp: int) -> str | None:
    """Why `tp` does not work for `spec` on `gpus` GPUs, or None when it does."""
    if gpus % tp:
        return f"'tp' must divide gpus={gpus} (pp = gpus / tp): got {tp}"
    try:
        check_split(spec, tp, gpus // tp)
    except ValueError as e:
        return str(e)
    return None


def valid_tps(spec: ModelSpec, gpus: int) -> list[int]:
    """Every tensor-parallel degree that works for `spec` on `gpus` GPUs, ascending."""
    gpus = check_count("gpus", gpus)
    return [t for t in range(1, gpus + 1) if gpus % t == 0 and tp_problem(spec, gpus, t) is None]


def tp_rule(spec: ModelSpec) -> str:
    """The rule in words, for a help text."""
    H, G = spec.num_attention_heads, spec.n_kv_heads
    kv = "" if spec.is_mla else (
        f", and divide or be a multiple of the {G} KV head{'s' if G != 1 else ''}"
    )  # fmt: skip
    return (
        f"tp must divide the GPU count (pp = GPUs / tp), divide the {H} query heads{kv}; pp "
        f"may not exceed the {spec.num_hidden_layers} layers"
    )


def pick_tp(spec: ModelSpec, gpus: int) -> tuple[int, str | None]:
    """The largest tensor-parallel degree that works on `gpus` GPUs (tp = gpus when it can),
    and a note saying why it is not `gpus`, or None. A ValueError when no split works."""
    check_plannable(spec)  # a model the planner refuses is refused for that reason, not its split
    tps = valid_tps(spec, gpus)
    if not tps:
        raise ValueError(
            f"'gpus' cannot be split for {spec.label}: got {gpus} ({tp_rule(spec)}); "
            "no tp dividing the GPU count does that"
        )
    tp = tps[-1]
    if tp == gpus:
        return tp, None
    why = tp_problem(spec, gpus, gpus)
    return tp, (
        f"tp={gpus} (all GPUs) does not work: {why}; using tp={tp}, pp={gpus // tp} "
        f"(tp values that work on {gpus} GPUs: {', '.join(map(str, tps))})"
    )
