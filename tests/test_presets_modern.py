"""Presets of today's families (2024-2025): each against its config.json, transformers' own
model built from that file on the meta device, and the figures its publisher states.

Fixtures: tests/fixtures/hf/modern/<preset>.json, the config.json each preset was made from;
the preset's `source` gives the canonical Hugging Face URL and its `notes` where the copy was
read (public mirrors of the file; a few are assembled from the model card and partial quotes,
as the notes say). Published figures are checked under the rules of test_presets_published.py
(ROUND / TRUNCATE / REL), each with the part of the count the publisher counts, written out.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from test_presets_published import REL, ROUND, TRUNCATE, _within

import calc
from calc.spec import ModelSpec

FIXTURES = Path(__file__).parent / "fixtures" / "hf" / "modern"
META = ("name", "family", "display_name", "source", "retrieved", "published_params",
        "published_active_params", "notes", "quantization", "checkpoint_dtype")  # fmt: skip
# (quantization, checkpoint_dtype: a preset is the model, not how one checkpoint of it is
# stored; issue 11)


def total(s: ModelSpec) -> int:
    return calc.param_count(s)


def active(s: ModelSpec) -> int:
    return calc.active_param_count(s)


def active_less_embed(s: ModelSpec) -> int:
    # a token's embedding row is a lookup, not a matmul: DeepSeek, Kimi and OpenAI count
    # activated parameters without the input table (gpt-oss-120b model card: 5.13B active =
    # 5.71B - 201088 x 2880 embedding)
    return calc.active_param_count(s) - calc.param_breakdown(s)["embed"]


def hub_total(s: ModelSpec) -> int:
    # DeepSeek's checkpoints: the main model, the MTP layer (calc's include_mtp) with its own
    # embedding and head copies, and each MoE layer's e_score_correction_bias buffer (one per
    # routed expert; the MTP layer is a MoE layer) - tests/test_hub_counts.py
    moe = dict(s.mlp_layer_types)["sparse"] + s.num_nextn_predict_layers
    tables = 2 * s.vocab_size * s.hidden_size * s.num_nextn_predict_layers
    return calc.param_count(s.replace(include_mtp=True)) + tables + moe * s.num_local_experts


def active_less_tables(s: ModelSpec) -> int:
    # GLM-4.5 and Qwen3-Next state activated parameters without the embedding and the LM head
    b = calc.param_breakdown(s)
    return calc.active_param_count(s) - b["embed"] - b["lm_head"]


# name -> (total claim, active claim or None); a claim is (figure, rule, comparable, rel_tol, why)
Claim = tuple[str, str, Callable[[ModelSpec], int], float, str]
CARD = "model card"
MULTIMODAL = "the published figure includes the vision encoder, which kvcalc's text spec omits"
MODERN: dict[str, tuple[Claim, Claim | None]] = {
    "llama-3.2-1b": (("1B (1.23B)", TRUNCATE, total, 0, CARD), None),
    "llama-3.2-3b": (("3B (3.21B)", ROUND, total, 0, CARD), None),
    "llama-4-scout": (("109B", REL, total, 0.02, MULTIMODAL), ("17B", ROUND, active, 0, CARD)),
    "llama-4-maverick": (
        ("400B", REL, total, 0.01, "size label; " + MULTIMODAL),
        ("17B", ROUND, active, 0, CARD),
    ),
    # Qwen2.5-3B-Instruct card (3.09B); 3,085,938,688 is also the Hub's safetensors count
    "qwen2.5-3b": (("3.09B", ROUND, total, 0, CARD), None),
    "qwen2.5-7b": (("7.61B", TRUNCATE, total, 0, "Qwen2.5 card, truncated"), None),
    "qwen2.5-72b": (("72.7B", ROUND, total, 0, CARD), None),
    "qwen3-0.6b": (("0.6B", ROUND, total, 0, CARD), None),
    "qwen3-8b": (("8.2B", ROUND, total, 0, CARD), None),
    "qwen3-32b": (("32.8B", ROUND, total, 0, CARD), None),
    "qwen3-30b-a3b": (("30.5B", ROUND, total, 0, CARD), ("3.3B", TRUNCATE, active, 0, CARD)),
    "qwen3-235b-a22b": (("235B", ROUND, total, 0, CARD), ("22B", ROUND, active, 0, CARD)),
    "qwen3-next-80b-a3b": (
        ("80B", ROUND, total, 0, CARD),
        ("3B", TRUNCATE, active_less_tables, 0, "'A3B' size label, embedding and head excluded"),
    ),
    # Qwen3.5: the language model (vision tower and MTP layer aside: tests/test_hub_counts.py
    # checks the checkpoint's count with them); 4.21B, 26.90B and 34.66B, 3.45B active with the
    # tables
    "qwen3.5-4b": (("4B", ROUND, total, 0, "the '4B' size label"), None),
    "qwen3.5-27b": (("27B", ROUND, total, 0, "the '27B' size label"), None),
    "qwen3.5-35b-a3b": (
        ("35B", ROUND, total, 0, "transformers docs qwen3_5_moe.md: '35B total/3B active'"),
        ("3B", TRUNCATE, active, 0, "transformers docs qwen3_5_moe.md: '35B total/3B active'"),
    ),
    "deepseek-v3": (("671B", ROUND, total, 0, CARD), ("37B", ROUND, active_less_embed, 0, CARD)),
    "deepseek-r1": (("671B", ROUND, total, 0, CARD), ("37B", ROUND, active_less_embed, 0, CARD)),
    # the Hub's size label: its safetensors total, 685,355,329,792 (hub_dtype_counts.json)
    "deepseek-v3.2": (
        ("685B", ROUND, lambda s: hub_total(s), 0, "Hub size label: + MTP layer, its tables"),
        ("37B", ROUND, active_less_embed, 0, "V3's figure, repeated for V3.2 (milvus.io)"),
    ),
    "kimi-k2": (("1T", ROUND, total, 0, CARD), ("32B", ROUND, active_less_embed, 0, CARD)),
    # 284,332,230,231 (= transformers' numel on meta); active 13.80B with the embedding table,
    # 13.27B without: DeepSeek counts activated parameters without the input table (V3's
    # README_WEIGHTS: 36.7B activated includes the output head, not the embedding)
    "deepseek-v4-flash": (
        ("284B", ROUND, total, 0, CARD),
        ("13B", ROUND, active_less_embed, 0, CARD),
    ),
    "glm-4.5": (
        # 352.80B without the MTP layer, 356.79B with it: '355B' is a size label
        ("355B", REL, total, 0.01, "size label between the counts without and with MTP"),
        ("32B", ROUND, active_less_tables, 0, "transformers docs, glm4_moe.md"),
    ),
    "glm-4.5-air": (
        ("106B", TRUNCATE, total, 0, "transformers docs, glm4_moe.md"),
        ("12B", ROUND, active_less_tables, 0, "transformers docs, glm4_moe.md"),
    ),
    "gpt-oss-20b": (("21B", ROUND, total, 0, CARD), ("3.6B", ROUND, active_less_embed, 0, CARD)),
    "gpt-oss-120b": (("117B", ROUND, total, 0, CARD), ("5.1B", ROUND, active_less_embed, 0, CARD)),
    "gemma-3-1b": (("1B", ROUND, total, 0, CARD), None),
    "gemma-3-4b": (("4B", ROUND, total, 0, MULTIMODAL + "; rounds to 4B without it"), None),
    "gemma-3-12b": (("12B", ROUND, total, 0, MULTIMODAL + "; rounds to 12B without it"), None),
    "gemma-3-27b": (("27B", ROUND, total, 0, MULTIMODAL + "; rounds to 27B without it"), None),
    "phi-3-mini": (("3.8B", ROUND, total, 0, CARD), None),
    "phi-4": (("14B", REL, total, 0.05, "'14B parameters' is a size label for 14.66B"), None),
    "mistral-nemo": (("12B", ROUND, total, 0, CARD), None),
    "mistral-small-3.1": (("24B", ROUND, total, 0, MULTIMODAL + "; rounds to 24B"), None),
    "olmo-2-7b": (("7B", ROUND, total, 0, CARD), None),
    "smollm3-3b": (("3B", ROUND, total, 0, CARD), None),
    "command-r": (("35B", ROUND, total, 0, "card: '35 billion parameter'"), None),
    # 228,689,748,992 (= transformers' numel on meta); 10.42B active without the embedding
    "minimax-m2.5": (
        ("230B", REL, total, 0.01, "transformers minimax_m2.md: '230 billion total parameters'"),
        ("10B", ROUND, active_less_embed, 0, "minimax_m2.md: '10 billion active parameters'"),
    ),
    "kimi-k2.5": (("1T", ROUND, total, 0, CARD), ("32B", ROUND, active_less_embed, 0, CARD)),
    "glm-4.7-flash": (
        ("30B", ROUND, total, 0, "card: '30B-A3B' size label"),
        ("3B", ROUND, active_less_tables, 0, "card: '30B-A3B' size label"),
    ),
    # 743,911,199,232; 39.88B active without the embedding and the LM head (as GLM counts)
    "glm-5": (
        ("750B", REL, total, 0.01, "SiliconFlow's listing, a size label"),
        ("40B", ROUND, active_less_tables, 0, "SiliconFlow's listing"),
    ),
    # Mamba-2 hybrids (calc/hf/hybrid_ssm.py; tests/test_hybrid_ssm.py): the cards say 30B / 3.5B
    # and 32B / 9B; 31.6B and 32.2B are third-party listings of the exact totals
    "nemotron-3-nano-30b-a3b": (
        ("30B (31.6B)", ROUND, total, 0, "31.6B: fitmyllm.com / open-source-ai.tech listings"),
        ("3.5B", TRUNCATE, active, 0, "model card '3.5B active', embedding included"),
    ),
    "granite-4.0-h-small": (
        ("32B (32.2B)", ROUND, total, 0, "32.2B: immers.cloud listing; card 32B"),
        ("9B", ROUND, active, 0, "model card '9B active'"),
    ),
}


def finest(figure: str) -> str:
    """'1B (1.23B)' -> '1.23B': the finer of a label and its exact figure."""
    inner = re.search(r"\((.+)\)", figure)
    return inner[1] if inner else figure


def fixture(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.json").read_text())


def test_every_modern_preset_has_a_fixture():
    assert sorted(p.stem for p in FIXTURES.glob("*.json")) == sorted(MODERN)
    assert set(MODERN) <= set(calc.list_presets())


@pytest.mark.parametrize("name", sorted(MODERN))
def test_preset_is_its_config(name):
    preset = calc.load_preset(name)
    imported = calc.from_hf_config(FIXTURES / f"{name}.json", name=name)
    # a preset whose published checkpoint is quantized (gpt-oss: MXFP4 experts; DeepSeek-V3 / R1,
    # Kimi K2: fp8 blocks) carries that checkpoint's quantization_config and dtype: they must be
    # the fixture config.json's
    meta = META if preset.quantization is None else META[:-2]
    keep = {k: getattr(preset, k) for k in meta}
    assert imported.model_copy(update=keep) == preset


def test_quantized_checkpoint_presets():
    quantized = {n for n in MODERN if calc.load_preset(n).quantization is not None}
    assert quantized == {
        "gpt-oss-20b", "gpt-oss-120b", "deepseek-v3", "deepseek-r1", "kimi-k2", "deepseek-v4-flash",
        "minimax-m2.5", "kimi-k2.5", "deepseek-v3.2",
    }  # fmt: skip
    # every fixture config.json that has a quantization_config is such a preset
    import json

    def has_qc(d: dict) -> bool:  # Kimi K2.5 keeps it in text_config
        return "quantization_config" in d or "quantization_config" in d.get("text_config", {})

    with_qc = {n for n in MODERN if has_qc(json.loads((FIXTURES / f"{n}.json").read_text()))}
    assert with_qc == quantized


@pytest.mark.parametrize("name", sorted(MODERN))
def test_published_figures(name):
    spec = calc.load_preset(name)
    (figure, rule, part, tol, why), act = MODERN[name]
    assert spec.published_params == figure
    assert _within(rule, part(spec), finest(figure), tol), (part(spec), why)
    assert (spec.published_active_params is not None) == spec.is_moe == (act is not None)
    if act is not None:
        figure, rule, part, tol, why = act
        assert spec.published_active_params == figure
        assert _within(rule, part(spec), figure, tol), (part(spec), why)


def _hf_config(name: str):
    transformers = pytest.importorskip("transformers")
    d = fixture(name)
    wrappers = {"gemma3": "gemma3_text", "llama4": "llama4_text", "mistral3": "mistral",
                "kimi_k25": "kimi_k2", "qwen3_5": "qwen3_5_text",
                "qwen3_5_moe": "qwen3_5_moe_text"}  # fmt: skip
    if d["model_type"] in wrappers:  # the language model of a multimodal checkpoint
        d = {"model_type": wrappers[d["model_type"]], **d["text_config"]}
    if d["model_type"] == "kimi_k2":  # remote code; transformers' DeepseekV3 is the same model
        d["model_type"] = "deepseek_v3"
    drop = ("architectures", "auto_map", "quantization_config", "torch_dtype", "dtype")
    d = {k: v for k, v in d.items() if k not in drop}
    return transformers.AutoConfig.for_model(d.pop("model_type"), **d)


@pytest.mark.parametrize("name", sorted(MODERN))
def test_transformers_numel_full_size(name):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    transformers.logging.set_verbosity_error()
    with torch.device("meta"):  # shapes only: a 1T-parameter model costs nothing
        model = transformers.AutoModelForCausalLM.from_config(_hf_config(name))
    numel = sum(p.numel() for p in model.parameters())  # tied tensors are yielded once
    assert calc.param_count(calc.load_preset(name)) == numel


def test_written_out_deepseek_v3():
    # DeepSeek-V3 config.json: 61 layers (3 dense, 58 MoE), h 7168, 128 heads, MLA with
    # q_lora 1536, kv_lora 512, nope 128, rope 64, v 128; 256 routed experts of 2048 (top 8)
    # plus 1 shared; dense MLP 18432; vocab 129280, untied.
    h, H, L = 7168, 128, 61
    attn = (
        h * 1536
        + 1536 * H * 192  # q_a_proj, q_b_proj (nope + rope = 192 per head)
        + h * (512 + 64)
        + 512 * H * (128 + 128)  # kv_a_proj_with_mqa, kv_b_proj (k_nope, v)
        + H * 128 * h  # o_proj
        + 1536
        + 512
        + 2 * h  # q_a / kv_a layernorms, input / post-attention norms
    )
    dense = 3 * h * 18432
    moe = 256 * 3 * h * 2048 + 3 * h * 2048 + h * 256  # routed, shared, router
    total_ = L * attn + 3 * dense + 58 * moe + 2 * 129280 * h + h
    # 671,026,404,352 is also the numel of transformers' DeepseekV3ForCausalLM on meta
    assert total_ == calc.param_count(calc.load_preset("deepseek-v3")) == 671_026_404_352
    # KV cache per token: the latent (512) and the shared rope key (64) in each of 61 layers
    assert calc.kv_bytes_per_token(calc.load_preset("deepseek-v3"), "bf16") == 61 * 576 * 2


@pytest.mark.parametrize("name", sorted(MODERN))
def test_transformers_cache_bytes_full_width(name):
    # the cache a bf16 prefill leaves in transformers' DynamicCache, at full width on meta (no
    # memory), for the first layers (a whole pattern period: up to 8), past the smallest
    # window or chunk so that sliding and chunked layers are capped
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from test_reference_modern import _cache_layer_bytes

    transformers.logging.set_verbosity_error()
    spec = calc.load_preset(name)
    cfg = _hf_config(name)
    k = min(spec.num_hidden_layers, 8)
    cfg.num_hidden_layers = k
    for attr in ("layer_types", "no_rope_layers", "mlp_layer_types"):
        if getattr(cfg, attr, None) is not None:
            setattr(cfg, attr, getattr(cfg, attr)[:k])
    caps = [w for w in (spec.sliding_window, spec.attention_chunk_size) if w]
    n = min(caps) + 3 if caps else 64
    with torch.device("meta"), torch.no_grad():
        model = transformers.AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16)
        if spec.is_v4:  # from_pretrained keeps these in fp32 (from_config does not): the CSA
            # overlap gate is gate + the fp32 position_bias
            keep = model._keep_in_fp32_modules_strict
            for pname, p in model.named_parameters():
                if any(k in pname.split(".") for k in keep):
                    p.data = p.data.float()
        ids = torch.zeros(1, n, dtype=torch.long)
        cache = model(input_ids=ids, use_cache=True).past_key_values
    want = calc.kv_cache_layer_bytes(spec, n, 1, "bf16", convention="transformers")[:k]
    assert _cache_layer_bytes(cache) == want
