"""calc.weight_bytes against what DeepSeek-V3/R1 (fp8, 128 x 128 blocks), GLM-4.5-Air and
Qwen3-Coder-Next checkpoints store, by safetensors dtype: the Hugging Face Hub's per-dtype counts
(tests/fixtures/checkpoints/hub_dtype_counts.json cites where each was read). Each count is first
written out here from the model's tensor shapes, so the test also says what the checkpoint holds:
- every fp8 matrix's weight_scale_inv is fp32, one per 128 x 128 block (F32 count);
- the MoE layers' e_score_correction_bias buffers are fp32 (transformers modeling_deepseek_v3.py
  and modeling_glm4_moe.py: `_keep_in_fp32_modules_strict = ["e_score_correction_bias"]`);
- the MTP layer (num_nextn_predict_layers = 1) is stored as layer L, with its own copies of
  embed_tokens and shared_head.head (V x h each; DeepSeek's README_WEIGHTS.md calls them shared,
  but the BF16 counts hold them), and its eh_proj stays bf16 in the fp8 checkpoint;
- Qwen3-Coder-Next stores no MTP weights (its BF16 count is the model's, exactly).
"""

from __future__ import annotations

import json
from pathlib import Path

import calc

FIXTURES = Path(__file__).parent / "fixtures"
HUB = json.loads((FIXTURES / "checkpoints" / "hub_dtype_counts.json").read_text())


def _spec(model: str) -> calc.ModelSpec:
    return calc.from_hf_config(Path(__file__).parent.parent / HUB["models"][model]["config"])


def _stored(counts: dict[str, int]) -> int:
    size = {"BF16": 2, "F8_E4M3": 1, "F32": 4}
    return sum(size[k] * n for k, n in counts.items())


