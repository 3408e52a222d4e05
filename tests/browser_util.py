"""Shared by the browser tests: start `streamlit run dashboard/app.py` on a free local port,
launch Debian's chromium through Playwright (never `playwright install`), open pages while
recording every request, wait for a script run to finish, and check what a user would see
(outside requests, clipped metric tiles and tables, Markdown rendered from user text).
Screenshots go to test-artifacts/dashboard/ (CI keeps them as artifacts).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "test-artifacts" / "dashboard"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
WIDTH = 1400


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def streamlit_server(log_name: str):
    """The dashboard on 127.0.0.1:<free port>; yields its URL."""
    pytest.importorskip("streamlit")
    port = _free_port()
    cmd = [sys.executable, "-m", "streamlit", "run", str(ROOT / "dashboard" / "app.py")]
    cmd += ["--server.address", "127.0.0.1", "--server.port", str(port)]
    cmd += ["--server.headless", "true", "--browser.gatherUsageStats", "false"]
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    log = open(ARTIFACTS / log_name, "w")  # closed in the finally below
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=os.environ)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                    if r.read() == b"ok":
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"streamlit did not start (exit {proc.poll()}); see {log_name}")
            time.sleep(0.3)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


@contextmanager
def chromium():
    exe = shutil.which("chromium")
    if exe is None:
        pytest.skip("Debian chromium is not installed (apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=exe, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


def new_page(browser, requests: list[str]):
    """A 1400 x 1000 page whose every request URL is appended to `requests`."""
    page = browser.new_page(viewport={"width": WIDTH, "height": 1000})
    page.on("request", lambda r: requests.append(r.url))
    return page


def settle(page) -> None:
    """Wait until the script run has finished: stApp's data-test-connection-state is
    "CONNECTED" and its data-test-script-state "notRunning" (it is "running" / "rerunRequested"
    during a run; there is no data-teststate attribute, so waiting on that returned before the
    page had drawn), the app's status widget is gone, the main area holds a drawn element (the
    state also reads "notRunning" for a moment before the first run starts, over the page's
    empty frame), it has stopped changing, and the run is still over once it has."""
    page.wait_for_selector('[data-testid="stApp"]', timeout=30_000)
    for _ in range(6):
        page.wait_for_function(
            "() => { const a = document.querySelector('[data-testid=\"stApp\"]');"
            " return a?.dataset.testConnectionState === 'CONNECTED'"
            " && a.dataset.testScriptState === 'notRunning'"
            " && !document.querySelector('[data-testid=\"stStatusWidget\"]')"
            ' && !!document.querySelector(\'[data-testid="stMain"] [data-testid="stElementContainer"]\'); }',
            timeout=60_000,
        )
        # the browser draws the run's elements after the state flips (metric tiles some 0.3 s
        # later): wait until the main area has stopped changing for 0.6 s (at most 15 s)
        size, still = -1, 0
        for _ in range(75):
            now = page.evaluate(
                "() => document.querySelector('[data-testid=\"stMain\"]')?.innerHTML.length ?? 0"
            )
            still = still + 1 if now == size else 0
            if still >= 3:
                break
            size = now
            page.wait_for_timeout(200)
        done = page.evaluate(
            "() => document.querySelector('[data-testid=\"stApp\"]')?.dataset.testScriptState"
        )
        if done == "notRunning":
            return


def screenshot(page, name: str) -> None:
    """The whole page: Streamlit scrolls inside stMain, so grow the viewport to its height."""
    height = page.evaluate("() => document.querySelector('[data-testid=\"stMain\"]').scrollHeight")
    page.set_viewport_size({"width": WIDTH, "height": min(max(height, 1000), 8000)})
    page.wait_for_timeout(500)  # let vega re-lay out and finish drawing
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)
    page.set_viewport_size({"width": WIDTH, "height": 1000})


def outside(requests: list[str], server: str) -> list[str]:
    """Requests that did not go to the app's own host."""
    local = (server + "/", "data:", "blob:", "about:")
    return [u for u in requests if not (u == server or u.startswith(local))]


CLIPPED_JS = """() => {
  const out = [];
  const over = (e) => e.scrollWidth > e.clientWidth + 1;
  for (const sel of ['[data-testid="stMetricValue"]', '[data-testid="stMetricLabel"]']) {
    for (const tile of document.querySelectorAll(sel)) {
      for (const e of [tile, ...tile.querySelectorAll('*')]) {
        if (over(e)) { out.push(sel + ': ' + tile.innerText); break; }
      }
    }
  }
  for (const t of document.querySelectorAll('[data-testid="stTable"]')) {
    const table = t.querySelector('table');
    if (over(t) || (table && table.getBoundingClientRect().right >
                    t.getBoundingClientRect().right + 1)) {
      out.push('table: ' + t.innerText.slice(0, 60));
    }
  }
  return out;
}"""


def clipped(page) -> list[str]:
    """Metric tiles whose label or value is cut (ellipsis), and tables wider than their box."""
    return page.evaluate(CLIPPED_JS)


RENDERED_JS = """() => {
  const main = document.querySelector('[data-testid="stMain"]');
  const hits = [];
  for (const sel of ['strong', 'em', 'h1', 'del', 'code', 'blockquote', '.katex', 'b', 'a']) {
    for (const e of main.querySelectorAll(sel)) {
      const href = e.getAttribute('href') || '';
      if ((e.innerText || '').includes('EVIL') || href.includes('evil')) {
        hits.push(sel + ': ' + e.outerHTML.slice(0, 120));
      }
    }
  }
  for (const e of main.querySelectorAll('span[role="img"]')) {  // :material/...: icons
    if ((e.parentElement.innerText || '').includes('EVIL')) hits.push('icon: ' + e.outerHTML);
  }
  return hits;
}"""


def markdown_from(page) -> list[str]:
    """Elements that Markdown made out of text holding 'EVIL' (links, bold, headings, icons...):
    user text must show literally."""
    return page.evaluate(RENDERED_JS)


def visible_text(page) -> str:
    """The main area's text as shown (word joiners, which plain.md inserts, removed)."""
    return page.locator('[data-testid="stMain"]').inner_text().replace("\u2060", "")
