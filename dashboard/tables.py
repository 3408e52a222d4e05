"""Tables for people: calc's results as text cells, every number formatted (thousands
separators, units named in the header, latencies in ms / s / h / days, yes / no for flags, a dash
for nothing). Pure `... -> DataFrame` of strings; ui.table shows them (escaped, unclipped).

>>> num(15303.254660), num(0.0000008), num(None), yes_no(False)
('15,303', '8.0e-07', '—', 'no')
"""

from __future__ import annotations

import math

import pandas as pd

from calc import units

DASH = "—"
MAMBA_FLAGS = ("use_conv_bias", "mamba_proj_bias")


def num(x, digits: int = 0) -> str:
    """A number for a table: thousands separators; tiny non-zero values in scientific."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return DASH
    if isinstance(x, bool):
        return yes_no(x)
    if x != 0 and abs(x) < 10 ** -max(digits, 2):
        return f"{x:.1e}"
    if digits == 0 and isinstance(x, float) and 0 < abs(x) < 1:
        return f"{x:.2g}"  # not "0"
    return f"{x:,.{digits}f}"


def yes_no(flag) -> str:
    return DASH if flag is None else ("yes" if flag else "no")


def gib(n_bytes) -> str:
    return DASH if n_bytes is None else units.iec_bytes(n_bytes)


def spec_rows(spec, meta: tuple[str, ...]) -> pd.DataFrame:
    """field | value for every shape field of the spec (metadata left out). A nested block
    (rope_scaling, vision) gives one row per set sub-field, "vision · hidden_size" (the spaces
    let a narrow column wrap the name rather than push the values out of sight); layer runs
    read "dense × 3, sparse × 58"."""
    rows = []
    if (
        spec.mamba_num_heads is None
    ):  # the Mamba-2 flags have defaults, shown only with mamba layers
        meta = (*meta, *MAMBA_FLAGS)
    for k, v in spec.model_dump(by_alias=True).items():
        if k in meta or v is None:
            continue
        if isinstance(v, dict):
            rows += [(f"{k} · {s}", _cell(x)) for s, x in v.items() if x is not None]
        else:
            rows.append((k, _cell(v)))
    rows.append(("head_dim (effective)", num(spec.head_dim)))
    return pd.DataFrame(rows, columns=["field", "value"])


def _cell(v) -> str:
    if isinstance(v, bool):
        return yes_no(v)
    if isinstance(v, int):
        return num(v)
    if isinstance(v, list | tuple):
        if v and all(isinstance(r, list | tuple) and len(r) == 2 for r in v):  # (kind, count) runs
            return ", ".join(f"{kind} × {_cell(n)}" for kind, n in v)
        return ", ".join(_cell(x) for x in v)
    return str(v)


def variants(vdf: pd.DataFrame) -> pd.DataFrame:
    """MHA / GQA / MQA / MLA / sliding / linear rows; G / H as the fraction it is (8/64, not
    0.125); a dash where a variant has no KV heads (MLA's latent, linear attention's state)."""
    H = int(vdf.loc[vdf["variant"] == "MHA", "kv_heads"].iloc[0])  # MHA: one KV head per query head

    def heads(g) -> str | None:
        return None if pd.isna(g) else int(g)

    return pd.DataFrame(
        {
            "variant": vdf["variant"],
            "G / H": [DASH if heads(g) is None else f"{heads(g)}/{H}" for g in vdf["kv_heads"]],
            "KV / token": [units.iec_bytes(b) for b in vdf["kv_bytes_per_token"]],
            "KV cache": [units.iec_bytes(b) for b in vdf["kv_cache_bytes"]],
            "prefill attn": [units.si_flops(f) for f in vdf["prefill_attention_flops"]],
            "decode attn": [units.si_flops(f) for f in vdf["decode_attention_flops"]],
            "saving vs MHA": [units.percent(s) for s in vdf["savings"]],
        }
    )


def phases(roofline_frame: pd.DataFrame) -> pd.DataFrame:
    """Roofline phases: context, arithmetic intensity, bound, time."""
    df = roofline_frame
    return pd.DataFrame(
        {
            "phase": df["phase"].str.replace("_", " "),
            "context (tokens)": [num(n) for n in df["context_tokens"]],
            "FLOP / byte": [num(x, 1 if x < 100 else 0) for x in df["arithmetic_intensity"]],
            "bound": df["bound"],
            "time": [units.fmt_duration(t) for t in df["time_s"]],
        }
    )


def fewest(few: pd.DataFrame, max_gpus: int) -> pd.DataFrame:
    rows = []
    for r in few.itertuples():
        if r.fits:
            cells = (num(r.gpus), num(r.tp), num(r.pp), gib(r.weight_bytes))
            rows.append((r.label, "yes", *cells, num(r.max_concurrent_seqs)))
        else:
            rows.append((r.label, f"no (up to {max_gpus:,} GPUs)", DASH, DASH, DASH, DASH, DASH))
    cols = ["GPU", "fits", "GPUs", "TP", "PP", "weights per GPU", "max sequences"]
    return pd.DataFrame(rows, columns=cols)


def compare(df: pd.DataFrame, mc: pd.DataFrame) -> pd.DataFrame:
    """One row per model: sizes, attention layout, KV and the longest context on the GPUs."""
    longest = []
    for n, note, ctx in zip(
        mc["max_context_tokens"], mc["note"], df["context_tokens"], strict=True
    ):
        if note:
            longest.append(note)
        elif n is None or (isinstance(n, float) and math.isnan(n)):
            longest.append(DASH)
        else:
            longest.append(num(n) + (" (past the model's context)" if n > ctx else ""))
    return pd.DataFrame(
        {
            "model": df["label"],
            "params": [units.human_count(p) for p in df["params"]],
            "active": [units.human_count(p) for p in df["active_params"]],
            "attention": df["attention"],
            "query / KV heads": [
                f"{h} / {g}" for h, g in zip(df["query_heads"], df["kv_heads"], strict=True)
            ],
            "context (tokens)": [num(c) for c in df["context_tokens"]],
            "KV per token": [units.iec_bytes(b) for b in df["kv_bytes_per_token"]],
            "KV at the context chosen": [
                units.iec_bytes(b) + (" (past the model's context)" if beyond else "")
                for b, beyond in zip(df["kv_cache_bytes"], df["beyond_context"], strict=True)
            ],
            "longest context on the GPUs": longest,
        }
    )


def errata(err: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "claim about": err["subject"],
            "the notes say (quoted)": err["claim"],
            "where": err["source"],
            "kvcalc computes": err["kvcalc"],
            "verdict": err["verdict"],
            "why": err["explanation"],
        }
    )


def validation_summary(rows: list[dict]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "check": [r["check"] for r in rows],
            "comparisons": [num(r["comparisons"]) for r in rows],
            "failed": [num(r["failed"]) for r in rows],
            "largest relative error": [num(r["max_rel_error"], 2) for r in rows],
            "largest absolute error": [num(r["max_abs_error_of_absolute_checks"], 2) for r in rows],
        }
    )


def checks(df: pd.DataFrame, cols: list[str]) -> pd.DataFrame:
    """Validation comparisons with readable numbers."""
    out = df[cols].copy()
    for c in ("predicted", "measured"):
        if c in out:
            out[c] = [num(v, 0 if float(v).is_integer() else 4) for v in out[c]]
    for c in ("rel_error", "tolerance"):
        if c in out:
            out[c] = [num(v, 2) for v in out[c]]
    return out


def engine_inverse(inv: pd.DataFrame, concurrency: int, length: int) -> pd.DataFrame:
    """engine_data.engine_inverse_frame for people: a fraction to 2 places, counts with
    separators, "not reachable" where no value reaches the target."""
    head = f"reaches {concurrency:,} × {length:,} tokens"

    def shown(setting, v) -> str:
        if v is None or (isinstance(v, float) and math.isnan(v)):
            return "not reachable"
        if setting == "kv_cache_memory_bytes":  # bytes, as the flag takes them, and in GiB
            return f"{int(v):,} ({int(v) / 2**30:,.2f} GiB)"
        return f"{v:.2f}" if isinstance(v, float) and v < 1 else f"{int(v):,}"

    cells = [shown(k, v) for k, v in zip(inv["setting"], inv["value"], strict=True)]
    return pd.DataFrame({"setting": inv["setting"], head: cells})
