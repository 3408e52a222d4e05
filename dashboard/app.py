"""kvcalc dashboard entry: routes to the pages (st.navigation) and keeps tracebacks off screen.

Run from the repository root: `streamlit run dashboard/app.py` (what `make run` does); the
script-level dashboard/.streamlit/config.toml binds 127.0.0.1:8501 with usage statistics off.
"""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE.parent) not in sys.path:  # `dashboard` and `calc` importable from any cwd
    sys.path.insert(0, str(HERE.parent))

import streamlit as st  # noqa: E402

import calc  # noqa: E402

PAGES = (  # file, title, url path, icon
    ("model.py", "Model", "model", ":material/memory:"),
    ("kv_cache.py", "KV cache", "kv-cache", ":material/stacked_line_chart:"),
    ("attention.py", "Attention cost", "attention", ":material/grid_on:"),
    ("capacity.py", "Capacity planner", "capacity", ":material/dns:"),
    ("compare.py", "Compare", "compare", ":material/compare_arrows:"),
    ("validation.py", "Validation", "validation", ":material/fact_check:"),
)

# the icon is a file served by the app itself: a `:material/...:` page icon makes the browser
# fetch it from a font host, and the dashboard makes no outside request
st.set_page_config(page_title="kvcalc", page_icon=str(HERE / "icon.png"), layout="wide")
pages = [
    st.Page(HERE / "views" / f, title=t, url_path=u, icon=i, default=(k == 0))
    for k, (f, t, u, i) in enumerate(PAGES)
    if (HERE / "views" / f).is_file()
]
page = st.navigation(pages)
st.sidebar.caption(
    f"kvcalc {calc.__version__}. Units: GB = 10⁹ bytes, GiB = 2³⁰ bytes; "
    "FLOPs count 2 per multiply-add. The URL holds the view: copy it to share."
)
try:
    page.run()
except Exception as e:  # noqa: BLE001 - last line of defence: one line, never a traceback
    from dashboard.plain import md

    st.error(md(calc.format_error(e)))
