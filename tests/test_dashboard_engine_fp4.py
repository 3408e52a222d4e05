"""The Capacity page's Engine section with SGLang's nvfp4 cache (calc.serving.sglang_nvfp4):
20 GiB over 36,864 B a token (32 layers x K and V x 8 heads x (64 B of fp4 values + 8 B of
fp8 scales)) on a B200 at 0.5.23, in whole 64-token pages: 582,528 tokens; an H100 is refused
in SGLang's words."""

from __future__ import annotations

from dashboard_util import errors, open_page

BASE = {"model": "llama-3.1-8b", "gpus": "1", "tp": "1", "engine": "sglang", "ever": "0.5.23"}


def test_sglang_nvfp4_tokens_and_its_refusal_off_blackwell():
    at = open_page("capacity", **BASE, gpu="b200", ekv="nvfp4", egiven="20")
    assert errors(at) == ""
    assert {m.label: m.value for m in at.metric}[
        "KV tokens"
    ] == f"{20 * 2**30 // 36864 // 64 * 64:,}"
    at = open_page("capacity", **BASE, gpu="h100-sxm", ekv="nvfp4", egiven="20")
    assert "--kv-cache-dtype=nvfp4 requires Blackwell SM100 or SM120" in errors(at)
