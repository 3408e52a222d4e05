"""The public surface of `calc`: what `__all__` promises, and how every function refuses bad input.

When a feature lands, add its names to EXPECTED_ALL in the same commit as the export in
calc/__init__.py, and a bad-input case to BAD_CALLS (or the exemptions, with the reason).
"""

from __future__ import annotations

import pytest
from conftest import toy

import calc

EXPECTED_ALL = sorted(
    [
        "AttentionComparison",
        "AttentionReport",
        "AttentionVariant",
        "COMPONENTS",
        "DTYPES",
        "KVCacheReport",
        "ModelSpec",
        "ParamReport",
        "active_param_count",
        "attention_cost",
        "attention_flops_decode",
        "attention_flops_prefill",
        "attention_pairs",
        "canonical_dtype",
        "compare_attention",
        "format_error",
        "forward_flops_decode",
        "forward_flops_prefill",
        "fused_attention_bytes",
        "kv_bytes_per_token",
        "kv_bytes_per_token_per_layer",
        "kv_cache",
        "kv_cache_bytes",
        "kv_cache_layer_bytes",
        "kv_cache_group_bytes",
        "state_bytes_per_sequence",
        "LayerGroup",
        "Linear",
        "layer_breakdown",
        "linear_layers",
        "list_presets",
        "load_preset",
        "matmul_params",
        "nbytes",
        "non_embedding_param_count",
        "param_breakdown",
        "param_count",
        "params_report",
        "resolve_model",
        "score_matrix_bytes",
        "sweep",
        "training_flops_per_token",
        # loaded lazily on first use (calc._LAZY)
        "from_hf_config",
        "to_hf_config",
        "ErrataReport",
        "Erratum",
        "check_errata",
        "fmt_bytes",
        "fmt_flops",
        "fmt_params",
        "HardwareSpec",
        "list_hardware",
        "load_hardware",
        "resolve_hardware",
        "FitResult",
        "FitTable",
        "MemoryPlan",
        "fewest_gpus",
        "fit_table",
        "memory_plan",
        "PhaseCost",
        "Roofline",
        "roofline",
        "Plan",
        "plan",
        "sweep_plans",
        "weight_bytes",
        "weight_bytes_breakdown",
    ]
)


def test_all_is_the_expected_surface():
    assert sorted(calc.__all__) == EXPECTED_ALL
    assert len(set(calc.__all__)) == len(calc.__all__)  # no name twice


@pytest.mark.parametrize("name", EXPECTED_ALL)
def test_every_name_exists(name):
    assert getattr(calc, name) is not None


def test_version():
    assert isinstance(calc.__version__, str) and calc.__version__.count(".") == 2


# --- bad input, for every public function that takes counts or a dtype ------------------------

SPEC = toy(num_hidden_layers=2)
NEG_SEQ = "'seq_len' must be an integer >= 0: got -1"
ZERO_BATCH = "'batch' must be an integer > 0: got 0"
BOOL_BATCH = "'batch' must be an integer > 0: got True"
NEG_CONTEXT = "'context' must be an integer >= 0: got -1"
DTYPE = "got 'fp12'"

