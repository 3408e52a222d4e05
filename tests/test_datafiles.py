"""Reading the files people pass in: hostile shapes (deep nesting, UTF-16, directories, lists,
huge files) each give one line naming the file and the problem; preset names ignore case."""

from __future__ import annotations

import json

import pytest

import calc
from calc import datafiles
from calc.presets import resolve_model

LLAMA_TINY = {  # a llama config.json, cut down
    "model_type": "llama",
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 8,
    "num_hidden_layers": 2,
    "vocab_size": 100,
}


def error(f, *args, **kwargs) -> str:
    with pytest.raises(ValueError) as e:
        f(*args, **kwargs)
    return calc.format_error(e.value)


# --- nesting ----------------------------------------------------------------------------------


def test_json_nested_10000_deep_names_the_file_not_a_recursion_error():
    text = "[" * 10_000 + "]" * 10_000
    msg = error(datafiles.parse_json_object, text, origin="deep.json")
    assert msg == (
        "deep.json: JSON nested more than 64 levels deep (line 1): a config file nests a few levels"
    )


def test_toml_nested_deep_is_refused_too():
    msg = error(datafiles.parse_toml, "a = " + "[" * 5000 + "]" * 5000, origin="deep.toml")
    assert msg.startswith("deep.toml: TOML nested more than 64 levels deep")


def test_brackets_inside_strings_are_not_nesting():
    text = json.dumps({"notes": "[" * 500, "rope_scaling": {"type": "linear", "factor": 2.0}})
    assert datafiles.parse_json_object(text, origin="c.json")["notes"] == "[" * 500


def test_a_real_config_nests_a_few_levels():
    cfg = {**LLAMA_TINY, "rope_scaling": {"a": {"b": {"c": [1, [2, [3]]]}}}}
    assert datafiles.parse_json_object(json.dumps(cfg), origin="c.json") == cfg


# --- encodings --------------------------------------------------------------------------------


def test_utf16_is_named_as_such():
    content = json.dumps(LLAMA_TINY).encode("utf-16")  # with its byte-order mark FF FE
    msg = error(datafiles.decode_text, content, "config.json")
    assert msg.startswith("config.json: file is not UTF-8 text: it is UTF-16;")
    # without a BOM: ASCII text as UTF-16-LE is full of NUL bytes
    msg = error(datafiles.decode_text, json.dumps(LLAMA_TINY).encode("utf-16-le"), "c.json")
    assert "c.json: file is not UTF-8 text: it is UTF-16 or UTF-32" in msg


def test_a_utf8_byte_order_mark_is_dropped():
    text = datafiles.decode_text(b"\xef\xbb\xbf" + json.dumps(LLAMA_TINY).encode(), "c.json")
    assert datafiles.parse_json_object(text, origin="c.json") == LLAMA_TINY


def test_size_is_checked_with_the_bound_and_the_size():
    msg = error(datafiles.decode_text, b" " * 60_000_000, "big.json")
    assert msg == "big.json: file must be at most 1000000 bytes: got 60000000"


def test_a_list_is_not_a_config():
    msg = error(datafiles.parse_json_object, "[1, 2]", origin="list.json")
    assert msg == "list.json: expected a JSON object: got list"


# --- paths ------------------------------------------------------------------------------------


def test_a_directory_is_called_a_directory(tmp_path):
    msg = error(resolve_model, str(tmp_path))
    assert msg == f"{str(tmp_path)!r} is a directory, not a file"
    (tmp_path / "config.json").write_text(json.dumps(LLAMA_TINY))
    msg = error(resolve_model, str(tmp_path))
    assert msg.endswith(f": pass {str(tmp_path / 'config.json')!r}")


def test_a_missing_path_is_a_missing_file_not_an_unknown_preset(tmp_path):
    msg = error(resolve_model, str(tmp_path / "nope" / "llama"))
    assert msg.startswith("no such file:") and "unknown preset" not in msg


def test_preset_names_ignore_case():
    assert resolve_model("Llama-3-70B") == calc.load_preset("llama-3-70b")
    assert calc.load_preset("LLAMA-2-7B").name == "llama-2-7b"
    assert "unknown preset 'Llama-9'" in error(calc.load_preset, "Llama-9")


# --- a dict's errors name its file once ---------------------------------------------------------


def test_a_dict_from_a_file_is_named_by_the_file_once():
    bad = {**LLAMA_TINY, "num_hidden_layers": 10**12}
    msg = error(resolve_model, bad, origin="config.json")
    assert msg == "config.json: 'num_hidden_layers' must be <= 10,000: got 1,000,000,000,000"
    assert "<config dict>" not in msg
    fields = {k: v for k, v in LLAMA_TINY.items() if k != "model_type"}
    msg = error(resolve_model, {**fields, "name": "x", "hidden_size": 10**9}, origin="s.json")
    assert msg == "s.json: 'hidden_size' must be <= 1,048,576: got 1,000,000,000"
