"""The seed lecture notes' numbers, recomputed from the presets: which hold and which are wrong.

The claims live in calc/data/errata_claims.toml, quoted exactly as the notes print them with the
file, section and line they come from (the notes themselves are not part of this repository);
kvcalc's value is computed when `check_errata()` runs, from the preset, through the same API the
CLI uses. The verdict compares the two: head counts exactly; a size written as "≈ 5.2 GB" to the
precision it is written in (5.2 means [5.15, 5.25]), in decimal GB *or* binary GiB, so a claim is
not marked wrong for picking either unit.

>>> [e.verdict for e in check_errata().rows if e.model == "llama-1-65b"]
['correct', 'wrong']
"""

from __future__ import annotations

import functools
from typing import Literal

from calc.results import Result

GB, GIB = 10**9, 2**30  # SI and IEC byte units
CLAIMS_FILE = "data/errata_claims.toml"  # inside the calc package


class Erratum(Result):
    subject: str  # what the claim is about: "PaLM 540B heads"
    claim: str  # the notes' words, quoted exactly (whitespace runs collapsed)
    source: str  # notes file, section and line
    model: str  # the preset it is checked against
    claimed: str  # the claimed value, short
    kvcalc: str  # kvcalc's value, short, with units
    claimed_values: dict[str, float]
    kvcalc_values: dict[str, float]
    verdict: Literal["correct", "wrong"]
    explanation: str


class ErrataReport(Result):
    rows: list[Erratum]
    n_wrong: int


# --- the claims, as written (calc/data/errata_claims.toml) -------------------------------------


@functools.cache
def claims() -> dict:
    """The data file: notes, definitions, and the heads / savings / kv claims."""
    from importlib import resources

    from calc.datafiles import parse_toml

    text = (resources.files("calc") / CLAIMS_FILE).read_text(encoding="utf-8")
    return parse_toml(text, origin=f"calc/{CLAIMS_FILE}")


def _quote(c: dict) -> str:
    return " ".join(c["quote"].split())


def _source(c: dict) -> str:
    """'000_db246fcb19f289a2.txt §11.6 table, line 490': the notes file, section and line."""
    where = f"lines {c['lines']}" if "lines" in c else f"line {c['line']}"
    return f"{claims()['notes'][c['notes']]['file']} {c['ref']}, {where}"


# Why a wrong row is wrong, beyond the numbers (facts about the sources, cited).
HEAD_REMARKS: dict[str, str] = {
    "palm-540b": "PaLM paper (arXiv 2204.02311) Table 1 lists 48 heads with d_head 256 and "
    "Section 2 shares one key/value head across them (multi-query); 16 heads is PaLM 8B's "
    "count (same table).",
    "falcon-40b": "Falcon 40B's config.json has num_attention_heads 128 and num_kv_heads 8 "
    "(new_decoder_architecture: grouped K/V); one KV head (multi-query) is Falcon 7B's layout "
    "(71 query heads, multi_query true in its config.json).",
}


# --- checks -----------------------------------------------------------------------------------


def _heads(spec) -> str:
    return (
        f"{spec.num_attention_heads} query / {spec.n_kv_heads} KV "
        f"head{'s' if spec.n_kv_heads > 1 else ''}, "
        f"head_dim {spec.head_dim} ({spec.attention_kind})"
    )


def _head_rows(c: dict) -> list[Erratum]:
    from calc.presets import load_preset

    label, name, h, g, kind = c["label"], c["model"], c["query_heads"], c["kv_heads"], c["kind"]
    spec = load_preset(name)
    H, G = spec.num_attention_heads, spec.n_kv_heads
    source = _source(c)
    ok = (H, G, spec.attention_kind) == (h, g, kind.split()[0])
    where = spec.source[0] if spec.source else "the preset"
    explanation = (
        f"{spec.label} has {_heads(spec)}, as the table says ({where})."
        if ok
        else f"{spec.label} has {_heads(spec)}, not {h} / {g} ({kind.split()[0]}). "
        + HEAD_REMARKS.get(name, f"Source: {where}.")
    )
    rows = [
        Erratum(
            subject=f"{label} heads",
            claim=_quote(c),
            source=source,
            model=name,
            claimed=f"{h} / {g} {kind.split()[0]}",
            kvcalc=f"{H} / {G} {spec.attention_kind}",
            claimed_values={"num_attention_heads": h, "num_key_value_heads": g},
            kvcalc_values={"num_attention_heads": H, "num_key_value_heads": G},
            verdict="correct" if ok else "wrong",
            explanation=explanation,
        )
    ]
    if "groups" in kind:  # "GQA (8 groups)": §11.4 defines G = number of KV groups
        n = int(kind.split("(")[1].split()[0])
        definition = claims()["definitions"]["groups"]
        rows.append(
            Erratum(
                subject=f"{label} KV groups",
                claim=_quote(c),
                source=source,
                model=name,
                claimed=f"{n} groups",
                kvcalc=f"{G} groups of {spec.kv_groups} query heads",
                claimed_values={"groups": n},
                kvcalc_values={"groups": G, "query_heads_per_group": spec.kv_groups},
                verdict="correct" if n == G else "wrong",
                explanation=(
                    f"{G} KV heads are {G} groups of {spec.kv_groups} query heads each."
                    if n == G
                    else f"The notes define G as the number of KV groups ({definition['ref']}, "
                    f"line {definition['line']}: '{_quote(definition)}', i.e. "
                    f"{definition['meaning']}), which for {spec.label} is {G} ({G} KV heads); "
                    f"{n} is the number of query heads per group ({H} / {G})."
                ),
            )
        )
    return rows


