r"""Text that must not be read as Markdown, for Streamlit elements that render Markdown.

st.error / st.caption / st.subheader / st.table cells / metric labels all interpret GitHub
Markdown plus Streamlit's own syntax (`:red[...]`, `:material/icon:`, emoji shortcodes, `$math$`)
and autolink bare URLs. Anything a user supplied (an uploaded config's names and notes, a file
name, a value echoed in an error) goes through `md()` first, and then reads exactly as typed:

- every ASCII punctuation character is backslash-escaped (CommonMark §2.4), which defeats
  emphasis, links, headings, HTML, code, tables, math and `:red[...]`;
- escaping does not stop GFM autolinks (`http://…`, `www.…`, `a@b.c`) or Streamlit's icon and
  emoji shortcodes, which match the text after unescaping, so a WORD JOINER (U+2060, invisible,
  zero width) is put inside each: after `:` before a letter or `/`, after `www`, before `@`;
- line breaks become spaces (one line, no block syntax).

Checked in a real browser by tests/test_dashboard_browser.py (nothing renders as Markdown).

>>> print(md("**bold** :red[x]"))
\*\*bold\*\* \:⁠red\[x\]
>>> unescape(md("see http://e.com, me@x.org")) == "see http://e.com, me@x.org"
True
"""

from __future__ import annotations

import re

import pandas as pd

WORD_JOINER = "\u2060"
_PUNCT = re.compile(r"([!-/:-@\[-`{-~])")  # ASCII punctuation, CommonMark's escapable set
_SHORTCODE = re.compile(r":(?=[A-Za-z/])")  # :red[ :material/x: :smile: http://
_WWW = re.compile(r"(?i)(www)(?=\.)")


def md(text: object) -> str:
    """`text` escaped so that Streamlit's Markdown shows it literally, on one line."""
    t = " ".join(str(text).split())
    t = _SHORTCODE.sub(":" + WORD_JOINER, t)
    t = _WWW.sub(r"\1" + WORD_JOINER, t)
    t = t.replace("@", WORD_JOINER + "@")
    return _PUNCT.sub(r"\\\1", t)


def unescape(markdown: str) -> str:
    """What `md(text)` displays, for tests: the inverse of `md` (bar the line breaks)."""
    return re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", markdown).replace(WORD_JOINER, "")


def table(df: pd.DataFrame) -> pd.DataFrame:
    """A copy for st.table (which renders cells and headers as Markdown): every cell and
    column name as escaped text."""
    out = df.map(lambda v: "" if v is None else md(v)).reset_index(drop=True)
    out.columns = [md(c) for c in df.columns]
    return out
