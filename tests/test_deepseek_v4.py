"""DeepSeek-V4 (model_type deepseek_v4): the spec, the config.json reader and the formulas of its
compressed attention, against sources written out here.

Sources: DeepSeek-V4-Flash's config.json (tests/fixtures/hf/modern/deepseek-v4-flash.json, a
verbatim public copy of https://huggingface.co/deepseek-ai/DeepSeek-V4-Flash/blob/main/config.json:
see the preset's notes); transformers 5.23 configuration_deepseek_v4.py / modeling_deepseek_v4.py
(module shapes, the default schedule, the legacy keys), whose model is built here on the meta
device; the shapes of the checkpoint's layer-0 tensors quoted in the same public document
(wq_a [1024, 4096], wq_b [32768, 1024], wkv [512, 4096], wo_a [8192, 4096], wo_b [4096, 8192],
hc_attn_fn [24, 16384], hc_attn_base [24], hc_attn_scale [3], attn_sink [64]).
Random small configs against transformers (parameters and cache): test_deepseek_v4_reference.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import calc
from calc.attention import attention_flops_decode, prefill_attention_flops
from calc.hf import from_hf_config
from calc.layers import KINDS
from calc.params import param_breakdown

CONFIG = Path(__file__).parent / "fixtures" / "hf" / "modern" / "deepseek-v4-flash.json"
CSA, HCA, SWA = "compressed_sparse_attention", "heavily_compressed_attention", "sliding_attention"


@pytest.fixture(scope="module")
def spec():
    return from_hf_config(CONFIG, name="deepseek-v4-flash")


def raw() -> dict:
    return json.loads(CONFIG.read_text())


def test_layout_from_compress_ratios(spec):
    # 44 ratios: 0, 0, then 4 / 128 alternating, and the MTP block's trailing 0 (cut off)
    assert len(raw()["compress_ratios"]) == 44
    assert spec.attention_counts == {SWA: 2, CSA: 21, HCA: 20}
    assert spec.attention_types[:4] == (SWA, SWA, CSA, HCA) and spec.attention_types[-1] == CSA
    assert (spec.compress_rate_csa, spec.compress_rate_hca, spec.sliding_window) == (4, 128, 128)
    assert (spec.qk_rope_head_dim, spec.partial_rotary_factor) == (64, 64 / 512)
    assert spec.n_moe_layers == 43 and spec.shared_expert_intermediate_size == 2048


def test_parameters_written_out(spec):
    h, H, d, r, g, ro, m, V, E, f = 4096, 64, 512, 1024, 8, 1024, 4, 129280, 256, 2048
    Hi, di = 64, 128
    # every layer: q_a, q_b, kv_proj, o_a (grouped: g blocks of H d / g -> ro), o_b, sinks,
    # q_a_norm, kv_norm, two block norms, attn_hc and ffn_hc (fn, base, scale), the MoE block
    attn = h * r + r * H * d + h * d + (H * d // g) * (g * ro) + g * ro * h + H + r + d + 2 * h
    hc = 2 * ((2 + m) * m * m * h + (2 + m) * m + 3)
    moe = E * 3 * h * f + 3 * h * f + E * h  # routed, one shared, router weight
    layer = attn + hc + moe
    csa = (2 * h * 2 * d + 4 * 2 * d + d) + (  # compressor: kv, gate (2d), position_bias, norm
        2 * h * 2 * di + 4 * 2 * di + di + r * Hi * di + h * Hi  # indexer
    )
    hca = 2 * h * d + 128 * d + d
    head = m * m * h + m + 1 + h  # hc_head (fn, base, scale), final norm
    total = 43 * layer + 21 * csa + 20 * hca + head + 2 * V * h  # untied embedding and head
    assert total == calc.param_count(spec) == 284_332_230_231
    # the checkpoint's layer-0 tensor shapes (quoted above)
    assert (h * r, r * H * d, h * d) == (1024 * 4096, 32768 * 1024, 512 * 4096)
    assert ((H * d // g) * (g * ro), g * ro * h) == (8192 * 4096, 4096 * 8192)
    assert ((2 + m) * m * m * h, (2 + m) * m) == (24 * 16384, 24)
    b = param_breakdown(spec)
    assert b["hc"] == 43 * hc + m * m * h + m + 1
    assert b["attn/compressor"] == 21 * (2 * h * 2 * d + 4 * 2 * d + d) + 20 * hca
    assert b["attn/sinks"] == 43 * H


def test_active_parameters(spec):
    # a token uses 6 of 256 routed experts in each of 43 layers; everything else always
    idle = 43 * (256 - 6) * 3 * 4096 * 2048
    assert calc.param_count(spec) - calc.active_param_count(spec) == idle


def test_meta_numel_by_component(spec):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    data = raw()
    for key in ("quantization_config", "model_type", "architectures", "torch_dtype"):
        data.pop(key)
    config = transformers.AutoConfig.for_model("deepseek_v4", **data)
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(config)
    named = dict(model.named_parameters())
    assert calc.param_count(spec) == sum(p.numel() for p in named.values())
    b = param_breakdown(spec)

    def part(pred):
        return sum(p.numel() for n, p in named.items() if pred(n))

    assert b["attn/indexer"] == part(lambda n: ".indexer." in n)
    assert b["attn/compressor"] == part(lambda n: ".compressor." in n and ".indexer." not in n)
    assert b["hc"] == part(lambda n: "_hc." in n or ".hc_head." in n)
    assert b["attn/o"] == part(lambda n: ".o_a_proj." in n or ".o_b_proj." in n)
    # buffers are not counted: tid2eid on the 3 hash layers, e_score_correction_bias on the rest
    buffers = dict(model.named_buffers())
    assert sum("tid2eid" in n for n in buffers) == 3
    assert sum("e_score_correction_bias" in n for n in buffers) == 40


def test_engine_cache_written_out(spec):
    # engine: window 128 x 512 in every layer, + n // 4 entries of 512 + 128 (CSA),
    # + n // 128 entries of 512 (HCA); bf16
    n = 1_000_003
    want = 2 * (43 * 128 * 512 + 21 * (n // 4) * (512 + 128) + 20 * (n // 128) * 512)
    assert calc.kv_cache_bytes(spec, n, dtype="bf16") == want
    blocks = calc.kv_cache_bytes(spec, n, dtype="bf16", block_size=64)
    up = lambda x: -(-x // 64) * 64  # noqa: E731
    want = 2 * (43 * 128 * 512 + 21 * up(n // 4) * 640 + 20 * up(n // 128) * 512)
    assert blocks == want


def test_transformers_cache_written_out(spec):
    # DeepseekV4*Cache after 131 tokens, one sequence, bf16 (fp32 overlap gate): sliding layers
    # hold K and V of 127 tokens; CSA: 127 window keys, 32 entries + 32 indexer keys, 3
    # buffered tokens (kv + gate: 2 x 1024 and 2 x 256), the 4-token overlap (kv bf16, gate fp32)
    # of 512 + 128; HCA: 127 keys, 1 entry, 3 buffered tokens (2 x 512)
    n = 131
    swa = 127 * 2 * 512 * 2
    csa = (127 * 512 + 32 * 640 + 3 * (2 * 1024 + 2 * 256)) * 2 + 4 * 640 * (2 + 4)
    hca = (127 * 512 + 1 * 512 + 3 * 2 * 512) * 2
    got = calc.kv_cache_layer_bytes(spec, n, 1, "bf16", convention="transformers")
    assert got[:4] == [swa, swa, csa, hca]


def _brute_pairs(n, w, rate, topk):
    window = sum(min(i + 1, w) for i in range(n))
    entries = [(i + 1) // rate for i in range(n)]
    return window + sum(e if topk is None else min(e, topk) for e in entries), sum(entries)


@pytest.mark.parametrize("n", [0, 1, 3, 4, 5, 127, 128, 129, 2047, 2048, 2049, 5000])
def test_prefill_pairs_brute_force(spec, n):
    assert KINDS[CSA].pairs(spec, n) == _brute_pairs(n, 128, 4, 512)[0]
    assert KINDS[CSA].index_pairs(spec, n) == _brute_pairs(n, 128, 4, 512)[1]
    assert KINDS[HCA].pairs(spec, n) == _brute_pairs(n, 128, 128, None)[0]
    assert KINDS[SWA].pairs(spec, n) == _brute_pairs(n, 128, 1, 0)[0]


def test_flops_written_out(spec):
    per_pair = 4 * 64 * 512  # QK^T and AV over 64 heads, K = V = 512 wide
    index = 2 * 64 * (128 + 1)  # indexer scores over 64 heads of 128, weighted sum
    ctx = 100_000
    want = (
        2 * per_pair * 128
        + 21 * (per_pair * (128 + 512) + index * (ctx // 4))
        + 20 * per_pair * (128 + ctx // 128)
    )
    assert attention_flops_decode(spec, ctx) == want
    n = 3000
    pairs = {k: _brute_pairs(n, 128, r, t) for k, r, t in ((CSA, 4, 512), (HCA, 128, None))}
    want = (
        2 * per_pair * _brute_pairs(n, 128, 1, 0)[0]
        + 21 * (per_pair * pairs[CSA][0] + index * pairs[CSA][1])
        + 20 * per_pair * pairs[HCA][0]
    )
    assert prefill_attention_flops(spec, n) == want


def test_legacy_and_modern_keys_agree():
    base = {k: v for k, v in raw().items() if k not in ("compress_ratios", "num_hash_layers")}
    types = ["sliding_attention"] * 2 + [CSA if i % 2 == 0 else HCA for i in range(41)]
    modern = {**base, "layer_types": types, "mlp_layer_types": ["hash_moe"] * 3 + ["moe"] * 40}
    modern["compress_rates"] = {CSA: 4, HCA: 128}
    del modern["qk_rope_head_dim"]
    modern["partial_rotary_factor"] = 64 / 512
    a = from_hf_config(CONFIG, name="x")
    b = from_hf_config(modern, name="x")
    assert b.model_copy(update={"notes": None}) == a.model_copy(update={"notes": None})


def test_default_schedule_and_rate_overrides():
    # DeepseekV4Config.__post_init__: 2 HCA layers, then CSA (odd i) / HCA (even i)
    s = from_hf_config({"model_type": "deepseek_v4", "num_hidden_layers": 6})
    assert s.attention_types == (HCA, HCA, HCA, CSA, HCA, CSA)
    s = from_hf_config({"model_type": "deepseek_v4", "num_hidden_layers": 6,
                        "compress_rate_csa": 8, "compress_rates": {HCA: 64}})  # fmt: skip
    assert (s.compress_rate_csa, s.compress_rate_hca) == (8, 64)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"n_shared_experts": 2}, "n_shared_experts"),
        ({"attention_bias": True}, "attention_bias"),
        ({"num_key_value_heads": 2}, "num_key_value_heads"),
        ({"intermediate_size": 4096}, "intermediate_size"),
        ({"compress_ratios": [0, 8] + [4] * 42}, "compress_ratios"),
        ({"compress_ratios": [0, 4]}, "compress_ratios"),
        ({"compress_rates": {"csa": 4}}, "compress_rates"),
        ({"layer_types": ["full_attention"] * 43}, "layer_types"),
        ({"mlp_layer_types": ["dense"] * 43}, "mlp_layer_types"),
        ({"o_groups": 3}, "o_groups"),
        ({"index_head_dim": 32}, "index_head_dim"),
    ],
)
def test_count_changing_fields_are_refused_by_name(change, field):
    with pytest.raises(ValueError, match=f"'{field}'"):
        from_hf_config({**raw(), **change})


def test_refusals_name_v4(spec):
    with pytest.raises(ValueError, match="'include_mtp' is not supported for DeepSeek-V4"):
        spec.replace(include_mtp=True)
    with pytest.raises(ValueError, match="'kv_scales'.*DeepSeek-V4"):
        calc.kv_cache_bytes(spec, 100, kv_scales="fp8")
    with pytest.raises(ValueError, match="'o_groups' must be set"):
        spec.replace(o_groups=None)


def test_features_without_v4_refuse_by_name(spec):
    # no wrong numbers where V4 is not modelled: its activation peak (engine plans take the
    # available memory from a log: tests/test_serving_plan_v4.py), the reference modules
    from calc.serving.plan import engine_plan, prepare

    with pytest.raises(
        ValueError,
        match=r"'available_kv_gib' \(or 'kv_cache_memory_bytes'\) must be given for DeepSeek-V4",
    ):
        engine_plan(spec, "h200", "vllm", version="0.22.0", tensor_parallel_size=8)
    with pytest.raises(ValueError, match="is DeepSeek-V4: its activation peak is not modelled"):
        prepare(spec, "h200", "vllm", tensor_parallel_size=8)
    pytest.importorskip("torch")
    import calc.validate

    with pytest.raises(ValueError, match="is DeepSeek-V4, whose compressed attention"):
        calc.validate.run(spec, checks=["params"])


def test_v4_pro_config_matches_transformers_and_its_card():
    # tests/fixtures/deepseek_v4/SOURCES.md: 61 layers, 2 HCA then CSA / HCA alternating,
    # 384 experts; published 1.6T total, 49B activated (without the embedding, as for Flash)
    from test_presets_published import ROUND, _within

    path = CONFIG.parent.parent.parent / "deepseek_v4" / "DeepSeek-V4-Pro.config.json"
    pro = from_hf_config(path, name="deepseek-v4-pro")
    assert pro.attention_counts == {HCA: 31, CSA: 30}
    total = calc.param_count(pro)
    assert _within(ROUND, total, "1.6T")
    active = calc.active_param_count(pro) - param_breakdown(pro)["embed"]
    assert _within(ROUND, active, "49B")
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    data = json.loads(path.read_text())
    for key in ("quantization_config", "model_type", "architectures", "torch_dtype"):
        data.pop(key)
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(
            transformers.AutoConfig.for_model("deepseek_v4", **data)
        )
    assert total == sum(p.numel() for p in model.parameters())


def test_layer_breakdown_sums_to_the_total(spec):
    # every block, plus the tables, the final norm and the HyperHead (m x m h + m + 1)
    from calc.params import layer_breakdown

    blocks = sum(sum(layer_breakdown(spec, i).values()) for i in range(43))
    rest = 2 * 129280 * 4096 + 4096 + (4 * 4 * 4096 + 4 + 1)
    assert blocks + rest == calc.param_count(spec)