def _savings_row(c: dict) -> Erratum:
    from calc.presets import load_preset
    from calc.reports import compare_attention
    from calc.units import percent

    label, name, h, g, claimed_pct = c["label"], c["model"], c["H"], c["G"], c["saving_pct"]
    spec = load_preset(name)
    own = next(r for r in compare_attention(spec).rows if r.variant == "GQA")  # its own G
    pct = 100 * own.savings
    ok = (spec.num_attention_heads, spec.n_kv_heads) == (h, g) and abs(pct - claimed_pct) < 5e-3
    H, G = spec.num_attention_heads, own.kv_heads
    return Erratum(
        subject=f"{label} KV-cache saving",
        claim=_quote(c),
        source=_source(c),
        model=name,
        claimed=f"H={h}, G={g}: {claimed_pct:g}%",
        kvcalc=f"H={H}, G={G}: {percent(own.savings)}",
        claimed_values={"H": h, "G": g, "saving_pct": claimed_pct},
        kvcalc_values={"H": H, "G": G, "saving_pct": pct},
        verdict="correct" if ok else "wrong",
        explanation=f"Saving = 1 - G/H = 1 - {G}/{H} = {percent(own.savings)}"
        + ("." if ok else f" ({spec.label} has {H} query heads, not {h})."),
    )


def claim_matches(value_bytes: int, claimed: str) -> bool:
    """Does `claimed` (GB, as written) round to the value in GB or in GiB?"""
    decimals = len(claimed.split(".")[1]) if "." in claimed else 0
    half_ulp = 0.5 * 10.0**-decimals
    return any(abs(value_bytes / unit - float(claimed)) <= half_ulp for unit in (GB, GIB))


def _kv_row(c: dict) -> Erratum:
    from calc.dtypes import dtype_bits
    from calc.kvcache import kv_cache_bytes
    from calc.presets import load_preset
    from calc.units import fmt_bytes, group, iec_bytes, si_bytes

    name, seq_len, dtype, claimed = c["model"], c["seq_len"], c["dtype"], c["claimed_gb"]
    spec = load_preset(name)
    b = kv_cache_bytes(spec, seq_len, 1, dtype)
    H, G, L, d = spec.num_attention_heads, spec.n_kv_heads, spec.num_hidden_layers, spec.head_dim
    product = f"2 x {L} layers x {G} KV heads x {d} head_dim x {seq_len} tokens x " + (
        f"{dtype_bits(dtype) // 8} B"
    )
    ok = claim_matches(b, claimed)
    if ok:
        why = f"{product} = {fmt_bytes(b)}."
    elif G == H:
        why = (
            f"The product is right ({spec.label} is MHA: {G} KV heads) but {product} = "
            f"{group(b)} B, i.e. {si_bytes(b)} (10^9 B) or {iec_bytes(b)} (2^30 B); "
            f"{claimed} GB is neither."
        )
    else:
        mha = kv_cache_bytes(spec.replace(num_key_value_heads=H), seq_len, 1, dtype)
        why = (
            f"{spec.label} uses {spec.attention_kind} with {G} KV heads (of {H} query heads), so "
            f"one sequence needs {product} = {fmt_bytes(b)}. The note's formula uses n_heads; "
            f"even all {H} heads as KV heads (MHA) would give {si_bytes(mha)}, not {claimed} GB. "
            f"{claimed} GB holds about {float(claimed) * GB / b:.0f} such sequences."
        )
    return Erratum(
        subject=c["label"],
        claim=_quote(c),
        source=_source(c),
        model=name,
        claimed=f"≈ {claimed} GB",
        kvcalc=f"{si_bytes(b)} = {iec_bytes(b)}",
        claimed_values={"GB": float(claimed)},
        kvcalc_values={"bytes": b, "GB": b / GB, "GiB": b / GIB},
        verdict="correct" if ok else "wrong",
        explanation=why,
    )


def check_errata() -> ErrataReport:
    """Every claim in calc/data/errata_claims.toml, checked against the presets as they are."""
    data = claims()
    rows: list[Erratum] = []
    for c in data["heads"]:
        rows.extend(_head_rows(c))
    rows.extend(_savings_row(c) for c in data["savings"])
    rows.extend(_kv_row(c) for c in data["kv"])
    return ErrataReport(rows=rows, n_wrong=sum(e.verdict == "wrong" for e in rows))
