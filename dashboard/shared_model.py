"""The session's own model (built from fields or uploaded on the Model page) carried in the URL.

A preset is named in the URL (`?model=llama-2-70b`); a model of the user's own has no name a
new session could look up, so while a page shows it the URL also holds its fields:
`?model=custom&spec={"name":"config.json","num_hidden_layers":32,...}` (compact JSON, only the
fields that differ from ModelSpec's defaults, metadata such as notes and sources left out).
Opening such a link rebuilds the model, validated like any upload (calc.limits bounds included);
a link whose fields cannot be read says so at the top of the page.
"""

from __future__ import annotations

import json

import streamlit as st

import calc
from calc.datafiles import parse_json_object
from dashboard import state

PARAM = "spec"
KEY = "custom_spec"  # session key of the custom model (data.CUSTOM_KEY)
ORIGIN = "custom_origin"  # how it came: "fields", "upload: <file name>" or "link"
MAX_CHARS = 4000  # a spec's shape fields are ~300 characters of JSON
MAX_TEXT = 200  # characters of each text field (name, display_name, ...) a link keeps
_METADATA = ("source", "retrieved", "published_params", "published_active_params", "notes")
_ORIGIN = "the link's 'spec' parameter"


def encode(spec: calc.ModelSpec) -> str:
    """The spec's shape as compact JSON: name, display_name and every non-default field."""
    defaults = {k: f.default for k, f in calc.ModelSpec.model_fields.items()}
    fields = spec.model_dump(mode="json")  # field names (head_dim_), for the defaults
    out = {}
    for k, v in fields.items():
        if k in _METADATA or (k != "name" and v == _json(defaults.get(k))):
            continue
        if isinstance(v, str):
            v = v[:MAX_TEXT]  # a link is not the place for a 1 MB display_name
        out["head_dim" if k == "head_dim_" else k] = v
    return json.dumps(out, separators=(",", ":"), ensure_ascii=False)


def _json(value):
    return list(value) if isinstance(value, tuple) else value


def decode(text: str) -> calc.ModelSpec:
    """The spec a link's `spec` parameter holds; a ValueError naming the parameter."""
    data = parse_json_object(text, origin=_ORIGIN, max_bytes=MAX_CHARS)
    return calc.resolve_model(data, origin=_ORIGIN)


def remember(spec: calc.ModelSpec, origin: str) -> None:
    """Make `spec` the session's custom model (offered as "custom" on every page)."""
    st.session_state[KEY] = spec
    st.session_state[ORIGIN] = origin


def restore() -> None:
    """Rebuild the custom model from the URL when this session has none yet."""
    if KEY in st.session_state or PARAM not in st.query_params:
        return
    try:
        remember(decode(st.query_params[PARAM]), "link")
    except ValueError as e:
        state.note(f"The link's model fields could not be read: {calc.format_error(e)}")


def url_params(selected: list[str], custom: str) -> dict[str, str]:
    """{"spec": ...} when one of the page's `selected` models is the custom one."""
    spec = st.session_state.get(KEY)
    if spec is None or custom not in selected:
        return {}
    return {PARAM: encode(spec)}
