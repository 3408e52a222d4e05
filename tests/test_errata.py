"""The seed notes' claims, checked against values from papers, config.json files and arithmetic.

Expected values are written out here with their source; none is copied from kvcalc's output.
"""

import os
import re
import sys
from pathlib import Path

import pytest

import calc.presets
from calc.errata import CLAIMS_FILE, ErrataReport, check_errata, claim_matches, claims

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def report() -> ErrataReport:
    return check_errata()


@pytest.fixture(scope="module")
def by_subject(report) -> dict:
    return {e.subject: e for e in report.rows}


# --- KV-cache sizes -----------------------------------------------------------------------------


def test_llama_1_65b_cache_at_2048_tokens_fp16(by_subject):
    e = by_subject["LLaMA 1 65B KV cache"]
    # LLaMA paper (arXiv 2302.13971) Table 2: 80 layers, 64 heads, dim 8192 -> head_dim 128; MHA
    expected = 2 * 80 * 64 * 128 * 2048 * 2  # K and V x layers x KV heads x d x tokens x 2 B
    assert expected == 5_368_709_120
    assert e.kvcalc_values["bytes"] == expected
    assert e.kvcalc_values["GiB"] == 5.0  # 5,368,709,120 / 2^30, exactly
    assert e.kvcalc == "5.37 GB = 5.00 GiB"
    assert e.claimed_values == {"GB": 5.2}
    assert e.verdict == "wrong"  # 5.2 is neither 5.37 (GB) nor 5.00 (GiB)


def test_llama_3_70b_cache_at_8192_tokens_bf16(by_subject):
    e = by_subject["Llama 3 70B KV cache"]
    # Meta-Llama-3-70B config.json: 80 layers, 64 heads, num_key_value_heads 8, hidden 8192
    expected = 2 * 80 * 8 * 128 * 8192 * 2
    assert expected == 2_684_354_560
    assert e.kvcalc_values["bytes"] == expected
    assert e.kvcalc == "2.68 GB = 2.50 GiB"
    assert e.verdict == "wrong"  # the notes say ~64 GB
    # the explanation gives the MHA reading of the notes' formula: 2*80*64*128*8192*2 B
    assert "21.47 GB" in e.explanation  # 21,474,836,480 B


@pytest.mark.parametrize(
    ("value", "claimed", "ok"),
    [
        (5_368_709_120, "5.2", False),
        (5_368_709_120, "5.4", True),  # 5.37 GB rounds to 5.4
        (5_368_709_120, "5.37", True),
        (5_368_709_120, "5.0", True),  # 5.00 GiB: the binary reading is accepted too
        (5_368_709_120, "5", True),
        (2_684_354_560, "64", False),
        (2_684_354_560, "2.5", True),
    ],
)
def test_claim_matches_to_the_precision_written(value, claimed, ok):
    assert claim_matches(value, claimed) is ok


# --- head counts, §11.6 table -------------------------------------------------------------------


def test_palm_540b_heads(by_subject):
    e = by_subject["PaLM 540B heads"]
    # PaLM paper (arXiv 2204.02311) Table 1: 540B has 48 heads, d_head 256 (and d_model 18432,
    # so 48 x 256 != d_model); Section 2 "Multi-Query Attention": K/V shared, one KV head.
    assert e.kvcalc_values == {"num_attention_heads": 48, "num_key_value_heads": 1}
    assert e.claimed_values == {"num_attention_heads": 16, "num_key_value_heads": 1}
    assert "head_dim 256" in e.explanation
    assert e.verdict == "wrong"


def test_falcon_40b_heads(by_subject):
    e = by_subject["Falcon 40B heads"]
    # tiiuae/falcon-40b config.json: "num_attention_heads": 128, "num_kv_heads": 8,
    # "new_decoder_architecture": true (grouped K/V, not multi-query)
    assert e.kvcalc_values == {"num_attention_heads": 128, "num_key_value_heads": 8}
    assert e.kvcalc == "128 / 8 GQA"
    assert e.verdict == "wrong"


@pytest.mark.parametrize(
    ("subject", "heads", "kv_heads"),
    [
        ("GPT-3 175B heads", 96, 96),  # GPT-3 paper (arXiv 2005.14165) Table 2.1: n_heads 96, MHA
        ("LLaMA 1 65B heads", 64, 64),  # LLaMA paper Table 2: n heads 64, MHA
        ("LLaMA 2 70B heads", 64, 8),  # Llama-2-70b-hf config.json: 64 heads, 8 KV heads
        ("Mistral 7B heads", 32, 8),  # Mistral-7B-v0.1 config.json: 32 heads, 8 KV heads
        ("Gemma 7B heads", 16, 16),  # google/gemma-7b config.json: 16 heads, 16 KV heads
        ("Qwen2 72B heads", 64, 8),  # Qwen/Qwen2-72B config.json: 64 heads, 8 KV heads
    ],
)
def test_correct_rows(by_subject, subject, heads, kv_heads):
    e = by_subject[subject]
    assert e.kvcalc_values == {"num_attention_heads": heads, "num_key_value_heads": kv_heads}
    assert e.claimed_values == e.kvcalc_values
    assert e.verdict == "correct"


