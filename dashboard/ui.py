"""Widgets every page shares: model pickers, dtype / size inputs with their limits, charts with
their CSV, tables for people, and the one place errors are shown.

Pickers and inputs are keyed widgets seeded by state.init, so their values live in the URL. Size
inputs take any integer and say when it is out of range (calc.limits bounds, shown in the label):
`require_valid_inputs()` then stops the page's results, so nothing stale reads as current.
Every text that may hold user input goes through plain.md before a Markdown element shows it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import altair as alt
import pandas as pd
import streamlit as st

import calc
from calc.limits import limit
from dashboard import data, plain, shared_model, state

DTYPE_CHOICES = ("bf16", "fp16", "fp32", "fp8", "int8", "int4")
CONTEXT_CHOICES = tuple(2**k for k in range(10, 21))  # 1K .. 1M tokens
MAX_MODELS = 20  # one distinct colour each (charts.SERIES_COLORS)
_BAD = "_bad_inputs"  # labels of this run's out-of-range inputs


class InvalidInputs(Exception):
    """Raised by require_valid_inputs: an input above is out of range."""


@contextmanager
def guarded() -> Iterator[None]:
    """Show any calc error as one line in st.error, never a traceback, never as Markdown."""
    try:
        yield
    except InvalidInputs:
        st.info("No results until the inputs marked in red above are in range.")
    except Exception as e:  # noqa: BLE001 - the whole point: bad input must not crash a page
        st.error(plain.md(calc.format_error(e)))


def caption(text: str) -> None:
    st.caption(plain.md(text))


def require_valid_inputs() -> None:
    """Raise InvalidInputs (shown by `guarded`) when an input on this run is out of range."""
    if st.session_state.get(_BAD):
        raise InvalidInputs(", ".join(st.session_state[_BAD]))


# --- charts and tables --------------------------------------------------------------------------


@st.cache_resource(max_entries=128, show_spinner=False)
def _chart(_builder, name: str, df: pd.DataFrame, kwargs: tuple):
    return _builder(df, **dict(kwargs))


def chart(builder, df: pd.DataFrame, **kwargs):
    """`builder(df, **kwargs)`, built once per distinct input (Altair validates every object
    it builds: ~15 ms for a layered chart). Charts are not mutated after, so one is shared."""
    return _chart(
        builder, f"{builder.__module__}.{builder.__qualname__}", df, tuple(kwargs.items())
    )


def show_chart(chart: alt.Chart, df: pd.DataFrame, name: str, caption: str | None = None) -> None:
    """The chart, then a button that downloads the exact rows behind it as CSV.

    `usermeta` names the chart in its Vega-Lite spec, so tests can find it by name.
    """
    chart = chart.properties(usermeta={"kvcalc": name})
    st.altair_chart(chart, width="stretch")
    if caption:
        st.caption(plain.md(caption))
    st.download_button(
        f"Download {name}.csv",
        data=lambda: df.to_csv(index=False),
        file_name=f"{name}.csv",
        mime="text/csv",
        key=f"csv_{name}",
        on_click="ignore",
    )


def table(df: pd.DataFrame, right: tuple[str, ...] = ()) -> None:
    """A static table that shows every row and wraps long cells (no clipped columns), its cells
    already formatted as text (dashboard.tables); `right` columns are right-aligned."""
    shown = plain.table(df)
    styler = shown.style.hide(axis="index")
    cols = [plain.md(c) for c in right if c in df.columns]
    if cols:
        # !important: st.table puts text-align: left on every cell itself
        styler = styler.set_properties(subset=cols, **{"text-align": "right !important"})
    st.table(styler, hide_index=True)


# --- models -------------------------------------------------------------------------------------


def model_picker(key: str = "model", label: str = "Model", default: str = "llama-2-70b") -> str:
    """One model: presets grouped by family, then the session's custom model."""
    shared_model.restore()
    options = data.model_options()
    quiet = _note_missing_custom(key)
    state.init(key, data.default_models([default], 1)[0], choices=options, quiet=quiet)
    return st.selectbox(label, options, key=state.wkey(key), format_func=data.model_label)


def models_picker(key: str = "models", default: tuple[str, ...] = ()) -> list[str]:
    shared_model.restore()
    options = data.model_options()
    quiet = _note_missing_custom(key)
    state.init_list(key, data.default_models(default), choices=options, quiet=quiet)
    return st.multiselect(
        f"Models (at most {MAX_MODELS})",
        options,
        key=state.wkey(key),
        format_func=data.model_label,
        max_selections=MAX_MODELS,
    )


