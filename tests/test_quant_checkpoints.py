"""calc.weight_bytes against public checkpoints: the bytes kvcalc says a checkpoint stores equal
its model.safetensors.index.json `total_size` (tests/fixtures/checkpoints/<name>/: the verbatim
config.json and the index's total and key counts, with source URLs), or the difference is written
out here with its reason."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import calc

FIXTURES = Path(__file__).parent / "fixtures" / "checkpoints"


def load(name: str) -> tuple[dict, dict]:
    d = FIXTURES / name
    return json.loads((d / "config.json").read_text()), json.loads((d / "index.json").read_text())


def stored(cfg: dict) -> int:
    """kvcalc's bytes for the checkpoint, as a user asks for them: the base dtype is read from
    the config itself (torch_dtype, or the quantization config's)."""
    return calc.weight_bytes(calc.from_hf_config(cfg))


EXACT = [
    "llama-3.2-3b-instruct",  # bf16, tied embeddings
    "meta-llama-3-8b-instruct-fp16",  # fp16, untied
    "gemma-2b",  # bf16, tied, head_dim 256
    "mistral-7b-v0.3",
    "mistral-22b-v0.2",
    "devstral-small-2507",
    "cogito-v1-preview-qwen-14b",  # qwen2: q/k/v biases
    "sakura-14b-qwen2.5-v1.0",  # qwen2, fp16
    "mixtral-8x7b-v0.1",  # MoE: 8 experts + router
    "mixtral-8x7b-instruct-v0.1",
    "wizardlm-2-8x22b",
    "gpt-oss-20b",  # MXFP4 experts (_blocks + _scales), bf16 attention, router, biases, sinks
    "llama-3.1-8b-networks-bnb-int8",  # bitsandbytes 8-bit: int8 weight + SCB + weight_format
    "meta-llama-3-8b-instruct-fp8",  # AutoFP8: fp8 weight, fp32 weight_scale and input_scale
]


@pytest.mark.parametrize("name", EXACT)
def test_stored_bytes_equal_the_index_total(name):
    cfg, index = load(name)
    assert stored(cfg) == index["total_size"]


def test_gpt_oss_decomposition_written_out():
    """openai/gpt-oss-20b: 24 layers, hidden 2880, 64 x 64 query heads, 8 KV heads, 32 experts of
    2880; vocab 201088. MXFP4 per expert matrix: out x in/2 packed + out x in/32 scales."""
    cfg, index = load("gpt-oss-20b")
    h, E, L, V = 2880, 32, 24, 201088
    attn = (
        (h * 4096 + 4096) + 2 * (h * 512 + 512) + (4096 * h + h) + 64
    )  # q, k, v, o (+bias), sinks
    router = h * E + E
    experts = E * (2 * h * h // 2 + 2 * h * h // 32 + h * h // 2 + h * h // 32)  # gate_up, down
    expert_bias = E * (2 * h + h)
    per_layer = 2 * (attn + router + expert_bias + 2 * h) + experts  # bf16 = 2 bytes
    total = L * per_layer + 2 * (2 * V * h + h)  # embed, lm_head, final norm
    assert total == index["total_size"]
    parts = calc.weight_bytes_breakdown(calc.from_hf_config(cfg))
    assert parts["mlp:packed"] == L * E * (2 * h * h // 2 + h * h // 2)
    assert parts["mlp:scales"] == L * E * (2 * h * h // 32 + h * h // 32)
    assert parts["mlp:bias"] == L * expert_bias * 2


def test_bnb_int8_decomposition_written_out():
    """A Llama-3.1-8B fine-tune saved by bitsandbytes 8-bit with torch_dtype float32: every block
    Linear int8 with a float32 SCB per output row and a 1-byte weight_format; lm_head skipped
    (llm_int8_skip_modules null: transformers' default), embeddings and norms float32."""
    cfg, index = load("llama-3.1-8b-networks-bnb-int8")
    h, f, kv, V, L = 4096, 14336, 1024, 128256, 32
    outs = [h, kv, kv, h, f, f, h]  # q, k, v, o, gate, up, down
    ins = [h, h, h, h, h, h, f]
    per_layer = sum(o * i + 4 * o + 1 for o, i in zip(outs, ins, strict=True)) + 2 * h * 4
    assert L * per_layer + 2 * V * h * 4 + h * 4 == index["total_size"]


def test_falcon_180b_chat_stores_a_tied_head_twice():
    """tiiuae/falcon-180B-chat's config leaves tie_word_embeddings out, so FalconConfig ties the
    LM head to the embedding (transformers loads one matrix), but the checkpoint still stores
    lm_head.weight: 65024 x 14848 bf16 bytes more than the model transformers builds."""
    cfg, index = load("falcon-180b-chat")
    assert "tie_word_embeddings" not in cfg and index["key_counts_by_suffix"]["lm_head.weight"] == 1
    assert index["total_size"] - stored(cfg) == 65024 * 14848 * 2


def test_medgemma_stores_the_language_model_and_its_vision_tower():
    """google/medgemma-27b-it is Gemma 3 27B with a SigLIP vision tower and a projector, which
    weight_bytes counts ("vision") and param_count (the language model's) does not. vision_config: hidden 1152, 27 layers,
    MLP 4304, 14 x 14 patches of 896 x 896 images (4096 positions); projector 1152 -> 5376."""
    cfg, index = load("medgemma-27b-it")
    vc = cfg["vision_config"]
    d, n_layers, m = vc["hidden_size"], vc["num_hidden_layers"], vc["intermediate_size"]
    assert (d, n_layers, m) == (1152, 27, 4304)
    patches = (vc["image_size"] // vc["patch_size"]) ** 2
    layer = 4 * (d * d + d) + (d * m + m) + (m * d + d) + 2 * 2 * d  # attn, fc1, fc2, 2 LayerNorms
    tower = (d * 3 * 14 * 14 + d) + patches * d + n_layers * layer + 2 * d  # patch, pos, post-LN
    projector = d * cfg["text_config"]["hidden_size"] + d  # mm_input_projection, soft-emb norm
    assert index["total_size"] == stored(cfg)  # the language model and the encoder, exactly
    spec = calc.from_hf_config(cfg)
    assert calc.weight_bytes_breakdown(spec)["vision"] == 2 * (tower + projector)
    text = calc.from_hf_config({k: v for k, v in cfg.items() if k != "vision_config"})
    assert index["total_size"] - calc.weight_bytes(text) == 2 * (tower + projector)
    assert calc.param_count(spec) == calc.param_count(text)  # the language model's


# huggingface.js packages/hub/src/lib/parse-safetensors-metadata.spec.ts (commit fe42e680) counts
# the parameters of published checkpoints by safetensors dtype, read from their shard headers:
# an independent tally of what they store (its comments give the excluded scale counts).
HFJS = "https://github.com/huggingface/huggingface.js/blob/fe42e68017ffc76d09922ea8f9b38a6964345710/packages/hub/src/lib/parse-safetensors-metadata.spec.ts"


def test_gpt_oss_120b_against_its_shard_headers():
    """openai/gpt-oss-120b (revision b5c939de): BF16 2,167,371,072 values; U8 57,330,892,800
    packed MXFP4 bytes and 3,583,180,800 UE8M0 scale bytes (HFJS)."""
    spec = calc.from_hf_config(
        Path(__file__).parent / "fixtures" / "hf" / "modern" / "gpt-oss-120b.json"
    )
    parts = calc.weight_bytes_breakdown(spec)
    assert parts["mlp:packed"] == 57_330_892_800 and parts["mlp:scales"] == 3_583_180_800
    assert calc.weight_bytes(spec) == 2 * 2_167_371_072 + 57_330_892_800 + 3_583_180_800


def test_bnb_4bit_llama_packs_every_block_linear_and_keeps_the_head():
    """unsloth/Meta-Llama-3.1-8B-Instruct-bnb-4bit (revision f15c379f): U8 3,489,660,928 packed
    bytes (every block Linear, two weights a byte) and BF16 1,050,939,392 values (embedding,
    lm_head, norms) (HFJS; absmax / quant_map / quant_state are its bookkeeping, not counted)."""
    spec = calc.load_preset("llama-3.1-8b").replace(
        quantization=calc.quant.parse_quantization_config(
            {"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4",
             "bnb_4bit_use_double_quant": True, "llm_int8_skip_modules": None}
        ).model_dump()
    )  # fmt: skip
    parts = calc.weight_bytes_breakdown(spec)
    assert sum(v for k, v in parts.items() if k.endswith(":packed")) == 3_489_660_928
    base = sum(v for k, v in parts.items() if ":" not in k)
    assert base == 2 * 1_050_939_392


def test_an_fp32_checkpoint_is_counted_at_four_bytes():
    """google/gemma-2-9b stores float32 tensors (config torch_dtype "float32"; the Hub's
    safetensors summary: F32, 9,241,705,984 parameters), so its stored bytes are 4 x that."""
    spec = calc.from_hf_config(Path(__file__).parent / "fixtures" / "hf" / "gemma-2-9b.json")
    assert spec.checkpoint_dtype == "fp32"
    assert calc.weight_bytes(spec) == 4 * 9_241_705_984
    assert calc.weight_bytes(spec, dtype="bf16") == 2 * 9_241_705_984  # an explicit dtype wins


@pytest.mark.parametrize("value", ["int7", 16, "float128"])
def test_an_unknown_torch_dtype_is_refused_by_name(value):
    cfg, _ = load("mistral-7b-v0.3")
    with pytest.raises(ValueError, match=r"'torch_dtype' must be a dtype, one of fp32.*got"):
        calc.from_hf_config({**cfg, "torch_dtype": value})
