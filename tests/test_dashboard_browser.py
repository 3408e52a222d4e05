"""The dashboard in a real browser: Debian chromium driven by Playwright (from PyPI).

Every page is loaded at 1400 x 1000 as a new user meets it: its chart's SVG must render, no
exception box or error may show, every request must go to the app's own host (no fonts or icons
fetched from elsewhere), no metric tile may be cut off and no table may be wider than its box;
a full-page screenshot goes to test-artifacts/dashboard/<page>.png. Then the things a URL and an
out-of-range input must do. Hostile uploads: test_dashboard_browser_uploads.py. Skips cleanly
without chromium or playwright.
"""

from __future__ import annotations

import pytest
from browser_util import (
    chromium,
    clipped,
    new_page,
    outside,
    screenshot,
    settle,
    streamlit_server,
    visible_text,
)

pytestmark = pytest.mark.browser

# url path -> screenshot name; the Model page is the default, served at the root URL
PAGES = {
    "": "model",
    "kv-cache": "kv-cache",
    "attention": "attention",
    "capacity": "capacity",
    "compare": "compare",
    "validation": "validation",
}


@pytest.fixture(scope="module")
def server():
    with streamlit_server("streamlit.log") as url:
        yield url


@pytest.fixture(scope="module")
def browser():
    with chromium() as b:
        yield b


@pytest.mark.parametrize("path", list(PAGES), ids=list(PAGES.values()))
def test_page_renders_in_chromium(browser, server, path):
    requests: list[str] = []
    page = new_page(browser, requests)
    try:
        page.goto(f"{server}/{path}", wait_until="networkidle", timeout=60_000)
        settle(page)
        page.wait_for_selector('[data-testid="stVegaLiteChart"] svg', timeout=30_000)
        screenshot(page, PAGES[path])
        assert page.locator('[data-testid="stException"]').count() == 0
        assert "Page not found" not in page.locator("body").inner_text()
        errors = page.locator('[data-testid="stAlertContentError"]')
        assert errors.count() == 0, errors.all_inner_texts()
        marks = page.locator(
            '[data-testid="stVegaLiteChart"] svg .mark-line path, '
            '[data-testid="stVegaLiteChart"] svg .mark-rect path, '
            '[data-testid="stVegaLiteChart"] svg .mark-symbol path'
        )
        assert marks.count() > 0, "a chart rendered no marks"
        assert outside(requests, server) == []  # the page icon was fetched from a font host
        assert clipped(page) == []
    finally:
        page.close()


def test_url_state_reproduces_the_view(browser, server):
    """A link with query parameters opens the page with those widget values."""
    page = new_page(browser, [])
    try:
        page.goto(f"{server}/kv-cache?models=llama-2-7b&dtype=fp8&batch=3&max_ctx=8192")
        settle(page)
        page.wait_for_selector('[data-testid="stVegaLiteChart"] svg', timeout=30_000)
        body = page.locator('[data-testid="stMain"]').inner_text()
        assert "Llama 2 7B" in body and "fp8" in body
        # the batch input: read once the widget holds the link's value (it can draw first with
        # its default while the script run that reads the query is still arriving)
        batch = page.locator('input[type="number"]').first
        page.wait_for_function(
            "() => document.querySelector('input[type=\"number\"]')?.value === '3'",
            timeout=15_000,
        )
        assert batch.input_value() == "3"
        assert "max_ctx=8192" in page.url
    finally:
        page.close()


def test_a_malformed_link_says_what_it_replaced(browser, server):
    page = new_page(browser, [])
    try:
        page.goto(
            f"{server}/kv-cache?models=nope&dtype=fp7&batch=-3&model=custom",
            wait_until="networkidle",
            timeout=60_000,
        )
        settle(page)
        text = visible_text(page)
        assert "The link's dtype='fp7' is not one of the choices: showing bf16 instead." in text
        assert "The link's batch='-3' is outside 1 to 16,777,216: showing 1 instead." in text
        assert "The link's model=custom names a model built or uploaded" in text
        screenshot(page, "kv-cache-bad-link")
    finally:
        page.close()


def test_an_out_of_range_input_shows_its_limit_and_hides_stale_results(browser, server):
    """Typing a batch past the limit: an error under the input, and no results below that
    could be taken for the new batch's (they used to stay on screen, the input turning red)."""
    page = new_page(browser, [])
    try:
        page.goto(f"{server}/capacity", wait_until="networkidle", timeout=60_000)
        settle(page)
        assert "1 to 16,777,216" in visible_text(page)  # the limit, beside the input
        # the results first (the Engine section's tiles draw last, after the charts above)
        page.wait_for_selector('[data-testid="stMetricValue"]', timeout=30_000)
        assert page.locator('[data-testid="stMetricValue"]').count() > 0
        batch = page.get_by_label("Batch", exact=True)
        batch.fill("99999999")
        batch.press("Enter")
        page.wait_for_timeout(500)
        settle(page)
        error = page.wait_for_selector('[data-testid="stAlertContentError"]', timeout=30_000)
        assert "'batch' must be from 1 to 16,777,216: got 99,999,999" in error.inner_text()
        assert page.locator('[data-testid="stMetricValue"]').count() == 0
        assert page.locator('[data-testid="stVegaLiteChart"]').count() == 0
        assert "No results until the inputs marked in red above are in range." in visible_text(page)
        screenshot(page, "capacity-out-of-range")
    finally:
        page.close()