def _blocks(out: int, inp: int) -> int:  # fp32 weight_scale_inv: ceil(out/128) x ceil(in/128)
    return -(-out // 128) * -(-inp // 128)


# DeepSeek-V3 (config.json): hidden 7168, 61 layers (3 dense of 18432, then MoE), 256 routed
# experts + 1 shared of 2048, 128 heads, q_lora_rank 1536, kv_lora_rank 512, qk_nope 128,
# qk_rope 64, v_head 128, vocabulary 129280, untied; one MTP layer (model.layers.61).
H, L, DENSE, E, F_DENSE, F_EXP, V = 7168, 61, 3, 256, 18432, 2048, 129280
# (out, in) of MLA's projections (DeepSeek modeling_deepseek.py DeepseekV3Attention): q_a_proj,
# q_b_proj (128 x 192), kv_a_proj_with_mqa (512 + 64), kv_b_proj (128 x (128 + 128)), o_proj
ATTN = [(1536, H), (128 * 192, 1536), (512 + 64, H), (128 * 256, 512), (H, 128 * 128)]
DENSE_MLP = [(F_DENSE, H), (F_DENSE, H), (H, F_DENSE)]  # gate, up, down
EXPERT = [(F_EXP, H), (F_EXP, H), (H, F_EXP)]
MOE = L - DENSE + 1  # 58 MoE decoder layers + the MTP layer


def test_deepseek_v3_fp8_every_dtype_written_out():
    counts = HUB["models"]["deepseek-ai/DeepSeek-V3"]["parameters"]
    fp8 = (L + 1) * sum(o * i for o, i in ATTN) + DENSE * sum(o * i for o, i in DENSE_MLP)
    fp8 += MOE * (E + 1) * sum(o * i for o, i in EXPERT)  # routed + shared experts
    assert fp8 == counts["F8_E4M3"]
    scales = (L + 1) * sum(_blocks(o, i) for o, i in ATTN)
    scales += DENSE * sum(_blocks(o, i) for o, i in DENSE_MLP)
    scales += MOE * (E + 1) * sum(_blocks(o, i) for o, i in EXPERT)
    assert scales + MOE * E == counts["F32"]  # + e_score_correction_bias, one per expert
    norms = (L + 1) * (2 * H + 1536 + 512) + H  # block norms, q_a / kv_a_layernorm; final norm
    routers = MOE * E * H  # mlp.gate.weight stays bf16
    mtp = 2 * H * H + 3 * H + 2 * V * H  # eh_proj; enorm, hnorm, shared_head.norm; two tables
    assert 2 * V * H + norms + routers + mtp == counts["BF16"]
    spec = _spec("deepseek-ai/DeepSeek-V3")
    assert calc.weight_bytes(spec) == _stored(counts) == 688_574_839_360
    parts = calc.weight_bytes_breakdown(spec)
    assert parts["router:e_score_correction_bias"] == MOE * E * 4
    assert parts["mtp"] == 2 * (mtp + 2 * H + 1536 + 512 + E * H)  # + its block's norms, router


def test_deepseek_v3_mtp_is_stored_but_not_a_parameter():
    """weight_bytes counts the MTP layer the checkpoint stores; param_count (the paper's 671B)
    still leaves it out unless include_mtp, and then without the two table copies."""
    spec = _spec("deepseek-ai/DeepSeek-V3")
    assert not spec.include_mtp and spec.num_nextn_predict_layers == 1
    without = spec.replace(num_nextn_predict_layers=0)
    assert calc.param_count(spec) == calc.param_count(without)
    mtp_layer_fp8 = sum(o * i for o, i in ATTN) + (E + 1) * sum(o * i for o, i in EXPERT)
    assert calc.weight_bytes(spec) - calc.weight_bytes(without) == (
        mtp_layer_fp8
        + 4
        * (sum(_blocks(o, i) for o, i in ATTN) + (E + 1) * sum(_blocks(o, i) for o, i in EXPERT))
        + 4 * E  # its e_score_correction_bias
        + 2 * (2 * H * H + 3 * H + 2 * V * H + 2 * H + 1536 + 512 + E * H)
    )
    with_mtp = spec.replace(include_mtp=True)
    assert calc.weight_bytes(with_mtp) == calc.weight_bytes(spec)
    assert calc.param_count(with_mtp) - calc.param_count(spec) == (
        mtp_layer_fp8 + 2 * H * H + 3 * H + 2 * H + 1536 + 512 + E * H
    )


def test_deepseek_r1_shards_bound_the_same_bytes():
    """deepseek-ai/DeepSeek-R1 has DeepSeek-V3's config (verbatim copy in checkpoints/deepseek-r1)
    and so its bytes; its 163 shards' file sizes (Git LFS pointers of a GitHub copy) exceed them
    by the shards' headers alone: 11,888,393 bytes, about 73 KB a shard (some 560 tensor entries
    of ~130 characters each). Without the MTP layer the gap would be 11.5 GB."""
    r1 = calc.from_hf_config(FIXTURES / "checkpoints" / "deepseek-r1" / "config.json")
    v3 = _spec("deepseek-ai/DeepSeek-V3")
    assert calc.weight_bytes(r1) == calc.weight_bytes(v3)
    shards = HUB["shard_sizes"]["deepseek-ai/DeepSeek-R1"]
    headers = shards["sum_of_shard_bytes"] - calc.weight_bytes(r1)
    assert 0 < headers < shards["shards"] * 100_000


def test_glm_4_5_air_stores_its_mtp_layer():
    """zai-org/GLM-4.5-Air, bf16: hidden 4096, 46 layers (1 dense of 10944, then MoE), 128 routed
    experts + 1 shared of 1408, 96 x 128 query heads, 8 KV heads, q/k/v biases, vocabulary
    151552, untied; the MTP layer is model.layers.46 (transformers modeling_glm4_moe.py shapes)."""
    counts = HUB["models"]["zai-org/GLM-4.5-Air"]["parameters"]
    h, L, E, f_dense, f_exp, V = 4096, 46, 128, 10944, 1408, 151552
    q, kv = 96 * 128, 8 * 128
    attn = (h * q + q) + 2 * (h * kv + kv) + q * h
    moe_mlp = (E + 1) * 3 * h * f_exp + E * h  # experts, shared expert, router
    decoder = L * (attn + 2 * h) + 3 * h * f_dense + (L - 1) * moe_mlp + h + 2 * V * h
    mtp = attn + 2 * h + moe_mlp + 2 * h * h + 3 * h + 2 * V * h  # eh_proj, 3 norms, 2 tables
    assert decoder + mtp == counts["BF16"]
    assert L * E == counts["F32"]  # e_score_correction_bias: 45 MoE layers + the MTP layer
    spec = _spec("zai-org/GLM-4.5-Air")
    assert calc.param_count(spec) == decoder  # the model without MTP: '106B'
    assert calc.weight_bytes(spec) == _stored(counts) == 220_937_661_440


def test_qwen3_coder_next_stores_no_mtp_layer():
    """Qwen/Qwen3-Coder-Next (Qwen3-Next-80B-A3B's shapes): 48 layers of hidden 2048, every 4th
    full attention (16 x 256 query heads with their gate, 2 KV heads, q/k norms), the others
    Gated DeltaNet (16 key heads, 32 value heads of 128, conv kernel 4), every layer MoE with
    512 experts of 512, one gated shared expert of 512; vocabulary 151936, untied. Its BF16 count
    is exactly this model: no mtp.* tensors, though vLLM's qwen3_next_mtp.py would build one MTP
    layer (num_nextn_predict_layers defaults to 1 there)."""
    counts = HUB["models"]["Qwen/Qwen3-Coder-Next"]["parameters"]
    h, V, d = 2048, 151936, 256
    kd, vd = 16 * 128, 32 * 128
    full = h * 2 * 16 * d + 2 * h * 2 * d + 16 * d * h + 2 * d  # q(+gate), k, v, o; q/k norms
    conv = (2 * kd + vd) * 4
    linear = h * (2 * kd + 2 * vd) + h * 2 * 32 + conv + 2 * 32 + 128 + vd * h  # qkvz, ba, ...
    moe = 512 * 3 * h * 512 + 3 * h * 512 + h + 512 * h  # experts, shared, its gate, router
    total = 12 * full + 36 * linear + 48 * (moe + 2 * h) + h + 2 * V * h
    assert total == counts["BF16"]
    spec = _spec("Qwen/Qwen3-Coder-Next")
    assert spec.num_nextn_predict_layers == 0
    assert calc.weight_bytes(spec) == _stored(counts)


def test_kimi_k2_5_e_score_buffers_are_its_f32_values():
    """moonshotai/Kimi-K2.5 (revision 2426b45b) stores 23,040 F32 values (huggingface.js
    packages/hub/src/lib/parse-safetensors-metadata.spec.ts at fe42e680): Kimi K2's 61 layers
    less 1 dense, times 384 experts, one e_score_correction_bias value each."""
    spec = calc.load_preset("kimi-k2")
    assert 60 * 384 == 23_040
    assert calc.weight_bytes_breakdown(spec)["router:e_score_correction_bias"] == 23_040 * 4


def test_autofp8_per_tensor_static_llama_3_8b_written_out():
    """RedHatAI/Meta-Llama-3-8B-Instruct-FP8 (AutoFP8, quantization_config {"quant_method": "fp8",
    "activation_scheme": "static"}): its index lists, for each of the 7 block linears of 32
    layers, weight (fp8, out x in), weight_scale and input_scale (one fp32 value each); the
    embedding, lm_head and norms stay bf16. Llama 3 8B: hidden 4096, 8 KV heads of 128, MLP
    14336, vocabulary 128256."""
    index = json.loads(
        (FIXTURES / "checkpoints" / "meta-llama-3-8b-instruct-fp8" / "index.json").read_text()
    )
    keys = index["key_counts_by_suffix"]
    assert keys["model.layers.*.mlp.down_proj.weight_scale"] == keys["lm_head.weight"] * 32
    assert not any(k.startswith("lm_head.") and k != "lm_head.weight" for k in keys)
    h, kv, f, L, V = 4096, 1024, 14336, 32, 128256
    shapes = [(h, h), (kv, h), (kv, h), (h, h), (f, h), (f, h), (h, f)]  # (out, in)
    layer = sum(o * i + 4 + 4 for o, i in shapes) + 2 * h * 2  # + two bf16 norms
    assert L * layer + 2 * V * h * 2 + h * 2 == index["total_size"] == 9_081_202_432
    cfg = json.loads(
        (FIXTURES / "checkpoints" / "meta-llama-3-8b-instruct-fp8" / "config.json").read_text()
    )
    parts = calc.weight_bytes_breakdown(calc.from_hf_config(cfg))
    assert sum(v for k, v in parts.items() if k.endswith((":scales", ":act_scales"))) == L * 7 * 8
