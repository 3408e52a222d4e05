"""vLLM's LoRA serving (calc.serving.vllm_lora): the adapter slots and punica buffers in "Model
loading took", written out from the 0.12.0 - 0.34.0 sdists (lora/layers/*.py create_lora_weights,
lora/punica_wrapper/punica_base.py / punica_gpu.py, lora/ops/triton_ops/lora_kernel_metadata.py).

Llama-3.1-8B in bf16 (hidden 4,096, 32 q / 8 kv heads of 128, intermediate 14,336, vocab 128,256),
L = 4 slots of rank r = 64, TP 1, a layer:
- qkv: A 3 x (4, 1, 64, 4,096), B (4, 1, 4,096, 64) + 2 x (4, 1, 1,024, 64): 9,437,184 B;
- o: A (4, 1, 64, 4,096) + B (4, 1, 4,096, 64): 4,194,304 B;
- gate_up: A 2 x (4, 1, 64, 4,096) + B 2 x (4, 1, 14,336, 64): 18,874,368 B;
- down: A (4, 1, 64, 14,336) + B (4, 1, 4,096, 64): 9,437,184 B;
40 MiB a layer; embed_tokens A (4, 128,256, 64) + B (4, 1, 4,096, 64) and the logits processor
A (4, 1, 64, 4,096) + B (4, 1, 128,256, 64): 67,764,224 B each; punica 56 N + 24 S + 6 x 512 B
(48 N from 0.29.0), N = 8,192 batched tokens and S = 1,024 sequences (`vllm serve` on an H100).
"""

from __future__ import annotations

import pytest

from calc.serving.plan import engine_plan, prepare

LAYER = 9_437_184 + 4_194_304 + 18_874_368 + 9_437_184
TABLE = 4 * 64 * (128_256 + 4_096) * 2
LORA = dict(enable_lora=True, max_loras=4, max_lora_rank=64)


def _weights(model="llama-3.1-8b", version="0.19.0", **kw) -> tuple[int, ...]:
    return prepare(model, "h100-sxm", "vllm", version=version, max_model_len=8192, **kw)[4]


@pytest.mark.parametrize(("version", "punica"), [("0.19.0", 56), ("0.34.0", 48)])
def test_llama_slots_and_punica(version, punica):
    added = _weights(version=version, **LORA)[0] - _weights(version=version)[0]
    assert LAYER == 41_943_040 and TABLE == 67_764_224
    assert added == 32 * LAYER + 2 * TABLE + punica * 8192 + 24 * 1024 + 6 * 512
    p = engine_plan("llama-3.1-8b", "h100-sxm", "vllm", version=version, max_model_len=8192,
                    **LORA)  # fmt: skip
    assert p.weights_bytes == _weights(version=version, **LORA)[0]


def test_tensor_parallel_and_fully_sharded():
    """TP 2: columns split their B rows (qkv's q 2,048, k / v 512; gate_up 7,168 each), rows
    their A columns (o 2,048, down 7,168); fully sharded also A's rank (32) for the columns and
    B's output (2,048) for the rows. The tables stay whole, and the logits keep an int64 index of
    the padded vocabulary (128,256: a multiple of 64)."""
    L, r, b = 4, 64, 2
    plain = L * b * (3 * r * 4096 + r * (2048 + 2 * 512) + r * 2048 + r * 4096
                     + 2 * r * 4096 + 2 * r * 7168 + r * 7168 + r * 4096)  # fmt: skip
    sharded = L * b * (3 * 32 * 4096 + r * (2048 + 2 * 512) + r * 2048 + r * 2048
                       + 2 * 32 * 4096 + 2 * r * 7168 + r * 7168 + r * 2048)  # fmt: skip
    tp2 = dict(tensor_parallel_size=2)
    base = _weights(**tp2)[0]
    rest = 2 * TABLE + 8 * 128_256 + 56 * 8192 + 24 * 1024 + 6 * 512
    assert _weights(**tp2, **LORA)[0] - base == 32 * plain + rest
    assert _weights(**tp2, **LORA, fully_sharded_loras=True)[0] - base == 32 * sharded + rest


def test_which_families_wrap_the_tables():
    """Qwen2ForCausalLM declares no embedding_modules (its tables unwrapped); Qwen3ForCausalLM
    from 0.16.0: 0.16.0 adds both tables' slots to 0.15.0's (Qwen3-8B: vocab 151,936, hidden
    4,096; the same punica buffers)."""
    q3 = {
        v: _weights("qwen3-8b", v, **LORA)[0] - _weights("qwen3-8b", v)[0]
        for v in ("0.15.0", "0.16.0")
    }
    assert q3["0.16.0"] - q3["0.15.0"] == 2 * 4 * 64 * (151_936 + 4_096) * 2
    with pytest.raises(ValueError, match="'enable_lora' with vLLM before 0.12.0"):
        _weights(version="0.11.2", **LORA)
    with pytest.raises(ValueError, match="an MoE, MLA or multimodal model"):
        _weights("qwen3-30b-a3b", **LORA)
    with pytest.raises(ValueError, match="'max_lora_rank' must be one of 1, 8, 16"):
        _weights(enable_lora=True, max_lora_rank=48)


def test_a_logs_lora_flags_are_read():
    from calc.serving.logs import parse_log

    got = parse_log("non-default args: {'enable_lora': True, 'max_loras': 4, 'max_lora_rank': 64}")
    assert (got["enable_lora"], got["max_loras"], got["max_lora_rank"]) == (True, 4, 64)