BAD_CALLS = [
    # (function name, call, text the one-line error must contain)
    ("kv_cache_bytes", lambda f: f(SPEC, -1), NEG_SEQ),
    ("kv_cache_bytes", lambda f: f(SPEC, 8, 0), ZERO_BATCH),
    ("kv_cache_bytes", lambda f: f(SPEC, 8, True), BOOL_BATCH),
    ("kv_cache_bytes", lambda f: f(SPEC, 8, 1, "fp12"), DTYPE),
    ("kv_cache_bytes", lambda f: f(SPEC, 8, block_size=0), "'block_size' must be"),
    ("kv_cache_layer_bytes", lambda f: f(SPEC, -1), NEG_SEQ),
    ("kv_cache_layer_bytes", lambda f: f(SPEC, 8, 0), ZERO_BATCH),
    ("kv_cache_layer_bytes", lambda f: f(SPEC, 8, 1, "fp12"), DTYPE),
    ("kv_cache_layer_bytes", lambda f: f(SPEC, 8, block_size=-16), "got -16"),
    ("kv_cache_group_bytes", lambda f: f(SPEC, -1), NEG_SEQ),
    ("kv_cache_group_bytes", lambda f: f(SPEC, 8, 1, "fp12"), DTYPE),
    ("state_bytes_per_sequence", lambda f: f(SPEC, "fp12"), DTYPE),
    ("layer_breakdown", lambda f: f(SPEC, 99), "'layer' must be a layer index < 2: got 99"),
    ("kv_bytes_per_token", lambda f: f(SPEC, "fp12"), DTYPE),
    ("kv_bytes_per_token_per_layer", lambda f: f(SPEC, "fp12"), DTYPE),
    ("kv_cache", lambda f: f(SPEC, -1), NEG_SEQ),
    ("kv_cache", lambda f: f(SPEC, 8, True), BOOL_BATCH),
    ("kv_cache", lambda f: f(SPEC, 8, 1, "fp12"), DTYPE),
    ("kv_cache", lambda f: f(SPEC, 8, block_size=0), "'block_size' must be"),
    ("attention_pairs", lambda f: f(-1), "'n' must be an integer >= 0: got -1"),
    ("attention_pairs", lambda f: f(8, window=0), "'window' must be an integer > 0: got 0"),
    ("attention_flops_prefill", lambda f: f(SPEC, -1), NEG_SEQ),
    ("attention_flops_prefill", lambda f: f(SPEC, 8, 0), ZERO_BATCH),
    ("attention_flops_decode", lambda f: f(SPEC, -1), NEG_CONTEXT),
    ("attention_flops_decode", lambda f: f(SPEC, 8, True), BOOL_BATCH),
    ("score_matrix_bytes", lambda f: f(SPEC, -1), NEG_SEQ),
    ("score_matrix_bytes", lambda f: f(SPEC, 8, 1, "fp12"), DTYPE),
    ("fused_attention_bytes", lambda f: f(SPEC, 8, 0), ZERO_BATCH),
    ("fused_attention_bytes", lambda f: f(SPEC, 8, 1, "fp12"), DTYPE),
    ("forward_flops_prefill", lambda f: f(SPEC, -1), NEG_SEQ),
    ("forward_flops_prefill", lambda f: f(SPEC, 8, "2"), "'batch' must be an integer > 0: got '2'"),
    ("forward_flops_decode", lambda f: f(SPEC, -1), NEG_CONTEXT),
    ("forward_flops_decode", lambda f: f(SPEC, 8, 0), ZERO_BATCH),
    ("training_flops_per_token", lambda f: f(SPEC, 0), "'seq_len' must be an integer > 0: got 0"),
    ("attention_cost", lambda f: f(SPEC, -1), NEG_SEQ),
    ("attention_cost", lambda f: f(SPEC, 8, 0), ZERO_BATCH),
    ("attention_cost", lambda f: f(SPEC, 8, 1, "fp12"), DTYPE),
    ("compare_attention", lambda f: f(SPEC, -1), NEG_SEQ),
    ("compare_attention", lambda f: f(SPEC, 8, True), BOOL_BATCH),
    ("compare_attention", lambda f: f(SPEC, 8, 1, "fp12"), DTYPE),
    ("sweep", lambda f: f([SPEC], [-1]), NEG_SEQ),
    ("sweep", lambda f: f([SPEC], [8], [0]), ZERO_BATCH),
    ("sweep", lambda f: f([SPEC], [8], [True]), BOOL_BATCH),
    ("sweep", lambda f: f([SPEC], [8], [1], ["fp12"]), DTYPE),
    ("nbytes", lambda f: f(-1, "bf16"), "'n_elements' must be an integer >= 0: got -1"),
    ("nbytes", lambda f: f(8, "fp12"), DTYPE),
    ("canonical_dtype", lambda f: f("fp12"), DTYPE),
    ("load_preset", lambda f: f("llama-2-70"), "unknown preset 'llama-2-70'"),
    ("resolve_model", lambda f: f("no-such-model"), "unknown preset 'no-such-model'"),
    ("ModelSpec", lambda f: f(**{**SPEC.model_dump(), "hidden_size": -1}), "'hidden_size'"),
    ("from_hf_config", lambda f: f({"model_type": "bert"}), "'model_type' must be one of"),
    ("to_hf_config", lambda f: f(calc.load_preset("palm-8b")), "palm-8b"),
    ("load_hardware", lambda f: f("h100"), "unknown GPU 'h100'"),
    ("resolve_hardware", lambda f: f("no-such-gpu"), "unknown GPU 'no-such-gpu'"),
    ("memory_plan", lambda f: f("llama-2-7b", "a100-80gb", gpus=0), "'gpus' must be"),
    ("fewest_gpus", lambda f: f("llama-2-7b", "a100-80gb", seq_len=-1), "'seq_len' must be"),
    ("fit_table", lambda f: f("llama-2-7b", seq_len=8, batch=0), "'batch' must be"),
    (
        "roofline",
        lambda f: f("llama-2-7b", "a100-80gb", prompt_tokens=8, output_tokens=8, mfu=1.5),
        "'mfu' must be",
    ),
    (
        "plan",
        lambda f: f("llama-2-7b", "a100-80gb", gpu_memory_utilization=0),
        "'gpu_memory_utilization'",
    ),
    ("sweep_plans", lambda f: f(["llama-2-7b"], ["a100-80gb"], tps=[3]), "no tp in [3] divides"),
    ("sweep_plans", lambda f: f(["llama-2-7b"], ["h100"]), "unknown GPU 'h100'"),
    ("weight_bytes", lambda f: f(SPEC, dtype="fp12"), DTYPE),
    ("weight_bytes_breakdown", lambda f: f(SPEC, dtype="fp12"), DTYPE),
]


