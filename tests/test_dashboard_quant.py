"""The Model page's quantized-checkpoint section under AppTest: method and schemes, the stored bytes
by component and part (calc.weight_bytes_breakdown), the total beside bf16; the user's module
names as plain text; a refused quantization_config as one error naming the field. Expected values
are written out from the checkpoints (fixtures, sources cited), not read from kvcalc."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("streamlit")

from dashboard_util import assert_clean, errors, open_page, table  # noqa: E402

FIX = Path(__file__).parent / "fixtures" / "checkpoints"
GPT_OSS = FIX / "gpt-oss-20b" / "config.json"


def upload(name: str, content: bytes):
    at = open_page("model", src="upload")
    at.file_uploader(key="model:upload").set_value((name, content, "application/json"))
    return at.run()


def find_table(at, first_column: str):
    for i in range(len(at.table)):
        df = table(at, i)
        if df.columns[0] == first_column:
            return df
    raise AssertionError(f"no table whose first column is {first_column!r}")


def cell(df, **match) -> str:
    rows = df
    for k, v in match.items():
        rows = rows[rows[k] == v]
    assert len(rows) == 1, (match, df)
    return rows.iloc[0]


def as_int(text: str) -> int:
    return int(text.replace(",", ""))


def test_uploaded_gpt_oss_20b_shows_its_stored_bytes():
    at = upload("config.json", GPT_OSS.read_bytes())
    assert_clean(at)
    assert any("Quantized checkpoint: mxfp4" in s.value for s in at.subheader)
    schemes = find_table(at, "layout")
    row = cell(schemes, layout="mxfp4")
    assert (row["bits"], row["scales per"], row["scale dtype"]) == ("4", "group 32", "e8m0")
    # the config's modules_to_not_convert, as plain text
    skipped = json.loads(GPT_OSS.read_text())["quantization_config"]["modules_to_not_convert"]
    assert any(t.value == "\n".join(skipped) for t in at.text)

    parts = find_table(at, "component")
    # the fixture's index.json: total_size 13,761,264,768 (openai/gpt-oss-20b)
    total = cell(parts, component="total")
    assert as_int(total["bytes"]) == 13_761_264_768
    assert (total["GB"], total["GiB"]) == ("13.76 GB", "12.82 GiB")
    # 24 layers x 32 experts; gate_up (5760 x 2880) and down (2880 x 2880), 4 bits a value
    h = 2880
    packed = cell(parts, component="mlp", **{"stored as": "packed weights"})
    assert as_int(packed["bytes"]) == 24 * 32 * (2 * h * h // 2 + h * h // 2)
    scales = cell(parts, component="mlp", **{"stored as": "scales"})
    assert as_int(scales["bytes"]) == 24 * 32 * (2 * h * h // 32 + h * h // 32)  # one per 32
    assert sum(as_int(b) for b in parts["bytes"][:-1]) == 13_761_264_768  # rows sum to the total

    totals = find_table(at, "checkpoint")
    # huggingface.js e2765e25c: gpt-oss-20b has 20,914,757,184 parameters; in bf16, 2 B each
    assert as_int(cell(totals, checkpoint="in bf16")["bytes"]) == 2 * 20_914_757_184
    assert as_int(cell(totals, checkpoint="as stored")["bytes"]) == 13_761_264_768


def test_bnb_nf4_upload_shows_the_scheme_and_the_quant_state_bookkeeping():
    cfg = {  # Llama-3.1-8B's shape, nf4 with double quant (unsloth's bnb-4bit settings)
        "model_type": "llama",
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_attention_heads": 32,
        "num_hidden_layers": 32,
        "num_key_value_heads": 8,
        "vocab_size": 128256,
        "torch_dtype": "bfloat16",
        "quantization_config": {
            "quant_method": "bitsandbytes",
            "load_in_4bit": True,
            "bnb_4bit_quant_type": "nf4",
            "bnb_4bit_use_double_quant": True,
            "llm_int8_skip_modules": ["lm_head", "**EVIL** :red[x]"],
        },
    }
    at = upload("config.json", json.dumps(cfg).encode())
    assert_clean(at)
    row = cell(find_table(at, "layout"), layout="bnb-4bit")
    assert row["details"] == "nf4; double quant; storage uint8"
    assert any(t.value == "lm_head\n**EVIL** :red[x]" for t in at.text)  # literally
    parts = find_table(at, "component")
    # the 224 block Linears: 4096 x 4096 (q, o), 1024 x 4096 (k, v), 14336 x 4096 (gate, up, down)
    n = 32 * (2 * 4096 * 4096 + 2 * 1024 * 4096 + 3 * 14336 * 4096)
    packed = sum(
        as_int(r["bytes"]) for _, r in parts.iterrows() if r["stored as"] == "packed weights"
    )
    assert packed == n // 2 == 3_489_660_928  # huggingface.js: unsloth's U8 packed bytes
    absmax = sum(as_int(r["bytes"]) for _, r in parts.iterrows() if r["stored as"] == "scales")
    assert absmax == n // 64 + n // 64 // 256 * 4  # uint8 absmax + float32 nested_absmax


def test_a_refused_quantization_config_is_one_error_naming_the_field():
    cfg = json.loads(GPT_OSS.read_text())
    cfg["quantization_config"] = {
        "quant_method": "bitsandbytes",
        "load_in_4bit": True,
        "bnb_4bit_quant_type": "int4",
    }
    at = upload("config.json", json.dumps(cfg).encode())
    assert "'bnb_4bit_quant_type' must be one of nf4, fp4: got 'int4'" in errors(at)
    assert len(at.error) == 1


def test_an_unquantized_model_has_no_quantized_section():
    at = open_page("model", src="preset", model="llama-2-70b")
    assert_clean(at)
    assert not any("Quantized checkpoint" in s.value for s in at.subheader)
