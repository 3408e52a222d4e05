"""calc.limits: one table of upper bounds, enforced by ModelSpec, the scalar API's counts, the CLI
and the dashboard, with errors that name the field, the bound and the value."""

from __future__ import annotations

import numpy as np
import pytest

import calc
from calc import limits
from calc.errors import check_count, format_error, show_value
from calc.limits import check_limit

TOY = dict(
    name="toy",
    num_hidden_layers=2,
    hidden_size=64,
    num_attention_heads=8,
    intermediate_size=128,
    vocab_size=100,
)


def spec_error(**changes) -> str:
    with pytest.raises(ValueError) as e:
        calc.ModelSpec(**{**TOY, **changes})
    return format_error(e.value)


def test_check_limit_names_field_bound_and_value():
    with pytest.raises(ValueError) as e:
        check_limit("hidden_size", 10**9)
    assert str(e.value) == "'hidden_size' must be <= 1,048,576: got 1,000,000,000"  # 2**20
    assert check_limit("hidden_size", 2**20) == 2**20  # the bound itself is allowed
    assert check_limit("no_such_field", 10**30) == 10**30  # unbounded names pass
    assert check_limit("hidden_size", "x") == "x"  # not a number: pydantic names the type


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        (
            "num_hidden_layers",
            10**12,
            "'num_hidden_layers' must be <= 10,000: got 1,000,000,000,000",
        ),
        ("hidden_size", 10**9, "'hidden_size' must be <= 1,048,576: got 1,000,000,000"),
        # JSON's 1e12 is a float, which lax pydantic would read as an int: bounded too
        ("num_hidden_layers", 1e12, "must be <= 10,000: got 1,000,000,000,000"),
        ("num_hidden_layers", "1000000000000", "must be <= 10,000: got 1,000,000,000,000"),
        ("head_dim", 2**14 + 1, "'head_dim' must be <= 16,384: got 16,385"),
        ("vocab_size", 2**24 + 1, "'vocab_size' must be <= 16,777,216: got 16,777,217"),
        ("max_position_embeddings", 2**27, "'max_position_embeddings' must be <= 67,108,864"),
        ("num_local_experts", 10**6, "'num_local_experts' must be <= 16,384: got 1,000,000"),
    ],
)
def test_model_spec_refuses_absurd_sizes_with_one_clear_message(field, value, message):
    msg = spec_error(**{field: value})
    assert message in msg
    assert msg.count(f"'{field}'") == 1  # named once, not "'f' 'f' must ...: got ...: got"


def test_a_number_too_long_to_print_is_described_not_printed():
    msg = spec_error(num_hidden_layers=10**5000)  # str() refuses ints over 4300 digits
    assert msg == "'num_hidden_layers' must be <= 10,000: got a number of about 5,000 digits"


def test_the_bounds_themselves_are_valid_models():
    big = calc.ModelSpec(
        **{
            **TOY,
            "num_hidden_layers": 10_000,
            "hidden_size": 2**20,
            "num_attention_heads": 2**14,
            "intermediate_size": 2**22,
            "vocab_size": 2**24,
            "max_position_embeddings": 2**26,
        }
    )
    # 2 x 10,000 layers x 16,384 KV heads x (2**20 / 2**14 = 64) head_dim x 2 B per token
    assert calc.kv_bytes_per_token(big, "bf16") == 2 * 10_000 * 2**14 * 64 * 2


@pytest.mark.parametrize("name", calc.list_presets())
def test_every_preset_is_far_inside_the_bounds(name):
    """The bounds are for typos and hostile files: every real model is 5x or more below."""
    spec = calc.load_preset(name)
    for field in ("num_hidden_layers", "hidden_size", "num_attention_heads", "intermediate_size"):
        assert 5 * getattr(spec, field) <= limits.limit(field), field
    assert 5 * spec.head_dim <= limits.limit("head_dim")
    assert 5 * spec.vocab_size <= limits.limit("vocab_size")
    assert 5 * spec.max_position_embeddings <= limits.limit("max_position_embeddings")


def test_api_counts_are_bounded_too():
    spec = calc.load_preset("llama-3-70b")
    with pytest.raises(ValueError, match=r"'batch' must be <= 16,777,216: got 1\.00e\+30"):
        calc.kv_cache_bytes(spec, 8192, 10**30)
    with pytest.raises(ValueError, match=r"'seq_len' must be <= 2,147,483,648: got 2,147,483,649"):
        calc.kv_cache_bytes(spec, 2**31 + 1)
    # at the bound the product is exact: 2 x 80 x 8 x 128 x 2**31 tokens x 2 B
    assert calc.kv_cache_bytes(spec, 2**31) == 2 * 80 * 8 * 128 * 2**31 * 2
    assert check_count("gpus", np.int64(4096)) == 4096
    with pytest.raises(ValueError, match="'gpus' must be <= 4,096: got 4,097"):
        check_count("gpus", 4097)
    assert check_count("n", 10**30) == 10**30  # a count with no bound stays unbounded


def test_error_values_are_cut_to_a_readable_length():
    assert show_value(5) == "5"
    long = show_value("a" * 1_000_000)
    assert len(long) < 120 and long.endswith("(1,000,002 characters)")  # repr adds 2 quotes
    assert show_value(10**30) == "1.00e+30"
    msg = spec_error(num_hidden_layers="x" * 10_000)
    assert len(msg) < 300