def test_group_counts(by_subject):
    # §11.3/§11.4 define G as the number of KV groups = KV heads.
    assert by_subject["LLaMA 2 70B KV groups"].verdict == "correct"  # "GQA (8 groups)", 8 KV
    mistral = by_subject["Mistral 7B KV groups"]  # "GQA (4 groups)": 32 / 8 = 4 is per group
    assert mistral.kvcalc_values == {"groups": 8, "query_heads_per_group": 32 // 8}
    assert mistral.verdict == "wrong"


def test_savings_table(by_subject):
    assert by_subject["GPT-3 KV-cache saving"].verdict == "correct"  # 1 - 96/96 = 0%
    llama2 = by_subject["LLaMA 2 KV-cache saving"]
    assert llama2.kvcalc_values["saving_pct"] == pytest.approx(100 * (1 - 8 / 64))  # 87.5
    assert llama2.verdict == "correct"
    palm = by_subject["PaLM KV-cache saving"]
    assert palm.kvcalc_values["saving_pct"] == pytest.approx(100 * (1 - 1 / 48))  # 97.92
    assert palm.verdict == "wrong"  # the notes: H=16 -> 93.75%


def test_exactly_these_are_wrong(report):
    wrong = {e.subject for e in report.rows if e.verdict == "wrong"}
    assert wrong == {
        "PaLM 540B heads",
        "Falcon 40B heads",
        "Mistral 7B KV groups",
        "PaLM KV-cache saving",
        "LLaMA 1 65B KV cache",
        "Llama 3 70B KV cache",
    }
    assert report.n_wrong == 6


# --- provenance and recomputation ---------------------------------------------------------------


def test_every_claim_is_a_quote_holding_its_number_with_file_section_and_line(report):
    for e in report.rows:
        assert re.fullmatch(r"\d{3}_[0-9a-f]{16}\.txt [^,]+, lines? \d+(-\d+|, \d+)?", e.source), (
            e.source
        )
        first = next(iter(e.claimed_values.values()))
        assert f"{first:g}" in e.claim, (e.subject, e.claim)  # the quote holds the number


def test_the_quotes_are_shipped_as_data_in_the_package():
    from importlib import resources

    path = resources.files("calc") / CLAIMS_FILE
    assert Path(str(path)).resolve().is_relative_to(ROOT)
    data = claims()
    for kind in ("heads", "savings", "kv"):
        for c in data[kind]:
            assert c["notes"] in data["notes"] and c["quote"] and c["section"] and c["line"] > 0
    # one quote checked by hand against the notes: 000 §11.6, line 490
    palm = next(c for c in data["heads"] if c["model"] == "palm-540b")
    assert " ".join(palm["quote"].split()) == "│ PaLM 540B │ 16 │ 1 │ MQA │"


def test_checking_the_errata_reads_no_file_outside_the_repository():
    """An audit hook records every file opened while the claims are loaded and checked."""
    opened: list[str] = []
    active = [False]

    def hook(event, args):
        if active[0] and event == "open" and isinstance(args[0], str | bytes | Path):
            opened.append(str(args[0]))

    sys.addaudithook(hook)  # hooks cannot be removed; `active` switches this one off
    claims.cache_clear()
    calc.presets.load_preset.cache_clear()
    active[0] = True
    try:
        check_errata()
    finally:
        active[0] = False
    allowed = (str(ROOT), sys.prefix, sys.base_prefix)  # the repository, the interpreter
    outside = [f for f in opened if not os.path.abspath(f).startswith(allowed)]
    assert opened and not outside, outside


def test_values_come_from_the_preset_at_call_time(monkeypatch):
    # Were Falcon 40B the 64 / 1 model the notes describe, the row would read correct.
    real = calc.presets.load_preset
    fake = real("falcon-40b").replace(num_attention_heads=64, num_key_value_heads=1)
    monkeypatch.setattr(
        calc.presets, "load_preset", lambda n: fake if n == "falcon-40b" else real(n)
    )
    row = next(e for e in check_errata().rows if e.subject == "Falcon 40B heads")
    assert row.verdict == "correct"
    assert row.kvcalc_values == {"num_attention_heads": 64, "num_key_value_heads": 1}


def test_report_round_trips_through_json(report):
    assert ErrataReport.model_validate_json(report.model_dump_json()) == report