@pytest.mark.parametrize(
    ("name", "call", "expected"),
    BAD_CALLS,
    ids=[f"{name}-{i}" for i, (name, _, _) in enumerate(BAD_CALLS)],
)
def test_bad_input_is_a_one_line_value_error(name, call, expected):
    with pytest.raises(ValueError) as info:
        call(getattr(calc, name))
    line = calc.format_error(info.value)
    assert expected in line
    assert "\n" not in line


def test_every_counting_function_has_a_bad_input_case():
    # functions and reports that take counts, dtypes or names; the report classes and
    # constants do not take input
    takes_input = {
        n for n in EXPECTED_ALL if callable(getattr(calc, n)) and not n.endswith(("Report",))
    }
    takes_input -= {
        "AttentionComparison",
        "AttentionVariant",
        "format_error",  # formats any exception
        "list_presets",  # no arguments
        "param_breakdown",  # spec only: the spec validated itself
        "param_count",
        "active_param_count",
        "non_embedding_param_count",
        "matmul_params",
        "linear_layers",  # spec only
        "LayerGroup",  # records
        "Linear",
        "params_report",
        "check_errata",  # no arguments
        "list_hardware",  # no arguments
        "fmt_bytes",  # formats any number (a negative budget is shown, not refused)
        "fmt_flops",
        "fmt_params",
        # result types: built by the functions above, validated by pydantic
        "Erratum",
        "ErrataReport",
        "FitResult",
        "FitTable",
        "HardwareSpec",
        "MemoryPlan",
        "PhaseCost",
        "Plan",
        "Roofline",
    }
    covered = {name for name, _, _ in BAD_CALLS}
    assert takes_input <= covered, sorted(takes_input - covered)


def test_format_error_is_one_line():
    err = ValueError("first line\n  second line")
    assert calc.format_error(err) == "first line second line"
    assert calc.format_error(KeyError()) == "KeyError"
