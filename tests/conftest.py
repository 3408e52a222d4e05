"""Toy specs several test files share (import them: `from conftest import TOY, toy`).

TOY: L=4 layers, h=32, H=4 query heads (head_dim 8), G=2 KV heads, gated MLP f=64, V=100: the
hand-countable model of the formula tests (attention, KV cache, sweep, public API).
TOY_GQA: L=3, h=64, H=4, G=2, f=128, V=97: small enough that no validation check reduces its
attention geometry (validate failures and presets).
"""

from __future__ import annotations

from calc.spec import ModelSpec

TOY_SHAPE = dict(
    num_hidden_layers=4,
    hidden_size=32,
    num_attention_heads=4,
    num_key_value_heads=2,
    intermediate_size=64,
    vocab_size=100,
)
TOY = dict(name="toy", **TOY_SHAPE)


def toy(**changes) -> ModelSpec:
    """TOY with some fields changed."""
    return ModelSpec(**{**TOY, **changes})


TOY_GQA = ModelSpec(
    name="toy-gqa",
    num_hidden_layers=3,
    hidden_size=64,
    num_attention_heads=4,
    num_key_value_heads=2,
    intermediate_size=128,
    vocab_size=97,
)


# the figures calc.plan and a calc.sweep_plans row both report (test_plan_sweep, test_plan_unified)
PLAN_COLUMNS = [
    "output_tokens",
    "weight_bytes",
    "activation_bytes",
    "reserve_bytes",
    "kv_budget_bytes",
    "kv_blocks",
    "kv_tokens",
    "max_concurrent_seqs",
    "fits",
    "shortfall_bytes",
    "ttft_s",
    "tpot_s",
    "e2e_s",
    "tokens_per_s_total",
]


# Property tests draw the same examples on every run (CI must not fail by chance); set
# HYPOTHESIS_PROFILE=explore to draw new ones, ten times as many.
def _hypothesis_profiles() -> None:
    import os

    from hypothesis import settings

    settings.register_profile("default", derandomize=True)
    settings.register_profile("explore", max_examples=1000)
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


_hypothesis_profiles()
