"""calc.weight_bytes and calc.param_count against the Hugging Face Hub's per-dtype parameter counts
of public checkpoints (GET /api/models/<id>?expand[]=safetensors: safetensors.parameters, read
by the Hub from every shard header), as saved by zaid-cdlg/inference-atlas
(tests/fixtures/checkpoints/hub_dtype_counts.json cites each file, commit and config).

Stored bytes are sum(bytes(dtype) x count). A multimodal checkpoint also stores a vision tower
and projector (calc.weight_bytes' "vision"; param_count stays the language model's); they are
written out here from the config's own numbers, with the architecture cited:
- SigLIP (transformers siglip/modeling_siglip.py) + Gemma 3's projector (gemma3/modeling_gemma3.py)
- Pixtral (pixtral/modeling_pixtral.py) + Mistral 3's projector (mistral3/modeling_mistral3.py)
- Qwen3.5's vision tower (qwen3_5/modeling_qwen3_5.py Qwen3_5VisionModel) and its MTP layer
  (vLLM vllm/model_executor/models/qwen3_5_mtp.py at 01d99805d1ef3d21d30e21a0ae387643fe0cd45a).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import calc

ROOT = Path(__file__).parent.parent
FIXTURES = Path(__file__).parent / "fixtures"
HUB = json.loads((FIXTURES / "checkpoints" / "hub_dtype_counts.json").read_text())
SIZE = {"BF16": 2, "F16": 2, "F32": 4, "F8_E4M3": 1}


def _cfg(model: str) -> dict:
    return json.loads((ROOT / HUB["models"][model]["config"]).read_text())


def _spec(model: str) -> calc.ModelSpec:
    return calc.from_hf_config(ROOT / HUB["models"][model]["config"])


def _counts(model: str) -> dict[str, int]:
    return HUB["models"][model]["parameters"]


def _stored(counts: dict[str, int]) -> int:
    return sum(SIZE[k] * n for k, n in counts.items())


def test_each_total_is_the_sum_of_its_dtypes():
    for model, entry in HUB["models"].items():
        assert sum(entry["parameters"].values()) == entry["total"], model


# unquantized language models: the checkpoint is the model, exactly
EXACT = [
    "Qwen/Qwen3-235B-A22B-Instruct-2507",
    "Qwen/Qwen3-32B",
    "Qwen/Qwen3-8B",
    "Qwen/Qwen3-30B-A3B",
    "meta-llama/Llama-3.3-70B-Instruct",
    "meta-llama/Llama-3.1-8B-Instruct",
    "microsoft/phi-4",  # fused qkv_proj / gate_up_proj
    "mistralai/Mistral-7B-Instruct-v0.1",
    "mistralai/Mixtral-8x7B-Instruct-v0.1",
    "Qwen/Qwen2.5-7B-Instruct",  # q/k/v biases
]


@pytest.mark.parametrize("model", EXACT)
def test_text_checkpoint_is_the_model(model):
    spec, counts = _spec(model), _counts(model)
    assert calc.weight_bytes(spec) == _stored(counts)
    assert calc.param_count(spec) == HUB["models"][model]["total"]


def test_llama_3_3_70b_written_out():
    """80 layers of hidden 8192: 64 x 128 query heads, 8 KV heads, SwiGLU 28672, two RMSNorms;
    vocabulary 128256, untied (LlamaForCausalLM)."""
    h, L, f, kv, V = 8192, 80, 28672, 1024, 128256
    layer = 2 * h * h + 2 * h * kv + 3 * h * f + 2 * h
    assert L * layer + h + 2 * V * h == _counts("meta-llama/Llama-3.3-70B-Instruct")["BF16"]


def test_qwen2_5_index_total_is_the_bf16_bytes():
    entry = HUB["models"]["Qwen/Qwen2.5-7B-Instruct"]
    assert entry["index_total_size"] == 2 * entry["parameters"]["BF16"]
    assert calc.weight_bytes(_spec("Qwen/Qwen2.5-7B-Instruct")) == entry["index_total_size"]


@pytest.mark.parametrize("model", ["openai/gpt-oss-20b", "openai/gpt-oss-120b"])
def test_gpt_oss_u8_counts_mxfp4_values(model):
    """The Hub counts an MXFP4 *_blocks byte as two parameters and leaves the *_scales bytes out
    (huggingface.js parse-safetensors-metadata.ts at fe42e680: mxfp4 U8 `_blocks` x 2,
    MXFP4_SCALES_SUFFIX bookkeeping): the packed bytes are U8 / 2 and the scales, one UE8M0 byte
    per 32 values, U8 / 32."""
    spec, counts = _spec(model), _counts(model)
    u8 = counts["U8"]
    parts = calc.weight_bytes_breakdown(spec)
    assert parts["mlp:packed"] == u8 // 2 and parts["mlp:scales"] == u8 // 32
    assert calc.weight_bytes(spec) == 2 * counts["BF16"] + u8 // 2 + u8 // 32
    assert calc.param_count(spec) == HUB["models"][model]["total"]


def _siglip_tower(vc: dict) -> int:
    """SiglipVisionModel without its head (vision_use_head false): Conv2d patch embedding with
    bias, learned positions, layers of 4 biased projections, fc1 / fc2, two LayerNorms; a
    post-LayerNorm."""
    d, m, n = vc["hidden_size"], vc["intermediate_size"], vc["num_hidden_layers"]
    p = vc["patch_size"]
    positions = (vc["image_size"] // p) ** 2
    layer = 4 * (d * d + d) + (d * m + m) + (m * d + d) + 2 * 2 * d
    return (d * 3 * p * p + d) + positions * d + n * layer + 2 * d


@pytest.mark.parametrize(
    "model, text_hidden", [("google/gemma-3-27b-it", 5376), ("google/gemma-3-4b-it", 2560)]
)
def test_gemma_3_stores_the_language_model_and_its_vision_tower(model, text_hidden):
    """Gemma 3's 4B, 12B and 27B share one 400M SigLIP encoder (Gemma 3 technical report §2.1,
    Table 1: 417M vision parameters); its vision_config is taken from medgemma-27b-it's verbatim
    config.json. The projector: mm_input_projection_weight (1152 x text hidden) and the
    mm_soft_emb_norm RMSNorm (1152)."""
    vc = json.loads((FIXTURES / "checkpoints" / "medgemma-27b-it" / "config.json").read_text())
    vc = vc["vision_config"]
    assert (vc["hidden_size"], vc["num_hidden_layers"], vc["patch_size"]) == (1152, 27, 14)
    tower = _siglip_tower(vc)
    assert round(tower / 1e6) == 417
    counts = _counts(model)
    text_only = _spec(model)  # the fixture (its text_config only): the language model
    assert text_only.hidden_size == text_hidden and text_only.vision is None
    extra = tower + vc["hidden_size"] * text_hidden + vc["hidden_size"]
    assert counts["BF16"] - calc.param_count(text_only) == extra
    spec = calc.from_hf_config({**_cfg(model), "vision_config": vc})  # with its vision_config
    assert calc.param_count(spec) == calc.param_count(text_only)  # the language model's
    assert calc.weight_bytes_breakdown(spec)["vision"] == 2 * extra
    assert calc.weight_bytes(spec) == _stored(counts)


def test_mistral_small_3_2_stores_the_language_model_and_its_pixtral_tower():
    """Pixtral-12B's vision encoder (no biases, RMSNorms): a 14 x 14 patch Conv2d, ln_pre, 24
    layers of q/k/v/o and a SwiGLU; Mistral 3's projector: an RMSNorm, the patch merger
    (spatial_merge_size 2: Linear(4 x 1024 -> 1024)), linear_1 and linear_2 without bias
    (multimodal_projector_bias false)."""
    cfg = _cfg("mistralai/Mistral-Small-3.2-24B-Instruct-2506")
    vc, h = cfg["vision_config"], cfg["text_config"]["hidden_size"]
    d, m, n, p = vc["hidden_size"], vc["intermediate_size"], vc["num_hidden_layers"], 14
    assert (d, m, n, vc["patch_size"], h) == (1024, 4096, 24, p, 5120)
    assert cfg["multimodal_projector_bias"] is False and cfg["spatial_merge_size"] == 2
    tower = d * 3 * p * p + d + n * (4 * d * d + 3 * d * m + 2 * d)
    projector = d + 4 * d * d + d * h + h * h
    spec, counts = (
        _spec("mistralai/Mistral-Small-3.2-24B-Instruct-2506"),
        _counts("mistralai/Mistral-Small-3.2-24B-Instruct-2506"),
    )
    assert counts["BF16"] - calc.param_count(spec) == tower + projector  # the language model's
    assert calc.weight_bytes_breakdown(spec)["vision"] == 2 * (tower + projector)
    assert calc.weight_bytes(spec) == _stored(counts)


def _qwen3_5_tower(cfg: dict) -> int:
    """Qwen3_5VisionModel: Conv3d patch embedding (temporal x patch x patch, bias), learned
    positions, blocks of two LayerNorms, a biased qkv and proj, a biased fc1 / fc2 MLP; the
    merger: LayerNorm, Linear(4d -> 4d), Linear(4d -> out_hidden_size), all biased; no deepstack
    mergers (deepstack_visual_indexes [])."""
    vc = cfg["vision_config"]
    d, m, n, p = vc["hidden_size"], vc["intermediate_size"], vc["depth"], vc["patch_size"]
    assert vc["deepstack_visual_indexes"] == [] and vc["spatial_merge_size"] == 2
    patch = d * vc["in_channels"] * vc["temporal_patch_size"] * p * p + d
    block = 2 * 2 * d + (d * 3 * d + 3 * d) + (d * d + d) + (d * m + m) + (m * d + d)
    merger = (
        2 * d + (4 * d * 4 * d + 4 * d) + (4 * d * vc["out_hidden_size"] + vc["out_hidden_size"])
    )
    return patch + vc["num_position_embeddings"] * d + n * block + merger


def _qwen3_5_mtp(cfg: dict) -> int:
    """One MTP layer (vLLM qwen3_5_mtp.py): fc (2h -> h, no bias), pre_fc_norm_embedding,
    pre_fc_norm_hidden, a full-attention decoder layer (q_proj with its gate, k, v, o, q/k
    norms, the layers' MLP, two norms) and norm; embed_tokens and lm_head are the model's."""
    t = cfg["text_config"]
    h, H, G, d = t["hidden_size"], t["num_attention_heads"], t["num_key_value_heads"], t["head_dim"]
    attn = h * 2 * H * d + 2 * h * G * d + H * d * h + 2 * d
    if "num_experts" in t:  # routed experts, the gated shared expert, the router
        f, s, E = t["moe_intermediate_size"], t["shared_expert_intermediate_size"], t["num_experts"]
        mlp = E * 3 * h * f + 3 * h * s + h + E * h
    else:
        mlp = 3 * h * t["intermediate_size"]
    return 2 * h * h + 2 * h + attn + mlp + 2 * h + h


@pytest.mark.parametrize("model", ["Qwen/Qwen3.5-27B", "Qwen/Qwen3.6-27B", "Qwen/Qwen3.6-35B-A3B"])
def test_qwen3_5_stores_its_mtp_layer_and_vision_tower(model):
    cfg, spec, counts = _cfg(model), _spec(model), _counts(model)
    assert cfg["text_config"]["mtp_num_hidden_layers"] == spec.num_nextn_predict_layers == 1
    tower, mtp = _qwen3_5_tower(cfg), _qwen3_5_mtp(cfg)
    assert sum(counts.values()) == calc.param_count(spec) + mtp + tower
    assert calc.param_count(spec.replace(include_mtp=True)) == calc.param_count(spec) + mtp
    assert calc.weight_bytes_breakdown(spec)["vision"] == 2 * tower
    assert calc.weight_bytes(spec) == 2 * (calc.param_count(spec) + mtp + tower)  # bf16
    # Qwen3.5-27B keeps each Gated DeltaNet layer's A_log (one per value head) and gated-norm
    # weight (one value head wide) in F32; Qwen3.6-27B stores them in BF16
    t = cfg["text_config"]
    linear = t["layer_types"].count("linear_attention")
    fp32 = linear * (t["linear_num_value_heads"] + t["linear_value_head_dim"])
    assert counts.get("F32", 0) in (0, fp32)
    # kvcalc stores those in the base dtype: the only difference left
    assert _stored(counts) - calc.weight_bytes(spec) == 2 * counts.get("F32", 0)


def test_qwen3_5_27b_preset_stores_the_hub_checkpoint():
    # presets/models/qwen3.5-27b.toml: the text model, its MTP layer and vision tower, bf16; the
    # checkpoint's 48 x (48 + 128) F32 elements (A_log, the gated norm) are the only difference
    counts = _counts("Qwen/Qwen3.5-27B")
    preset = calc.load_preset("qwen3.5-27b")
    assert counts["F32"] == 48 * (48 + 128)
    assert calc.weight_bytes(preset) == _stored(counts) - 2 * counts["F32"] == 55_562_855_904


def test_qwen3_5_dedicated_mtp_embeddings_are_refused():
    cfg = _cfg("Qwen/Qwen3.5-27B")
    cfg["text_config"] = {**cfg["text_config"], "mtp_use_dedicated_embeddings": True}
    with pytest.raises(ValueError, match=r"'mtp_use_dedicated_embeddings' must be false.*True"):
        calc.from_hf_config(cfg)


def test_deepseek_v3_2_every_dtype_written_out():
    """DeepSeek-V3's shapes (tests/test_quant_checkpoints_fp8.py) plus the lightning indexer in
    all 62 layers (61 + MTP): wq_b (1536 -> 64 x 128) and wk (7168 -> 128) in fp8,
    weights_proj (7168 -> 64) in bf16 (transformers modeling_deepseek_v32.py
    `_keep_in_fp32_modules = ["indexer.weights_proj"]`, left out of fp8), its k_norm LayerNorm
    in fp32 with every RMSNorm; the 128 x 128 block scales (scale_fmt ue8m0) in no Hub count
    (huggingface.js counts F8_E8M0 as scale-only), one byte each in kvcalc."""
    counts = _counts("deepseek-ai/DeepSeek-V3.2")
    v3 = HUB["models"]["deepseek-ai/DeepSeek-V3"]["parameters"]
    H, L, V, E, moe = 7168, 61, 129280, 256, 59  # 58 MoE decoder layers + the MTP layer
    assert counts["F8_E4M3"] - v3["F8_E4M3"] == (L + 1) * (1536 * 64 * 128 + H * 128)
    assert (
        counts["BF16"] - v3["BF16"]
        == (L + 1) * (H * 64) - (L + 1) * (2 * H + 1536 + 512) - H - 3 * H
    )
    norms = (L + 1) * (2 * H + 1536 + 512) + H + 3 * H  # blocks, final; enorm, hnorm, head norm
    assert counts["F32"] == norms + (L + 1) * 2 * 128 + moe * E
    spec = _spec("deepseek-ai/DeepSeek-V3.2")
    parts = calc.weight_bytes_breakdown(spec)
    assert sum(v for k, v in parts.items() if k.endswith(":packed")) == counts["F8_E4M3"]
    assert parts["norm:fp32"] + parts["router:e_score_correction_bias"] == 4 * counts["F32"]

    def blocks(o: int, i: int) -> int:
        return -(-o // 128) * -(-i // 128)

    v3_blocks = v3["F32"] - moe * E  # V3 stores its block scales in F32
    scales = v3_blocks + (L + 1) * (blocks(64 * 128, 1536) + blocks(128, H))
    assert sum(v for k, v in parts.items() if k.endswith(":scales")) == scales
    assert calc.weight_bytes(spec) == _stored(counts) + scales
    mtp = calc.param_count(spec.replace(include_mtp=True)) - calc.param_count(spec)
    assert counts["F8_E4M3"] + counts["BF16"] + counts["F32"] == (
        calc.param_count(spec) + mtp + 2 * V * H + moe * E
    )  # + the MTP layer's own embedding and head copies, the e_score_correction_bias buffers


@pytest.mark.parametrize(
    "config",
    [
        {"model_type": "gemma4"},
        {"model_type": "phi"},  # (glm4_moe_lite is imported since the 'newm' merge)
        {"model_type": "ministral3"},
        {"model_type": "mistral3", "text_config": {"model_type": "ministral3"}},
    ],
)
def test_unsupported_model_types_of_the_set_are_refused_by_name(config):
    mt = config.get("text_config", config)["model_type"]
    with pytest.raises(ValueError, match=rf"'model_type' must be one of .*got '{mt}'"):
        calc.from_hf_config(config)


def test_deepseek_v3_2_preset_stores_the_hub_count():
    # presets/models/deepseek-v3.2.toml (family "deepseek", indexed layers): the checkpoint's
    # bytes as the Hub counts them (above), plus one e8m0 byte per 128 x 128 block scale
    spec, imported = calc.load_preset("deepseek-v3.2"), _spec("deepseek-ai/DeepSeek-V3.2")
    scales = sum(v for k, v in calc.weight_bytes_breakdown(spec).items() if k.endswith(":scales"))
    assert calc.weight_bytes(spec) == _stored(_counts("deepseek-ai/DeepSeek-V3.2")) + scales
    assert calc.weight_bytes(spec) == calc.weight_bytes(imported)
