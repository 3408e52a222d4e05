"""What the pages show, as DataFrames: cached calls into calc, and config.json uploads.

No formulas here: every number comes from a calc function; this file only arranges the results
into long-form tables (one row per point) that charts.py draws and the CSV buttons export
(the attention page's tables are in attention_data.py).
Units: raw bytes / FLOPs in the `_bytes` / `_flops` columns, plus `_GiB` (2^30 B) for axes.
But: caching is per process (st.cache_data); frozen specs hash by their JSON.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import PurePath

import pandas as pd
import streamlit as st

import calc
from calc.datafiles import decode_text, parse_json_object
from dashboard.shared_model import KEY as CUSTOM_KEY

GIB = 2**30  # IEC gibibyte: the unit of every memory axis here
GB = 10**9  # SI gigabyte: what GPU datasheets print
KIB = 2**10  # IEC kibibyte: KV bytes per token
CUSTOM = "custom"  # the model built or uploaded on the Model page (this session, or the URL)
_HASH = {calc.ModelSpec: lambda s: s.model_dump_json()}
_INT64 = 2**63 - 1
MAX_UPLOAD_BYTES = 1_000_000  # calc.datafiles.MAX_FILE_BYTES: configs are a few KB


# --- models -----------------------------------------------------------------------------------


def presets() -> dict[str, calc.ModelSpec]:
    """Every shipped preset, by name (load_preset caches each file)."""
    return {name: calc.load_preset(name) for name in calc.list_presets()}


def families() -> dict[str, list[str]]:
    """Preset names grouped by `family`, families and names sorted."""
    out: dict[str, list[str]] = {}
    for name, spec in presets().items():
        out.setdefault(spec.family, []).append(name)
    return {f: sorted(out[f]) for f in sorted(out)}


def model_options() -> list[str]:
    """Preset names grouped by family, then the session's custom model if there is one."""
    names = [n for group in families().values() for n in group]
    return names + ([CUSTOM] if CUSTOM_KEY in st.session_state else [])


def resolve(name: str) -> calc.ModelSpec:
    if name == CUSTOM:
        spec = st.session_state.get(CUSTOM_KEY)
        if spec is None:
            raise ValueError("no custom model yet: build or upload one on the Model page")
        return spec
    return calc.load_preset(name)


def model_label(name: str) -> str:
    """'Llama 2 70B (llama-2)' for a selectbox; the custom model says what it is."""
    if name == CUSTOM:
        spec = st.session_state.get(CUSTOM_KEY)
        return f"custom: {spec.label}" if spec is not None else "custom"
    spec = calc.load_preset(name)
    return f"{spec.label} ({spec.family})"


def default_models(wanted: Sequence[str], n: int = 3) -> list[str]:
    """`wanted` where shipped, else the first `n` presets."""
    names = calc.list_presets()
    have = [w for w in wanted if w in names]
    return have or names[:n]


# --- uploads ----------------------------------------------------------------------------------


def parse_upload(filename: str, content: bytes) -> calc.ModelSpec:
    """A spec from an uploaded config.json: JSON only, at most 1 MB, parsed, never executed.

    A Hugging Face config (it has `model_type`) goes through calc.hf.from_hf_config and is named
    after the file, or after `architectures` when the file is just "config.json"; any other
    object must hold ModelSpec fields. Errors name the file (once) and the problem.
    """
    if not filename.lower().endswith(".json"):
        raise ValueError(f"{filename}: upload must be a .json file: got {filename!r}")
    if len(content) > MAX_UPLOAD_BYTES:
        raise ValueError(
            f"{filename}: file must be at most {MAX_UPLOAD_BYTES:,} bytes (1 MB): "
            f"got {len(content):,} bytes"
        )
    data = parse_json_object(decode_text(content, filename), origin=filename)
    try:
        return calc.resolve_model(data, origin=filename, name=upload_name(filename, data))
    except ImportError as e:
        raise ValueError(f"{filename}: config.json import is not available: {e}") from None
    except ValueError as e:
        msg = calc.format_error(e)
        raise ValueError(msg if msg.startswith(filename) else f"{filename}: {msg}") from None


def upload_name(filename: str, data: dict) -> str:
    """What an uploaded Hugging Face config is called: its `_name_or_path`, else the file's
    name ("llama-2-7b.json" -> "llama-2-7b"), else its first `architectures` entry with the
    file name ("LlamaForCausalLM (config.json)")."""
    named = data.get("_name_or_path")
    if isinstance(named, str) and named.strip():
        return named.strip()[:200]
    stem = PurePath(filename).stem
    if stem.lower() != "config":
        return stem[:200]
    arch = data.get("architectures")
    if isinstance(arch, list) and arch and isinstance(arch[0], str) and arch[0].strip():
        return f"{arch[0].strip()[:200]} ({filename})"
    return f"{data.get('model_type')} model ({filename})"


def arrow_safe(df: pd.DataFrame) -> pd.DataFrame:
    """`df` with integers past int64 as floats: Arrow (hence every chart and table) refuses
    Python ints that large, and a bounded but huge model can reach them (10^21 parameters)."""
    out = None
    for col in df.columns:
        if df[col].dtype == object and any(
            isinstance(v, int) and not isinstance(v, bool) and abs(v) > _INT64 for v in df[col]
        ):
            out = df.copy() if out is None else out
            out[col] = df[col].astype(float)
    return df if out is None else out


