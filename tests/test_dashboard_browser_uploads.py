"""Hostile uploads on the Model page, in a real browser (Debian chromium via Playwright).

Each bad file gives exactly one st.error naming the file (and the field, where there is one),
never a traceback; text from the file (names, notes, sources) and the file's own name show
literally, never as Markdown, on the Model page and in the other pages' model menus; and the
copied URL of an uploaded model rebuilds it.
"""

from __future__ import annotations

import json

import pytest
from browser_util import (
    chromium,
    clipped,
    markdown_from,
    new_page,
    outside,
    screenshot,
    settle,
    streamlit_server,
    visible_text,
)

pytestmark = pytest.mark.browser

EVIL = (
    "**EVIL bold** [EVIL link](http://evil.example) # EVIL head :red[EVIL red] "
    "<b>EVIL html</b> :material/home: www.evil.example $EVIL^2$"
)
FIELDS = {  # kvcalc spec fields, Llama-2-7B-shaped, with Markdown everywhere text goes
    "name": "evil",
    "display_name": EVIL,
    "notes": EVIL,
    "source": ["http://evil.example/EVIL"],
    "num_hidden_layers": 32,
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "intermediate_size": 11008,
    "vocab_size": 32000,
}
LLAMA = {  # a llama config.json (Llama-2-7b-hf's shape)
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 11008,
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 32,
    "vocab_size": 32000,
}


@pytest.fixture(scope="module")
def server():
    with streamlit_server("streamlit-uploads.log") as url:
        yield url


@pytest.fixture(scope="module")
def browser():
    with chromium() as b:
        yield b


def upload(browser, server, name: str, content: bytes, requests: list[str] | None = None, tmp=None):
    page = new_page(browser, [] if requests is None else requests)
    page.goto(f"{server}/?src=upload", wait_until="networkidle", timeout=60_000)
    settle(page)
    box = page.locator('[data-testid="stFileUploaderDropzoneInput"]')
    if len(content) > 40_000_000:  # Playwright passes buffers up to 50 MB; a file beyond
        path = tmp / name
        path.write_bytes(content)
        box.set_input_files(files=[str(path)])
    else:
        box.set_input_files(
            files=[{"name": name, "mimeType": "application/json", "buffer": content}]
        )
    page.wait_for_timeout(500)
    settle(page)
    return page