def _note_missing_custom(key: str) -> bool:
    """A note when the link names the custom model but this session has none: True if so."""
    if state.wkey(key) in st.session_state or data.CUSTOM_KEY in st.session_state:
        return False
    if data.CUSTOM in st.query_params.get_all(key):
        state.note(
            f"The link's {key}=custom names a model built or uploaded on the Model page in "
            "another session, and the link does not carry its fields: showing a preset instead. "
            "Links made now carry them."
        )
        return True
    return False


def sync(keys: list[str], models: list[str] | tuple[str, ...] = ()) -> None:
    """Write the page's widget values to the URL, with the custom model's fields when one of
    `models` (the page's chosen models) is it."""
    state.sync(keys, extra=shared_model.url_params(list(models), data.CUSTOM))


def dtype_picker(key: str = "dtype", label: str = "KV dtype", default: str = "bf16") -> str:
    state.init(key, default, choices=DTYPE_CHOICES)
    return st.selectbox(label, DTYPE_CHOICES, key=state.wkey(key))


# --- numbers ------------------------------------------------------------------------------------


def _flag(label: str, message: str) -> None:
    st.error(plain.md(message))
    st.session_state.setdefault(_BAD, []).append(label)


def int_input(
    key: str, label: str, default: int, lo: int = 1, hi: int | None = None, *, field: str, **kw
) -> int:
    """An integer from `lo` to `hi` (default: calc.limits' bound for `field`), the range in a
    caption under it. Out of range: an error there instead, and `require_valid_inputs` raises."""
    hi = limit(field) if hi is None else hi
    state.init(key, default, state.parse_whole, seed_bounds=(lo, hi), why="is not a whole number")
    value = st.number_input(label, step=1, key=state.wkey(key), format="%d", **kw)
    value = int(value) if value is not None else None
    if value is None or not lo <= value <= hi:
        shown = "nothing" if value is None else f"{value:,}"
        _flag(label, f"'{field}' must be from {lo:,} to {hi:,}: got {shown}")
    else:
        st.caption(f"{lo:,} to {hi:,}")  # the limit, beside the input
    return value if value is not None else default


def float_input(key: str, label: str, default: float, lo: float, hi: float) -> float:
    """A number from `lo` to `hi`, the range under it; out of range as `int_input`."""
    state.init(key, default, state.parse_float, seed_bounds=(lo, hi), why="is not a number")
    value = st.number_input(label, key=state.wkey(key))
    if value is None or not lo <= value <= hi:
        _flag(label, f"'{label}' must be from {lo:g} to {hi:,g}: got {value}")
        return default
    st.caption(f"{lo:g} to {hi:,g}")
    return float(value)


def context_picker(
    key: str = "max_ctx", label: str = "Longest context", default: int = 131072
) -> int:
    """A power of two from 1K to 1M tokens; `default` is rounded up to one."""
    default = next((c for c in CONTEXT_CHOICES if c >= default), CONTEXT_CHOICES[-1])
    state.init(key, default, state.parse_int, choices=CONTEXT_CHOICES)
    return st.select_slider(
        label, CONTEXT_CHOICES, key=state.wkey(key), format_func=lambda n: f"{n:,}"
    )


def optional_input(
    key: str, label: str, lo: float, hi: float, *, whole: bool, blank: str, field: str, **kw
) -> float | int | None:
    """A number from `lo` to `hi`, or blank (None: `blank` names what the engine then uses, in
    the placeholder). Out of range: flagged as `int_input` does. Blank survives reruns and the
    URL (state.sync leaves None out of the link)."""
    parse = state.parse_whole if whole else state.parse_float
    span = f"{lo:,} to {hi:,}" if whole else f"{lo:g} to {hi:g}"
    if state.wkey(key) not in st.session_state:
        state.init(key, None, parse, seed_bounds=(lo, hi), why="is not a number")
    fmt = {"step": 1, "format": "%d"} if whole else {"step": 0.01, "format": "%.2f"}
    value = st.number_input(label, key=state.wkey(key), placeholder=blank, **fmt, **kw)
    if value is None:
        st.caption(f"{span}; blank: {blank}")
        return None
    value = int(value) if whole else float(value)
    if not lo <= value <= hi:
        _flag(label, f"'{field}' must be from {span}: got {value:,}")
        return None
    st.caption(f"{span}; blank: {blank}")
    return value
