"""calc.quant.sharding.stored_bytes_per_gpu: a checkpoint's bytes on one GPU under TP / EP, against
calc.sharding (an independent implementation for unquantized weights) and arithmetic written out
for quantized layouts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import calc
from calc.quant import parse_quantization_config
from calc.quant.sharding import stored_bytes_per_gpu
from calc.sharding import weight_bytes_per_gpu
from calc.spec import ModelSpec

FIXTURES = Path(__file__).parent / "fixtures" / "checkpoints"


@pytest.mark.parametrize(
    ("preset", "tp"), [("llama-2-70b", 8), ("llama-3-8b", 2), ("mixtral-8x7b", 4), ("qwen2-72b", 4)]
)
def test_unquantized_matches_calc_sharding(preset, tp):
    spec = calc.load_preset(preset)
    assert sum(stored_bytes_per_gpu(spec, tp).values()) == sum(
        weight_bytes_per_gpu(spec, tp).values()
    )


def tiny(qc: dict | None = None, **fields) -> ModelSpec:
    base = dict(
        name="t",
        num_hidden_layers=1,
        hidden_size=4096,
        num_attention_heads=32,
        num_key_value_heads=8,
        intermediate_size=14336,
        vocab_size=32000,
    )
    base.update(fields)
    if qc is not None:
        base["quantization"] = parse_quantization_config(qc, dtype="fp16")
    return ModelSpec(**base)


def gptq(inp: int, out: int, groups: int) -> int:
    """qweight + qzeros + scales + g_idx of one GPTQ 4-bit matrix (AutoGPTQ QuantLinear)."""
    return inp // 8 * out * 4 + groups * out // 8 * 4 + groups * out * 2 + inp * 4


def test_gptq_tp2_column_and_row_shards():
    spec = tiny({"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": False})
    b = stored_bytes_per_gpu(spec, tp=2)
    assert b["attn/q"] == 0 and b["attn/q:packed"] == 4096 // 8 * 2048 * 4
    q = gptq(4096, 2048, 32)  # q_proj: half the rows
    kv = 2 * gptq(4096, 512, 32)  # k, v: 4 of 8 KV heads
    o = gptq(2048, 4096, 16)  # o_proj: half the input columns, half the groups
    mlp = 2 * gptq(4096, 7168, 32) + gptq(7168, 4096, 56)
    embed = 16000 * 4096 * 2 + 2 * 4096 * 2 + 4096 * 2  # vocab-parallel; 2 norms + final norm
    head = 16000 * 4096 * 2  # lm_head stays fp16 (GPTQ "lm_head": false), vocab-parallel
    assert sum(b.values()) == q + kv + o + mlp + embed + head


def test_autogptq_zero_biases_are_stored_but_not_loaded():
    """AutoGPTQ stores an fp16 zero bias (out,) on every QuantLinear; vLLM's llama.py load_weights
    skips a bias its layer lacks ("Skip loading extra bias for GPTQ models"), so the bytes per
    GPU are those of the bias-free checkpoint while the stored bytes grow by 2 x out each."""
    qc = {"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": False}
    autogptq, gptqmodel = tiny(qc), tiny({**qc, "meta": {"quantizer": ["gptqmodel:2.0"]}})
    assert stored_bytes_per_gpu(autogptq, tp=2) == stored_bytes_per_gpu(gptqmodel, tp=2)
    outs = 4096 + 2 * 1024 + 4096 + 2 * 14336 + 4096  # q, k, v, o, gate, up, down
    layers = autogptq.num_hidden_layers
    assert calc.weight_bytes(autogptq) - calc.weight_bytes(gptqmodel) == layers * outs * 2


def test_gptq_act_order_keeps_every_group_on_row_parallel_gpus():
    spec = tiny({"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": True})
    b = stored_bytes_per_gpu(spec, tp=4)
    o_scales = 32 * 4096 * 2  # all 32 groups of o_proj's 4096 inputs, fp16
    down_scales = 112 * 4096 * 2
    col_scales = 32 * (4096 // 4) * 2 + 2 * 32 * (1024 // 4) * 2  # q; k, v
    mlp_col = 2 * 32 * (14336 // 4) * 2  # gate, up
    assert b["attn/o:scales"] == o_scales
    assert b["attn/q:scales"] + b["attn/kv:scales"] == col_scales
    assert b["mlp:scales"] == mlp_col + down_scales


def test_expert_parallel_holds_whole_experts():
    cfg = json.loads((FIXTURES / "gpt-oss-20b" / "config.json").read_text())
    spec = calc.from_hf_config(cfg)
    one, ep4 = stored_bytes_per_gpu(spec), stored_bytes_per_gpu(spec, tp=4, ep=4)
    assert ep4["mlp:packed"] * 4 == one["mlp:packed"]  # 8 of 32 experts, unsplit
    assert ep4["mlp:scales"] * 4 == one["mlp:scales"]


def test_refusals():
    spec = calc.from_hf_config(json.loads((FIXTURES / "gpt-oss-20b" / "config.json").read_text()))
    # gpt-oss's loaders split the experts in whole 32-value blocks (736 of 2880 at tp 4:
    # tests/test_serving_mxfp4_tp.py); a width that is not whole blocks has no MXFP4 layout
    # (SGLang gpt_oss.py asserts `intermediate_size % mxfp4_block == 0`)
    odd = spec.model_copy(update={"intermediate_size": 2900})
    with pytest.raises(
        ValueError, match=r"'in_features' must be a multiple of 32.*1/4 of it per GPU\): got 725"
    ):
        stored_bytes_per_gpu(odd, tp=4)
    with pytest.raises(ValueError, match="'ep' must be at most num_local_experts=32: got 64"):
        stored_bytes_per_gpu(spec, tp=64, ep=64)
    with pytest.raises(ValueError, match="'tp' must divide num_attention_heads=32: got 3"):
        stored_bytes_per_gpu(tiny(), tp=3)
    with pytest.raises(ValueError, match="'ep' must be 1 for a dense model: got 2"):
        stored_bytes_per_gpu(tiny(), tp=2, ep=2)
    awq = tiny({"quant_method": "awq", "bits": 4, "group_size": 256})
    with pytest.raises(ValueError, match="'group_size' must divide in_features=896"):
        stored_bytes_per_gpu(awq, tp=16)  # down_proj: 14336 / 16 = 896 = 3.5 groups of 256


def test_an_unquantized_checkpoint_is_split_in_its_own_torch_dtype():
    """google/gemma-2-9b stores float32 (config torch_dtype; the Hub's safetensors summary: F32,
    9,241,705,984 parameters): on one GPU its stored bytes are 4 x that, as weight_bytes says."""
    spec = calc.from_hf_config(Path(__file__).parent / "fixtures" / "hf" / "gemma-2-9b.json")
    assert sum(stored_bytes_per_gpu(spec).values()) == 4 * 9_241_705_984
