"""The compiled forward's live set in vLLM's Model Runner V2 profile run
(calc.serving.vllm_compiled). Expected values are written out from the source's arithmetic, read
in the vLLM 0.27.1 PyPI sdist: vllm/model_executor/models/qwen2.py lines 110-114 (MLP:
gate_up_proj -> act_fn -> down_proj), 206-233 (attention: qkv_proj, split, rotary, attn, o_proj),
vllm/model_executor/layers/attention/attention.py line 531 (the attention output buffer,
num_tokens x num_heads x head_size) and vllm/model_executor/layers/activation.py lines 101-113
(SiluAndMul's new (T, d) output).
"""

from __future__ import annotations

import pytest

from calc.presets import load_preset
from calc.serving.engine import engine_config
from calc.serving.vllm_compiled import compiled_forward_applies, compiled_forward_bytes
from calc.serving.vllm_v2 import vllm_v2_activation_bytes
from calc.spec import ModelSpec

TOY = ModelSpec(
    name="toy",
    num_hidden_layers=2,
    hidden_size=64,
    num_attention_heads=8,
    num_key_value_heads=2,
    intermediate_size=176,
    vocab_size=100,
)


def test_toy_mlp_sets_the_peak_tp1():
    # T = 32 tokens, bf16 (2 B). head_dim = 64 / 8 = 8.
    # MLP at the activation kernel: residual 64 + gate_up 2 x 176 + act 176 = 592 per token.
    # Attention op: residual 64 + qkv (64 + 2 x 16) + rotated q 64 + rotated k 16 + output 64
    # = 304 per token. Peak: 32 x 2 x 592 = 37,888 B.
    assert compiled_forward_bytes(TOY, 1, 32, 2) == 32 * 2 * (64 + 2 * 176 + 176)


def test_toy_tp2_shards_the_mlp_and_heads():
    # TP 2: f = 176 / 2 = 88, q = 4 x 8 = 32, kv = 1 x 8 = 8 (2 KV heads over 2 ranks).
    # MLP: 64 + 3 x 88 = 328; attention: 64 + (32 + 16) + 32 + 8 + 32 = 184. Peak 328 per token.
    assert compiled_forward_bytes(TOY, 2, 32, 2) == 32 * 2 * (64 + 3 * 88)


def test_attention_sets_the_peak_when_the_mlp_is_narrow():
    # intermediate 16: MLP 64 + 48 = 112 per token; attention 64 + 96 + 64 + 16 + 64 = 304.
    narrow = TOY.model_copy(update={"intermediate_size": 16})
    assert compiled_forward_bytes(narrow, 1, 10, 2) == 10 * 2 * (64 + 96 + 64 + 16 + 64)


def test_moe_is_refused_with_the_reason():
    moe = load_preset("qwen3-30b-a3b")
    assert not compiled_forward_applies(moe)
    with pytest.raises(ValueError, match="is_moe=True"):
        compiled_forward_bytes(moe, 1, 8, 2)


def test_qwen25_05b_profile_peak_at_8192_tokens():
    # Qwen2.5-0.5B (h 896, 14 q / 2 kv heads of 64, intermediate 4,864, vocab 151,936) on vLLM
    # 0.27.1, LLM() defaults on a < 70 GiB GPU: max_num_batched_tokens 8,192, max_num_seqs 256
    # (arg_utils.py get_batch_defaults). Forward: 8,192 x 2 x (896 + 3 x 4,864) = 253,755,392 B.
    # Dummy sampler (greedy, 256 rows): logits 256 x 151,936 x 2 + gumbel 256 x 149 x 12
    # + held hidden (8,192 + 256) x 896 x 2 = 77,791,232 + 457,728 + 15,138,816 B, smaller.
    spec = load_preset("qwen2-0.5b")
    cfg = engine_config("vllm", version="0.27.1", max_num_batched_tokens=8192, max_num_seqs=256)
    assert vllm_v2_activation_bytes(spec, cfg, "bf16") == 8192 * 2 * (896 + 3 * 4864)
