"""ModelSpec: validation messages, frozen/hashable behaviour and derived properties.

Expected values are written out from the definitions (H query heads, G KV heads, d head size)
and from the Gemma 2 / Gemma 3 reference code for which layers slide.
"""

from __future__ import annotations

import pytest
from pydantic import ValidationError

import calc
from calc import ModelSpec, format_error

BASE = dict(
    name="toy",
    num_hidden_layers=4,
    hidden_size=64,
    num_attention_heads=8,
    intermediate_size=128,
    vocab_size=100,
)


def spec(**changes) -> ModelSpec:
    return ModelSpec(**{**BASE, **changes})


def error_line(**changes) -> str:
    with pytest.raises(ValidationError) as info:
        spec(**changes)
    return format_error(info.value)


# --- validation: field, constraint, value ---------------------------------------------------


@pytest.mark.parametrize(
    "field",
    [
        "num_hidden_layers",
        "hidden_size",
        "num_attention_heads",
        "num_key_value_heads",
        "head_dim",
        "intermediate_size",
        "vocab_size",
        "max_position_embeddings",
        "sliding_window",
        "num_local_experts",
        "num_experts_per_tok",
    ],
)
@pytest.mark.parametrize("value", [0, -3])
def test_sizes_must_be_positive(field, value):
    line = error_line(**{field: value})
    assert line.startswith(f"'{field}'")
    assert "greater than 0" in line
    assert line.endswith(f"got {value}")


def test_validation_error_is_a_value_error():
    # pydantic's ValidationError subclasses ValueError: callers catch one type
    with pytest.raises(ValueError):
        spec(hidden_size=-1)


def test_kv_heads_must_divide_query_heads():
    line = error_line(num_attention_heads=64, hidden_size=8192, num_key_value_heads=5)
    assert line == "'num_key_value_heads' must divide num_attention_heads=64: got 5"


def test_head_dim_needed_when_hidden_not_divisible():
    # 100 / 8 heads is not whole: without head_dim there is no head size
    line = error_line(hidden_size=100)
    assert "'hidden_size'" in line and "num_attention_heads=8" in line
    assert "head_dim" in line and line.endswith("got 100")
    # with an explicit head_dim the same shape is fine
    assert spec(hidden_size=100, head_dim=16).head_dim == 16


def test_experts_per_token_at_most_experts():
    line = error_line(num_local_experts=8, num_experts_per_tok=9)
    assert line == "'num_experts_per_tok' must be <= num_local_experts=8: got 9"


def test_pattern_needs_a_window():
    line = error_line(sliding_window_pattern=6)
    assert "'sliding_window_pattern'" in line and "sliding_window=None" in line
    assert "6" in line


def test_parallel_block_refuses_four_norms():
    line = error_line(block_kind="parallel", norms_per_block=4)
    assert "'norms_per_block'" in line and "parallel" in line and line.endswith("got 4")


def test_norms_per_block_is_one_two_or_four():
    line = error_line(norms_per_block=3)
    assert line.startswith("'norms_per_block'") and line.endswith("got 3")


@pytest.mark.parametrize("field", ["mlp_kind", "norm_kind", "position_embedding", "block_kind"])
def test_unknown_choice_names_field_and_value(field):
    line = error_line(**{field: "banana"})
    assert line.startswith(f"'{field}'") and line.endswith("got 'banana'")


def test_unknown_field_is_refused():
    line = error_line(n_layers=4)  # a GPT-2 name, not the HF one this spec uses
    assert line.startswith("'n_layers'") and "extra" in line.lower() and line.endswith("got 4")


@pytest.mark.parametrize("field", ["num_hidden_layers", "num_key_value_heads", "head_dim"])
def test_bool_is_not_an_integer(field):
    # lax pydantic would read True as 1
    line = error_line(**{field: True})
    assert line == f"'{field}' must be an integer, not a bool: got True"


@pytest.mark.parametrize("value", [1, "yes", "false"])
def test_flags_must_be_booleans(value):
    line = error_line(tie_word_embeddings=value)
    assert line.startswith("'tie_word_embeddings'") and line.endswith(f"got {value!r}")


def test_empty_name_is_refused():
    assert error_line(name="").startswith("'name'")


def test_several_errors_on_one_line():
    line = error_line(hidden_size=-1, vocab_size=0)
    assert "\n" not in line
    assert "'hidden_size'" in line and "'vocab_size'" in line


# --- frozen, hashable, round trip -----------------------------------------------------------


def test_frozen():
    s = spec()
    with pytest.raises(ValidationError) as info:
        s.hidden_size = 128
    assert "frozen" in format_error(info.value)
    assert s.hidden_size == 64


def test_hashable_and_equal_by_value():
    a, b = spec(), spec()
    assert a == b and hash(a) == hash(b)
    assert len({a, b, spec(vocab_size=101)}) == 2
    cache = {a: "cached"}
    assert cache[b] == "cached"  # what Streamlit's cache relies on


def test_dump_round_trip():
    s = spec(head_dim=32, num_key_value_heads=2, sliding_window=16, sliding_window_pattern=2)
    assert ModelSpec.model_validate(s.model_dump()) == s
    assert ModelSpec.model_validate(s.model_dump(by_alias=True)) == s
    assert s.model_dump(by_alias=True)["head_dim"] == 32


def test_replace_head_dim_by_either_name():
    s = spec()
    assert s.replace(head_dim=16).head_dim == 16  # the config.json name
    assert s.replace(head_dim_=16).head_dim == 16  # the field's own name (model_dump's key)
    assert s.replace(head_dim=16).replace(head_dim=None).head_dim == 64 // 8


