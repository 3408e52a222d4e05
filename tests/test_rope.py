"""Rope scaling and the cos/sin tables vLLM keeps with the weights (calc/rope.py, calc/hf/rope.py,
calc.serving.sharding.rotary_tables).

Expected values are written out from vLLM 0.19.0's sdist (vllm/model_executor/layers/
rotary_embedding/: linear_scaling_rope.py max_len = max_position_embeddings * scaling_factor;
yarn_scaling_rope.py and deepseek_scaling_rope.py torch.arange(original_max_position *
scaling_factor); llama3_rope.py the base table of max_position rows; dynamic_ntk_scaling_rope.py
max_position * scaling_factor; phi3_long_rope_scaled_rope.py a short table of
original_max_position rows and a long one of max_position rows; __init__.py get_rope, one table
per distinct key, rotary_dim = int(head_size * partial_rotary_factor)) and from the llm-d-planner
start-up logs (https://github.com/llm-d-incubation/llm-d-planner @ d3121e0, accuracy/results/
v0.19.0/logs/google-gemma-3-*-it--h100-80gb--tp1pp1dp1--8192.log, "Model loading took").
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

import calc
from calc.rope import RopeScaling
from calc.serving import engine_plan
from calc.serving.sharding import rotary_cache_bytes, rotary_tables

FIX = Path(__file__).parent / "fixtures"
LOGS = Path(__file__).parent.parent / "benchmarks" / "engine_logs"
GIB = 1 << 30


def _cfg(rel: str) -> dict:
    return json.loads((FIX / rel).read_text())


def test_rows_per_rope_type():
    P = 131072
    assert RopeScaling(rope_type="linear", factor=8.0).table_rows(P) == 1048576
    assert RopeScaling(rope_type="dynamic", factor=2.0).table_rows(P) == 262144
    yarn = RopeScaling(rope_type="yarn", factor=4.0, original_max_position_embeddings=32768)
    assert yarn.table_rows(40960) == 131072  # Qwen3's recommended YaRN: not max_position
    llama3 = RopeScaling(rope_type="llama3", factor=8.0, original_max_position_embeddings=8192)
    assert llama3.table_rows(P) == P
    longrope = RopeScaling(rope_type="longrope", original_max_position_embeddings=4096)
    assert longrope.table_rows(P) == 4096 + P


# Gemma 3 (head_dim 256 / 128 for 27B, max_position_embeddings 131072, rope_scaling linear factor 8 on the
# global layers, sliding layers with their own rope of base rope_local_base_freq: vLLM 0.19.0
# gemma3.py overrides their rope_parameters): two tables, (131072 x 8 + 131072) x head_dim x 2 B.
GEMMA3 = {
    "gemma-3-4b": "llmd-019-gemma3-4b-tp1-8192",
    "gemma-3-12b": "llmd-019-gemma3-12b-tp1-8192",
    "gemma-3-27b": "llmd-019-gemma3-27b-tp1-8192",
}


@pytest.mark.parametrize("preset", sorted(GEMMA3))
def test_gemma3_keeps_a_scaled_global_table_and_a_local_one(preset):
    spec = calc.load_preset(preset)
    d = spec.head_dim  # 256 (4B, 12B), 128 (27B)
    assert rotary_tables(spec) == ((131072 * 8, d), (131072, d))
    assert rotary_cache_bytes(spec, 2) == (131072 * 8 + 131072) * d * 2
    plan = engine_plan(spec, "h100-sxm", version="0.19.0", max_model_len=8192)
    logged = tomllib.loads((LOGS / f"{GEMMA3[preset]}.toml").read_text())["logged"]["weights_gib"]
    assert abs(plan.weights_bytes / GIB - logged) / logged < 0.005  # was -5.9 / -2.4 / -0.6 %


def test_gemma3_1b_two_tables_of_the_same_length():
    """No rope scaling, but the global rope (base 1e6) and the local one (1e4) are two keys."""
    spec = calc.from_hf_config(FIX / "hf/modern/gemma-3-1b.json")
    P, d = spec.max_position_embeddings, spec.head_dim
    assert rotary_tables(spec) == ((P, d), (P, d))


def test_yarn_mla_and_partial_rotary():
    # DeepSeek-V3: yarn 4096 x 40 rows of qk_rope_head_dim 64 (deepseek_v2.py get_rope(qk_rope..))
    v3 = calc.from_hf_config(FIX / "hf/modern/deepseek-v3.json")
    assert rotary_tables(v3) == ((4096 * 40, 64),)
    # GLM-4.5: partial_rotary_factor 0.5 of head_dim 128; Qwen3-Next: 0.25 of 256
    glm = calc.from_hf_config(FIX / "hf/modern/glm-4.5.json")
    assert rotary_tables(glm) == ((glm.max_position_embeddings, 64),)
    nxt = calc.from_hf_config(FIX / "hf/modern/qwen3-next-80b-a3b.json")
    assert rotary_tables(nxt) == ((nxt.max_position_embeddings, 64),)
    # Qwen3-8B with the model card's YaRN (https://huggingface.co/Qwen/Qwen3-8B "Processing Long
    # Texts": rope_type yarn, factor 4.0, original_max_position_embeddings 32768)
    cfg = _cfg("hf/modern/qwen3-8b.json") | {
        "rope_scaling": {
            "rope_type": "yarn",
            "factor": 4.0,
            "original_max_position_embeddings": 32768,
        }
    }
    assert rotary_tables(calc.from_hf_config(cfg)) == ((131072, 128),)


def test_deepseek_v32_indexer_has_its_own_table():
    """deepseek_v2.py (0.19.0): indexer_rope_emb = get_rope(qk_rope_head_dim, ..., is_neox_style
    = not indexer_rope_interleave), another key than the attention's (is_neox_style=False)."""
    spec = calc.from_hf_config(FIX / "deepseek_v32/DeepSeek-V3.2-Exp.config.json")
    assert rotary_tables(spec) == ((163840, 64), (163840, 64))


@pytest.mark.parametrize(
    ("rope", "match"),
    [
        ({"rope_type": "ntk", "factor": 2.0}, "rope_type must be default or one of"),
        ({"rope_type": "linear"}, "factor is required"),
        ({"rope_type": "yarn", "factor": 4.0}, "original_max_position_embeddings"),
        ({"rope_type": "linear", "factor": "8"}, "factor must be a number"),
        ({"full_attention": {"rope_type": "default"}}, "per layer type"),
    ],
)
def test_unmodelled_rope_is_refused_by_name(rope, match):
    cfg = _cfg("hf/modern/qwen3-8b.json") | {"rope_scaling": rope}
    with pytest.raises(ValueError, match="rope_scaling") as e:
        calc.from_hf_config(cfg)
    assert match in str(e.value)


def test_rope_parameters_of_transformers_5():
    """Qwen3.5 states rope_parameters (type default + mrope_section, partial 0.25): no scaling,
    rotary_dim 256 x 0.25."""
    spec = calc.from_hf_config(FIX / "checkpoints/hub-configs/qwen3.5-27b.json")
    assert spec.rope_scaling is None and spec.partial_rotary_factor == 0.25