HOSTILE = {  # name: (file name, content, what the one error must say)
    "markdown-file-name": ("**EVIL**.json", b'{"a": ', "**EVIL**.json: malformed JSON"),
    "huge-sizes": (
        "config.json",
        json.dumps({**LLAMA, "num_hidden_layers": 10**12, "hidden_size": 10**9}).encode(),
        "config.json: 'num_hidden_layers' must be <= 10,000: got 1,000,000,000,000",
    ),
    "deep-nesting": (
        "deep.json",
        b"[" * 10_000 + b"]" * 10_000,
        "deep.json: JSON nested more than 64 levels deep",
    ),
    "60-MB": (
        "big.json",
        b" " * 60_000_000,
        "big.json: file must be at most 1,000,000 bytes (1 MB): got 60,000,000 bytes",
    ),
    "list": ("list.json", b"[1, 2, 3]", "list.json: expected a JSON object: got list"),
    "utf-16": (
        "utf16.json",
        json.dumps(LLAMA).encode("utf-16"),
        "utf16.json: file is not UTF-8 text: it is UTF-16",
    ),
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_a_hostile_upload_gives_one_error_naming_the_file(browser, server, case, tmp_path):
    name, content, message = HOSTILE[case]
    page = upload(browser, server, name, content, tmp=tmp_path)
    try:
        errors = page.locator('[data-testid="stAlertContentError"]')
        errors.first.wait_for(timeout=60_000)
        # as read: Streamlit's typography shows "<=" as "≤"
        texts = [t.replace("\u2060", "").replace("≤", "<=") for t in errors.all_inner_texts()]
        assert len(texts) == 1, texts
        assert message in texts[0]
        assert page.locator('[data-testid="stException"]').count() == 0
        assert "Traceback" not in visible_text(page)
        assert page.locator("strong").filter(has_text="EVIL").count() == 0
        if case in ("markdown-file-name", "60-MB"):
            screenshot(page, f"model-upload-{case}")
    finally:
        page.close()


def test_user_text_in_an_upload_shows_literally_everywhere(browser, server):
    requests: list[str] = []
    page = upload(browser, server, "evil.json", json.dumps(FIELDS).encode(), requests)
    try:
        assert page.locator('[data-testid="stAlertContentError"]').count() == 0
        page.wait_for_selector('[data-testid="stVegaLiteChart"] svg', timeout=30_000)
        assert markdown_from(page) == []
        text = visible_text(page)
        # the title, the notes and the source read exactly as typed
        assert text.count("**EVIL bold** [EVIL link](http://evil.example) # EVIL head") >= 2
        assert ":red[EVIL red] <b>EVIL html</b> :material/home: www.evil.example" in text
        assert "http://evil.example/EVIL" in text
        screenshot(page, "model-upload-markdown")
        # the other pages offer it by its label, as text
        page.get_by_role("link", name="Capacity planner").click()
        page.wait_for_timeout(500)
        settle(page)
        assert markdown_from(page) == []
        assert page.locator('[data-testid="stAlertContentError"]').count() == 0
        menu = page.get_by_role("combobox", name="Model").first.input_value()
        assert menu.startswith("custom: **EVIL bold** [EVIL link](http://evil.example)")
        page.wait_for_url("**model=custom**", timeout=30_000)  # the URL is written after the run
        assert "spec=" in page.url
        assert outside(requests, server) == []  # the evil link was never fetched
    finally:
        page.close()


def test_the_link_of_an_uploaded_model_rebuilds_it(browser, server):
    page = upload(browser, server, "config.json", json.dumps(LLAMA).encode())
    try:
        page.wait_for_selector('[data-testid="stVegaLiteChart"] svg', timeout=30_000)
        title = "LlamaForCausalLM (config.json)"  # not "hf-llama"
        assert title in visible_text(page)
        page.wait_for_url("**spec=**", timeout=30_000)
        link = page.url
        assert "src=upload" in link
    finally:
        page.close()
    again = new_page(browser, [])  # a new session: nothing uploaded there
    try:
        again.goto(link, wait_until="networkidle", timeout=60_000)
        settle(again)
        again.wait_for_selector('[data-testid="stVegaLiteChart"] svg', timeout=30_000)
        text = visible_text(again)
        assert title in text
        assert "Showing the model rebuilt from this link's fields" in text
        # 32 x (4 x 4096^2 + 3 x 4096 x 11008 + 2 x 4096) + 2 x 32000 x 4096 + 4096 = 6.74B
        assert "6.74B" in text
        screenshot(again, "model-from-link")
    finally:
        again.close()


def test_a_quantized_upload_shows_its_stored_bytes_unclipped(browser, server):
    # bitsandbytes nf4 (double quant) on Llama-2-7B's shape; a skip-list name full of Markdown
    cfg = LLAMA | {
        "torch_dtype": "bfloat16",
        "quantization_config": {
            "quant_method": "bitsandbytes",
            "load_in_4bit": True,
            "bnb_4bit_quant_type": "nf4",
            "bnb_4bit_use_double_quant": True,
            "llm_int8_skip_modules": ["lm_head", "**EVIL bold** [EVIL link](http://evil.example)"],
        },
    }
    requests: list[str] = []
    page = upload(browser, server, "config.json", json.dumps(cfg).encode(), requests)
    try:
        assert page.locator('[data-testid="stAlertContentError"]').count() == 0
        # the section's last table drawn (the run may still be streaming elements)
        page.get_by_text("nf4; double quant; storage uint8").wait_for(timeout=30_000)
        page.locator('[data-testid="stTable"]').nth(3).wait_for(timeout=30_000)
        page.get_by_text("Modules kept unquantized by the config (2)").click()  # the expander
        page.wait_for_timeout(300)
        settle(page)
        text = visible_text(page)
        assert "Quantized checkpoint: bitsandbytes" in text
        assert "nf4; double quant; storage uint8" in text
        # the MLP's packed weights: 32 layers x 3 x 11008 x 4096 values, two a byte
        assert f"{32 * 3 * 11008 * 4096 // 2:,}" in text
        assert "**EVIL bold** [EVIL link](http://evil.example)" in text
        assert markdown_from(page) == []
        assert clipped(page) == []
        assert outside(requests, server) == []
        screenshot(page, "model-upload-quantized")
    finally:
        page.close()
