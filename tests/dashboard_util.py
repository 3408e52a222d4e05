"""Shared by the AppTest dashboard tests: open a page with URL parameters, read back the data
behind a chart (the Arrow dataset of its Vega-Lite element, i.e. what the browser draws), and
read errors, notes and tables as the user reads them (they are escaped Markdown)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from streamlit.dataframe_util import convert_arrow_bytes_to_pandas_df
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
APP = ROOT / "dashboard" / "app.py"

from dashboard.plain import unescape  # noqa: E402 - after the path


def open_page(view: str | None = None, **params) -> AppTest:
    """The app, switched to views/<view>.py with `params` in the URL, after one run.

    The Model page is the default (root URL): its parameters go in before the first run.
    """
    at = AppTest.from_file(str(APP), default_timeout=60)
    if view in (None, "model"):
        at.query_params = {k: v for k, v in params.items()}
        return at.run()
    at.run()
    at.switch_page(f"views/{view}.py")
    at.query_params = {k: v for k, v in params.items()}
    return at.run()


def chart_data(at: AppTest, name: str):
    """The rows behind the chart `name` (ui.show_chart tags each spec with usermeta)."""
    for el in at.get("vega_lite_chart"):
        spec = json.loads(el.proto.spec)
        if spec.get("usermeta", {}).get("kvcalc") == name:
            (ds,) = el.proto.datasets
            return convert_arrow_bytes_to_pandas_df(ds.data.data)
    names = [json.loads(e.proto.spec).get("usermeta") for e in at.get("vega_lite_chart")]
    raise AssertionError(f"no chart {name!r}; charts: {names}")


def assert_clean(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def errors(at: AppTest) -> str:
    """The page's st.error texts as the user reads them (they are escaped Markdown)."""
    assert not at.exception, [e.value for e in at.exception]
    return " | ".join(unescape(e.value) for e in at.error)


def notes(at: AppTest) -> str:
    """The page's warnings (what the URL lost, among others), as read."""
    return " | ".join(unescape(w.value) for w in at.warning)


def table(at: AppTest, i: int = -1):
    """The i-th st.table as the user reads it (cells and headers unescaped)."""
    df = at.table[i].value
    df = df.map(lambda v: unescape(v) if isinstance(v, str) else v)
    df.columns = [unescape(c) for c in df.columns]
    return df.reset_index(drop=True)
