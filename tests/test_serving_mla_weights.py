"""MLA under vLLM: what process_weights_after_loading keeps beside kv_b_proj.

vllm 0.19.0 sdist, model_executor/layers/attention/mla_attention.py (MLAAttention.
process_weights_after_loading) and layers/quantization/utils/quant_utils.py
(get_and_maybe_dequant_weights): W_UK_T / W_UV are views of get_and_maybe_dequant_weights(
kv_b_proj, out_dtype=model dtype). Unquantized it returns `weight.to(out_dtype)`, the weight
itself, so nothing is added (the llm-d DeepSeek-V2-Lite bf16 run); quantized, a dequantized
kv_lora_rank x (H / tp) x (qk_nope_head_dim + v_head_dim) copy in the model dtype per layer.
"""

from __future__ import annotations

from pathlib import Path

import calc
from calc.serving import quant_weights as qw
from calc.serving.sharding import mla_kv_b_copy_bytes, mla_layers_per_rank, rank_weight_bytes

FIX = Path(__file__).parent / "fixtures"
V3 = FIX / "hf/modern/deepseek-v3.json"  # kv_lora_rank 512, 128 heads, nope 128, v 128, 61 layers


def test_copy_per_layer_and_rank():
    spec = calc.from_hf_config(V3)
    assert mla_kv_b_copy_bytes(spec, 8, 2) == 512 * (128 // 8) * (128 + 128) * 2
    assert mla_layers_per_rank(spec, 1) == (61,)
    assert mla_layers_per_rank(spec, 2) == (31, 30)  # get_pp_indices: the remainder before the last
    assert mla_kv_b_copy_bytes(calc.load_preset("qwen3-8b"), 1, 2) == 0


def test_fp8_checkpoint_keeps_a_bf16_copy_per_layer(monkeypatch):
    """DeepSeek-V3's fp8 block checkpoint at TP 8: 61 x 512 x 16 x 256 x 2 B more per rank."""
    spec = calc.from_hf_config(V3)
    qw.quantized_rank_bytes.cache_clear()
    with_copy = qw.quantized_rank_bytes(spec, 8)[0]
    monkeypatch.setattr(qw, "_kv_b_quantized", lambda s: False)
    qw.quantized_rank_bytes.cache_clear()
    without = qw.quantized_rank_bytes(spec, 8)[0]
    qw.quantized_rank_bytes.cache_clear()
    assert with_copy - without == 61 * 512 * 16 * 256 * 2


def test_unquantized_mla_keeps_views_only(monkeypatch):
    """bf16: no copy; weight_dtype fp8 (kv_b_proj quantized): 61 x 4 MiB more on each TP 8 rank."""
    from calc.serving import sharding

    # the model as a bf16 checkpoint (the preset is the published fp8 one)
    spec = calc.load_preset("deepseek-v3").model_copy(
        update={"quantization": None, "checkpoint_dtype": None}
    )
    rank_weight_bytes.cache_clear()
    bf16, fp8 = (rank_weight_bytes(spec, 8, 1, wd)[0] for wd in ("bf16", "fp8"))
    monkeypatch.setattr(sharding, "mla_kv_b_copy_bytes", lambda *a: 0)
    rank_weight_bytes.cache_clear()
    bf16_no, fp8_no = (rank_weight_bytes(spec, 8, 1, wd)[0] for wd in ("bf16", "fp8"))
    rank_weight_bytes.cache_clear()
    assert bf16 == bf16_no
    assert fp8 - fp8_no == 61 * 512 * 16 * 256 * 2
