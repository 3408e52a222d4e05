"""MiniMax-M2, GLM-4.7-Flash, GLM-5 and Kimi K2.5 imports beyond test_presets_modern.py: Kimi
K2.5's MoonViT encoder against transformers' own modules on the meta device, and the config
fields each import refuses by name (calc/hf/glm_minimax.py, calc/hf/moonvit.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import calc
from calc.vision import vision_params

FIXTURES = Path(__file__).parent / "fixtures" / "hf" / "modern"


def fixture(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.json").read_text())


def test_kimi_k25_vision_matches_transformers():
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    transformers.logging.set_verbosity_error()
    d = fixture("kimi-k2.5")
    spec = calc.from_hf_config(d)
    vc = d["vision_config"]  # the remote-code names, spelled as Kimi_K25VisionConfig's
    vision = {
        "hidden_size": vc["vt_hidden_size"],
        "intermediate_size": vc["vt_intermediate_size"],
        "num_hidden_layers": vc["vt_num_hidden_layers"],
        "num_attention_heads": vc["vt_num_attention_heads"],
        "patch_size": vc["patch_size"],
        "pos_emb_height": vc["init_pos_emb_height"],
        "pos_emb_width": vc["init_pos_emb_width"],
        "merge_kernel_size": vc["merge_kernel_size"],
    }
    text = {**d["text_config"], "model_type": "deepseek_v3", "num_hidden_layers": 2}
    text.pop("quantization_config")
    cfg = transformers.AutoConfig.for_model("kimi_k25", text_config=text, vision_config=vision)
    with torch.device("meta"):
        model = transformers.AutoModelForImageTextToText.from_config(cfg)
    parts = (model.model.vision_tower, model.model.mm_projector)
    numel = sum(p.numel() for m in parts for p in m.parameters())
    assert vision_params(spec.vision, spec.hidden_size) == numel
    # written out: patch conv + bias, a 64 x 64 grid, 27 blocks (biased qkv / proj / fc1 / fc2,
    # two LayerNorms), the final LayerNorm; the projector's LayerNorm, 4608 -> 4608 -> 7168
    h, m, k = 1152, 4304, 4 * 1152
    block = 3 * (h * h + h) + (h * h + h) + (h * m + m) + (m * h + h) + 4 * h
    tower = h * 3 * 14 * 14 + h + 64 * 64 * h + 27 * block + 2 * h
    assert numel == tower + 2 * h + (k * k + k) + (k * 7168 + 7168)


def test_kimi_k25_is_kimi_k2_text_model():
    k25 = calc.from_hf_config(FIXTURES / "kimi-k2.5.json")
    k2 = calc.from_hf_config(FIXTURES / "kimi-k2.json")
    assert k25.vision is not None and k25.vision.kind == "moonvit"
    # same shapes as Kimi K2: one parameter count (the vision tower is not in param_count)
    assert calc.param_count(k25) == calc.param_count(k2)
    assert calc.kv_bytes_per_token(k25, "bf16") == 61 * (512 + 64) * 2


@pytest.mark.parametrize(
    ("name", "change", "key"),
    [
        ("minimax-m2.5", {"use_qk_norm": False}, "use_qk_norm"),
        ("minimax-m2.5", {"qk_norm_type": "per_head"}, "qk_norm_type"),
        ("minimax-m2.5", {"use_routing_bias": False}, "use_routing_bias"),
        ("minimax-m2.5", {"shared_intermediate_size": 1536}, "shared_intermediate_size"),
        ("minimax-m2.5", {"attention_bias": True}, "attention_bias"),
        ("minimax-m2.5", {"attn_type_list": [0] + [1] * 61}, "attn_type_list"),
        ("minimax-m2.5", {"rotary_dim": 256}, "rotary_dim"),
        ("glm-4.7-flash", {"first_k_dense_replace": 2}, "first_k_dense_replace"),
        ("glm-4.7-flash", {"moe_layer_freq": 2}, "moe_layer_freq"),
        ("glm-5", {"moe_layer_freq": 2}, "moe_layer_freq"),
        ("glm-5", {"index_topk_freq": 4, "index_skip_topk_offset": 3}, "index_topk_freq"),
        ("glm-5", {"indexer_types": ["full"] * 77 + ["shared"]}, "indexer_types"),
        ("glm-5", {"index_topk_pattern": "F" * 77 + "S"}, "index_topk_pattern"),
    ],
)
def test_refused_by_name(name, change, key):
    with pytest.raises(ValueError, match=f"'{key}'"):
        calc.from_hf_config({**fixture(name), **change})


@pytest.mark.parametrize(
    ("change", "key"),
    [
        ({"merge_kernel_size": [2, 3]}, "merge_kernel_size"),
        ({"mm_projector_type": "patchmergerv2"}, "mm_projector_type"),
        ({"pos_emb_type": "rope"}, "pos_emb_type"),
        ({"merge_type": "sd4"}, "merge_type"),
        ({"mm_hidden_size": 1024}, "projection_hidden_size"),
    ],
)
def test_moonvit_refused_by_name(change, key):
    d = fixture("kimi-k2.5")
    d["vision_config"] = {**d["vision_config"], **change}
    with pytest.raises(ValueError, match=f"'{key}'"):
        calc.from_hf_config(d)


def test_glm_defaults_follow_the_config_classes():
    # GlmMoeDsaConfig: 3 dense layers and a 32-head indexer when the file names neither;
    # Glm4MoeLiteConfig: layer 0 dense
    d = {k: v for k, v in fixture("glm-5").items() if k != "first_k_dense_replace"}
    spec = calc.from_hf_config(d)
    assert spec.index_n_heads == 32 and spec.mlp_types[:4] == ("dense",) * 3 + ("sparse",)
    flash = calc.from_hf_config({**fixture("glm-4.7-flash"), "first_k_dense_replace": 1})
    assert flash.mlp_types[:2] == ("dense", "sparse")


def test_minimax_router_is_stored_and_loaded_in_fp32():
    # whn09/neuronx-distributed-inference @ e205de97 examples/minimax_m2_misc/
    # model_precision_report.txt: block_sparse_moe.gate.weight (256 x 3072) is F32 in each of the
    # 62 layers of the fp8 checkpoint; vLLM's GateLinear and SGLang's ReplicatedLinear build it with
    # params_dtype=torch.float32 (minimax_m2.py), replicated on every GPU
    from calc.quant.sharding import stored_bytes_per_gpu

    spec = calc.load_preset("minimax-m2.5")
    router = 62 * 256 * 3072 * 4
    assert calc.weight_bytes_breakdown(spec)["router:fp32"] == router
    assert stored_bytes_per_gpu(spec, tp=8)["router"] == router
