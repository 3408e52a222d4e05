"""The view lives in the URL: widgets are seeded from `st.query_params`, and written back.

Each page calls `page("kv")` first; its widgets use `key=wkey("model")` ("kv:model"): Streamlit
scopes widget state to a page, so one key per page. `init` seeds a widget's value once from the
URL (`?model=llama-2-70b&batch=4`), falling back to the value last chosen on any page (so the
model follows you between pages) and then to the default. `sync` writes the page's values back,
so a copied link reproduces the view. A value in the URL that does not parse, or is not one of the
choices, is replaced by the default and a warning at the top of the page says what was replaced
and by what: a bad link never breaks a page, and never changes it silently.

>>> parse_int("4096"), parse_int("-1"), parse_bool("true")
(4096, None, True)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import streamlit as st

STICKY = "_sticky_"  # session keys that remember a widget's value after it leaves the page
_NS = "_page_ns"
_NOTES = "_url_notes"  # the container at the top of the page that says what the URL lost


def page(ns: str) -> None:
    """Name the page whose widgets follow (their keys become "ns:name"), and open the place
    where notes about the URL go."""
    st.session_state[_NS] = ns
    st.session_state[_NOTES] = (st.empty(), [])  # one warning box, its lines
    st.session_state["_bad_inputs"] = []  # ui.int_input's out-of-range inputs, this run


def note(message: str) -> None:
    """A line in the warning at the top of the page (escaped: it quotes the URL)."""
    from dashboard.plain import md

    box, lines = st.session_state.get(_NOTES) or (st.empty(), [])
    lines.append(md(message))
    box.warning("  \n".join(lines), icon=":material/link_off:")  # one line each


def _shown(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    return f"{value:,}" if isinstance(value, int) else f"{value:,g}"


def _replaced(key: str, raw: str, why: str, value: Any) -> None:
    raw = raw if len(raw) <= 60 else raw[:57] + "..."
    note(f"The link's {key}={raw!r} {why}: showing {_shown(value)} instead.")


def wkey(name: str) -> str:
    """The widget key of URL parameter `name` on the current page."""
    return f"{st.session_state.get(_NS, 'app')}:{name}"


def parse_int(text: str) -> int | None:
    try:
        v = int(text)
    except (TypeError, ValueError):
        return None
    return v if v > 0 else None


def parse_whole(text: str) -> int | None:
    """Any whole number, in range or not (the input says when it is out of range)."""
    try:
        return int(text)
    except (TypeError, ValueError):
        return None


def parse_float(text: str) -> float | None:
    try:
        v = float(text)
    except (TypeError, ValueError):
        return None
    return v if v == v else None  # NaN is not a value


def parse_bool(text: str) -> bool | None:
    return {"true": True, "1": True, "false": False, "0": False}.get(str(text).lower())


def parse_str(text: str) -> str | None:
    return text


def _ok(value: Any, choices: Sequence | None, bounds: tuple | None) -> bool:
    return value is not None and _why_not(value, choices, bounds) is None


def _why_not(value: Any, choices: Sequence | None, bounds: tuple | None) -> str | None:
    """Why `value` is not allowed (for the note), or None."""
    if value is None:
        return "is not a value here"
    if choices is not None and value not in choices:
        return "is not one of the choices"
    if bounds is not None:
        lo, hi = bounds
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            return f"is outside {_shown(lo)} to {_shown(hi)}"
    return None


def init(
    key: str,
    default: Any,
    parse: Callable[[str], Any] = parse_str,
    *,
    choices: Sequence | None = None,
    bounds: tuple | None = None,
    seed_bounds: tuple | None = None,
    why: str | None = None,
    quiet: bool = False,
) -> None:
    """Seed the widget of URL parameter `key` from the URL, the last value chosen, or `default`.

    A URL value that is not allowed is replaced, with a note saying so (`why`: why it does not
    parse). `seed_bounds` hold only for the URL and remembered values, not for what the user
    has typed into the widget (ui.int_input flags that itself rather than snapping it back)."""
    wk = wkey(key)
    first = wk not in st.session_state
    if not first and _ok(st.session_state[wk], choices, bounds):
        return
    lims = bounds or seed_bounds
    candidates = []
    raw = st.query_params.get(key) if key in st.query_params else None
    if raw is not None:
        candidates.append(parse(raw))
    candidates.append(st.session_state.get(STICKY + key))
    value = next((c for c in candidates if _ok(c, choices, lims)), default)
    st.session_state[wk] = value
    if first and not quiet and raw is not None and not _ok(candidates[0], choices, lims):
        reason = why if candidates[0] is None and why else _why_not(candidates[0], choices, lims)
        _replaced(key, raw, reason or "is not allowed", value)


def select(col, key: str, label: str, options: list[str], help: str) -> str:
    """A selectbox in `col` whose value is the URL's `key` (unset or not an option: the
    first option)."""
    init(key, options[0], choices=options)
    return col.selectbox(label, options, key=wkey(key), help=help)


def init_list(
    key: str,
    default: Sequence,
    parse: Callable[[str], Any] = parse_str,
    *,
    choices: Sequence | None = None,
    quiet: bool = False,
) -> None:
    """Like `init`, for a multiselect: `?models=a&models=b`."""
    wk = wkey(key)
    if wk in st.session_state:
        current = [v for v in st.session_state[wk] if choices is None or v in choices]
        if current == list(st.session_state[wk]):
            return
    first = wk not in st.session_state
    raw: list[str] = st.query_params.get_all(key) if key in st.query_params else []
    values = [parse(t) for t in raw]
    if not values:
        values = list(st.session_state.get(STICKY + key) or [])
    kept = [v for v in dict.fromkeys(values) if _ok(v, choices, None)]
    st.session_state[wk] = kept or [v for v in default if choices is None or v in choices]
    dropped = [t for t, v in zip(raw, values, strict=False) if not _ok(v, choices, None)]
    if first and dropped and not quiet:
        what = ", ".join(f"{key}={t!r}" for t in dropped[:5])
        note(
            f"The link's {what} {'is' if len(dropped) == 1 else 'are'} not among the choices: "
            f"left out (showing {', '.join(map(str, st.session_state[wk]))})."
        )


def _to_query(value: Any) -> str | list[str]:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return [str(v) for v in value]
    return str(value)


def sync(keys: Sequence[str], extra: dict[str, str] | None = None) -> None:
    """Write the page's widget values (and `extra` parameters) to the URL, replacing it, and
    remember them."""
    wanted = dict(extra or {})
    for k in keys:
        if wkey(k) in st.session_state:
            v = st.session_state[wkey(k)]
            st.session_state[STICKY + k] = v
            if v is not None:  # a blank input: left out of the link
                wanted[k] = _to_query(v)
    current = {k: st.query_params.get_all(k) for k in st.query_params}
    normal = {k: v if isinstance(v, list) else [v] for k, v in wanted.items()}
    if current != normal:
        st.query_params.from_dict(wanted)