def test_replace_validates():
    s = spec()
    assert s.replace(num_key_value_heads=2).n_kv_heads == 2
    assert s.n_kv_heads == 8  # the original is unchanged
    with pytest.raises(ValidationError) as info:
        s.replace(num_key_value_heads=3)
    assert format_error(info.value) == (
        "'num_key_value_heads' must divide num_attention_heads=8: got 3"
    )


# --- derived properties ---------------------------------------------------------------------


def test_head_dim_derived_and_explicit():
    assert spec().head_dim == 64 // 8  # hidden / heads
    # Gemma 7B: hidden 3072, 16 heads, head_dim 256 (config.json), not 3072 / 16 = 192
    gemma = spec(hidden_size=3072, num_attention_heads=16, head_dim=256)
    assert gemma.head_dim == 256
    assert gemma.q_dim == 16 * 256 == 4096  # wider than the hidden size


@pytest.mark.parametrize(
    ("kv_heads", "groups", "kind", "kv_dim"),
    [
        (None, 1, "MHA", 8 * 8),  # None: as many KV heads as query heads
        (8, 1, "MHA", 8 * 8),
        (4, 2, "GQA", 4 * 8),
        (2, 4, "GQA", 2 * 8),
        (1, 8, "MQA", 1 * 8),
    ],
)
def test_kv_groups_and_kind(kv_heads, groups, kind, kv_dim):
    s = spec(num_key_value_heads=kv_heads)
    assert s.kv_groups == groups  # H / G
    assert s.attention_kind == kind
    assert s.kv_dim == kv_dim  # G * d, d = 64 / 8 = 8
    assert s.q_dim == 64


def test_llama_2_70b_shape():
    # config.json: 64 heads, 8 KV heads, hidden 8192 -> d = 128, 8 query heads per KV head
    s = spec(hidden_size=8192, num_attention_heads=64, num_key_value_heads=8)
    assert (s.head_dim, s.kv_groups, s.attention_kind) == (128, 8, "GQA")


def test_no_window_no_sliding_layers():
    s = spec()
    assert s.layer_is_sliding == (False,) * 4
    assert (s.n_sliding_layers, s.n_full_layers) == (0, 4)


def test_window_without_pattern_slides_every_layer():
    # Mistral 7B v0.1: sliding_window 4096 on all 32 layers
    s = spec(num_hidden_layers=32, sliding_window=4096)
    assert s.layer_is_sliding == (True,) * 32
    assert (s.n_sliding_layers, s.n_full_layers) == (32, 0)


def test_gemma_2_pattern_alternates_starting_with_sliding():
    # transformers models/gemma2/configuration_gemma2.py: layer_types[i] is "sliding_attention"
    # if bool((i + 1) % 2), so layers 0, 2, 4, ... slide and 1, 3, 5, ... are global.
    # Gemma 2 9B config.json: 42 layers, sliding_window 4096.
    s = spec(num_hidden_layers=42, sliding_window=4096, sliding_window_pattern=2)
    expected = tuple(i % 2 == 0 for i in range(42))
    assert s.layer_is_sliding == expected
    assert s.layer_is_sliding[:4] == (True, False, True, False)
    assert (s.n_sliding_layers, s.n_full_layers) == (21, 21)


def test_gemma_3_pattern_five_local_one_global():
    # transformers models/gemma3/configuration_gemma3.py: sliding_window_pattern 6 and
    # layer_types[i] = "sliding_attention" if bool((i + 1) % 6): layers 5, 11, 17, ... (0-based)
    # are global. Gemma 3 27B config.json: 62 layers, window 1024; 62 // 6 = 10 global layers.
    s = spec(num_hidden_layers=62, sliding_window=1024, sliding_window_pattern=6)
    globals_ = [i for i, sliding in enumerate(s.layer_is_sliding) if not sliding]
    assert globals_ == [5, 11, 17, 23, 29, 35, 41, 47, 53, 59]
    assert (s.n_sliding_layers, s.n_full_layers) == (62 - 10, 10)


@pytest.mark.parametrize("layers", [1, 5, 6, 7, 12, 13])
@pytest.mark.parametrize("pattern", [1, 2, 3, 6])
def test_layer_counts_agree_with_layer_list(layers, pattern):
    s = spec(num_hidden_layers=layers, sliding_window=8, sliding_window_pattern=pattern)
    assert s.n_sliding_layers == sum(s.layer_is_sliding)
    assert s.n_full_layers == layers - sum(s.layer_is_sliding)


def test_moe_flag_and_label():
    assert not spec().is_moe
    assert spec(num_local_experts=8, num_experts_per_tok=2).is_moe
    assert spec().label == "toy"
    assert spec(display_name="Toy 1B").label == "Toy 1B"


def test_model_copy_does_not_reuse_derived_values():
    # derived values are cached per spec; a copy with other fields must not see the original's
    spec = calc.load_preset("llama-3-70b")
    assert calc.param_breakdown(spec)["attn/kv"] == 80 * 2 * 8192 * 8 * 128
    mha = spec.model_copy(update={"num_key_value_heads": 64})
    assert calc.param_breakdown(mha)["attn/kv"] == 80 * 2 * 8192 * 64 * 128  # 10,737,418,240
    assert calc.param_breakdown(spec)["attn/kv"] == 80 * 2 * 8192 * 8 * 128  # untouched