# --- grids ------------------------------------------------------------------------------------


def context_grid(max_tokens: int, min_tokens: int = 128, per_octave: int = 4) -> list[int]:
    """Token counts spaced evenly on a log axis, every power of two included (e.g. 4096)."""
    out = set()
    k = 0
    while True:
        n = round(min_tokens * 2 ** (k / per_octave))
        if n > max_tokens:
            break
        out.add(n)
        k += 1
    out.update(2**i for i in range(int(math.log2(min_tokens)), int(math.log2(max_tokens)) + 1))
    out.add(max_tokens)
    return sorted(n for n in out if min_tokens <= n <= max_tokens)


# --- frames -----------------------------------------------------------------------------------


@st.cache_data(hash_funcs=_HASH, max_entries=64, show_spinner=False)
def param_frame(spec: calc.ModelSpec) -> pd.DataFrame:
    report = calc.params_report(spec)
    df = arrow_safe(report.to_frame())
    df["share"] = df["params"] / report.total
    return df


@st.cache_data(hash_funcs=_HASH, max_entries=64, show_spinner=False)
def kv_frame(
    specs: tuple[calc.ModelSpec, ...], seq_lens: tuple[int, ...], batch: int, dtype: str
) -> pd.DataFrame:
    """KV-cache bytes for each model at each context length (calc.sweep)."""
    df = arrow_safe(calc.sweep(list(specs), list(seq_lens), [batch], [dtype]))
    labels = {s.name: s.label for s in specs}
    df.insert(1, "label", df["model"].astype(str).map(labels))
    df["kv_cache_GiB"] = df["kv_cache_bytes"] / GIB
    df["kv_cache_GB"] = df["kv_cache_bytes"] / GB
    context = {s.name: s.max_position_embeddings for s in specs}
    df["context_tokens"] = df["model"].astype(str).map(context)
    df["beyond_context"] = df["seq_len"] > df["context_tokens"]  # past the model's own limit
    return df[
        ["model", "label", "seq_len", "batch", "dtype", "kv_cache_bytes", "kv_cache_GiB"]
        + ["kv_cache_GB", "kv_bytes_per_token", "context_tokens", "beyond_context"]
    ]


def same_kv_groups(df: pd.DataFrame) -> list[list[str]]:
    """Labels whose KV curves coincide (equal bytes at every context length): their lines
    overlap, so the page names them."""
    curves: dict[tuple, list[str]] = {}
    for label, g in df.groupby("label", sort=False):
        curves.setdefault(tuple(g.sort_values("seq_len")["kv_cache_bytes"]), []).append(label)
    return [labels for labels in curves.values() if len(labels) > 1]


@st.cache_data(hash_funcs=_HASH, max_entries=64, show_spinner=False)
def variants_frame(spec: calc.ModelSpec, seq_len: int, batch: int, dtype: str) -> pd.DataFrame:
    """The model as MHA, GQA and MQA (calc.compare_attention)."""
    df = arrow_safe(calc.compare_attention(spec, seq_len, batch, dtype).to_frame())
    df["kv_cache_GiB"] = df["kv_cache_bytes"] / GIB
    return df


# --- errata -----------------------------------------------------------------------------------


@st.cache_data(show_spinner=False)
def errata_frame() -> pd.DataFrame:
    """The seed notes' claims, checked against the presets (calc.errata), with each family."""
    from calc.errata import check_errata

    df = check_errata().to_frame()
    df["family"] = [calc.load_preset(m).family for m in df["model"]]
    return df


def errata_for(spec: calc.ModelSpec) -> pd.DataFrame:
    """Claims about this model's family (the exact model's first); empty when none apply."""
    df = errata_frame()
    df = df[df["family"] == spec.family].copy()
    df["this model"] = df["model"] == spec.name
    return df.sort_values("this model", ascending=False, kind="stable")


# --- compare ----------------------------------------------------------------------------------


@st.cache_data(hash_funcs=_HASH, max_entries=64, show_spinner=False)
def compare_frame(specs: tuple[calc.ModelSpec, ...], seq_len: int, dtype: str) -> pd.DataFrame:
    """One row per model: sizes, attention layout and KV cache (one sequence of seq_len)."""
    rows = []
    for s in specs:
        kv = calc.kv_cache_bytes(s, seq_len, 1, dtype)
        rows.append(
            {
                "model": s.name,
                "label": s.label,
                "family": s.family,
                "params": calc.param_count(s),
                "active_params": calc.active_param_count(s),
                "attention": s.attention_kind,
                "query_heads": s.num_attention_heads,
                "kv_heads": s.n_kv_heads,
                "head_dim": s.head_dim,
                "layers": s.num_hidden_layers,
                "context_tokens": s.max_position_embeddings,
                "sliding_window": s.sliding_window,
                "kv_bytes_per_token": calc.kv_bytes_per_token(s, dtype),
                "kv_per_token_KiB": calc.kv_bytes_per_token(s, dtype) / KIB,
                "kv_cache_bytes": kv,
                "kv_cache_GiB": kv / GIB,
                "beyond_context": seq_len > s.max_position_embeddings,
            }
        )
    return arrow_safe(pd.DataFrame(rows))
