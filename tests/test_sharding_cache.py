"""calc.sharding caches its per-GPU weight tables: a caller must not be able to corrupt them."""

import pytest

from calc.presets import load_preset
from calc.sharding import weight_bytes_per_gpu, weight_params_per_gpu


@pytest.mark.parametrize("fn", [weight_params_per_gpu, weight_bytes_per_gpu])
def test_cached_table_cannot_be_changed_by_a_caller(fn):
    spec = load_preset("llama-2-7b")
    first = fn(spec, 1, 1)
    before = dict(first)
    with pytest.raises(TypeError):
        first["mlp"] = 0  # a dict would accept this and poison the cache
    again = fn(spec, 1, 1)
    assert dict(again) == before
    # llama-2-7b at tp=1: 32 layers x 3 x 4096 x 11008 MLP weights (published shape)
    assert before["mlp"] == 32 * 3 * 4096 * 11008 * (2 if fn is weight_bytes_per_gpu else 1)


def test_memory_plan_breakdown_is_still_a_plain_dict():
    from calc.capacity import memory_plan

    p = memory_plan("llama-2-7b", "a100-80gb", seq_len=4096)
    assert isinstance(p.weight_breakdown_bytes, dict)
    assert sum(p.weight_breakdown_bytes.values()) == p.weight_bytes
