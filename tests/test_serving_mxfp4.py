"""vLLM's Triton MXFP4 experts (gpt-oss on Hopper, vLLM >= 0.12.0): the tensors each rank holds
after loading, written out from vLLM's source, against the published "Model loading took" lines.

Sources read (PyPI sdists, and the wheels for the bundled vllm/third_party/triton_kernels):
- quantization/mxfp4.py (0.12.0 - 0.18.0) Mxfp4MoEMethod.create_weights: for the Triton backend on
  CUDA only the per-rank expert width is rounded, `round_up(intermediate_size_per_partition,
  64)`; 0.19.0 the same in fused_moe/oracle/mxfp4.py mxfp4_round_up_hidden_size_and_
  intermediate_size. Per layer: w13_weight [E, 2 Ip, H / 2] u8, w13_weight_scale
  [E, 2 Ip, H / 32] u8, w2_weight [E, H, Ip / 2] u8, w2_weight_scale [E, H, Ip / 32] u8, biases
  [E, 2 Ip] and [E, H] bf16.
- process_weights_after_loading, Mxfp4Backend.TRITON (0.19.0: convert_to_mxfp4_moe_kernel_format):
  the biases `.to(torch.float32)`; _swizzle_mxfp4 (utils/mxfp4_utils.py) transposes and calls
  triton_kernels convert_layout(HopperMXValueLayout, mx_axis=1) and (HopperMXScaleLayout,
  mx_axis=1, num_warps=8); `del layer.w13_weight`, `del layer.w2_weight`; the scales' swizzled
  copies go into PrecisionConfig while layer.w13_weight_scale / w2_weight_scale stay.
- triton_kernels tensor_details/layout_details/hopper_value.py swizzle_data: the (M, K) matrix
  (M = output rows, K = packed input bytes) padded to M % 16, K % 32 (v3.5.0, vendored by 0.12.0 -
  0.16.0); v3.6.0 (0.17.0 - 0.19.0) first pads both to 64. hopper_scale.py: M to
  2 * num_warps * 2 * 8 = 256, K to 2.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from calc.presets import resolve_model
from calc.serving.plan import engine_plan

GPT_OSS_20B = Path(__file__).parent / "fixtures" / "checkpoints" / "gpt-oss-20b" / "config.json"
GIB = 2**30


def _up(n: int, k: int) -> int:
    return -(-n // k) * k


def _spec_120b():
    # gpt-oss-120b's quantization_config is gpt-oss-20b's (modules_to_not_convert: self_attn,
    # router, embed_tokens, lm_head), as in tests/test_serving_quant.py
    q = resolve_model(GPT_OSS_20B).quantization
    return resolve_model("gpt-oss-120b").model_copy(update={"quantization": q})


def test_gpt_oss_120b_h100_vllm_0_14_1_matches_vllm_33155():
    # vllm#33155 (vLLM 0.14.1, one H100, "[mxfp4.py:165] Using Triton backend"): "Model loading
    # took 64.38 GiB memory". openai/gpt-oss-120b config.json: 36 layers, 128 experts, hidden =
    # expert width = 2880, 64 q / 8 KV heads of 64, vocab 201088 (untied head), biases, sinks.
    attn = (5120 * 2880 + 5120) + (2880 * 4096 + 2880) + 64 + 2 * 2880  # qkv, o, sinks, norms
    router = 128 * 2880 + 128
    E, H, Ip = 128, 2880, 2880  # round_up(2880, 64) = 2880
    # triton_kernels v3.5.0: rows 5760 and 2880 are multiples of 16, bytes 1440 of 32: no pad
    values = E * 2 * Ip * (H // 2) + E * H * (Ip // 2)
    scales = E * 2 * Ip * (H // 32) + E * H * (Ip // 32)  # still registered
    swizzled = E * _up(2 * Ip, 256) * (H // 32) + E * _up(H, 256) * (Ip // 32)  # 5888, 3072
    assert (_up(2 * Ip, 256), _up(H, 256)) == (5888, 3072)
    biases = E * (2 * Ip + H) * 4  # float32
    experts = values + scales + swizzled + biases
    total = 36 * (2 * (attn + router) + experts) + 2 * 201088 * 2880 * 2 + 2880 * 2
    total += 131072 * 64 * 4  # the fp32 YaRN cos/sin table (gpt_oss.py get_rope)
    p = engine_plan(_spec_120b(), "h100-sxm", available_kv_gib=1.0, version="0.14.1")
    assert p.weights_bytes == total
    assert abs(total / GIB - 64.38) / 64.38 < 0.001  # -0.07 %: ~48 MiB, see the TOML
    # Marlin's layout (0.11.x on the same GPU) is 1.6 GiB more: the log is Triton's
    marlin = engine_plan(_spec_120b(), "h100-sxm", available_kv_gib=1.0, version="0.11.2")
    assert marlin.weights_bytes / GIB - 64.38 > 1.5


def _gpt_oss_20b_tp2_rank(values: int) -> int:
    """One TP-2 rank of gpt-oss-20b (config.json: 24 layers, hidden 2880, 64 q / 8 KV heads of
    64, 32 experts of 2880, vocab 201088 untied, biases, sinks) on vLLM's Triton backend with the
    given swizzled value bytes a layer."""
    table = 201088 // 2 * 2880 * 2  # embed_tokens and lm_head, half the rows each, bf16
    q = 2048 * 2880 + 2048
    kv = 2 * (256 * 2880 + 256)
    o = 2880 * 2048 + 2880  # bias on every rank
    sinks, norms, router = 32, 2 * 2880, 32 * 2880 + 32
    bf16_layer = 2 * (q + kv + o + sinks + norms + router)
    E, H, Ip = 32, 2880, 1472  # the 1440-wide shard, round_up(1440, 64)
    scales = E * 2 * Ip * (H // 32) + E * H * (Ip // 32)  # [32, 2944, 90], [32, 2880, 46]
    swizzled = E * 3072 * 90 + E * 3072 * 46  # rows 2944 and 2880 -> 3072 (256)
    biases = E * (2 * Ip + H) * 4
    layer = bf16_layer + values + scales + swizzled + biases
    return 24 * layer + 2 * table + 2880 * 2 + 131072 * 64 * 4


def test_gpt_oss_20b_tp2_vllm_0_19_0_matches_llm_d():
    # llm-d-planner's run (benchmarks/engine_logs/llmd-019-gpt-oss-20b-tp2-8192.toml, vLLM 0.19.0,
    # H100, TP 2): "Model loading took 7.01 GiB memory". triton_kernels v3.6.0 pads the values'
    # rows and packed bytes to 64: w13 [32, 2944, 1440 -> 1472], w2 [32, 2880, 736 -> 768].
    values = 32 * 2944 * 1472 + 32 * 2880 * 768
    expected = _gpt_oss_20b_tp2_rank(values)
    p = engine_plan(
        resolve_model(GPT_OSS_20B), "h100-sxm", tensor_parallel_size=2, max_model_len=8192,
        available_kv_gib=1.0, version="0.19.0",
    )  # fmt: skip
    assert p.weights_bytes == expected
    assert abs(expected / GIB - 7.01) / 7.01 < 0.005  # -0.30 %
    # v3.5.0 (vLLM 0.16.0) pads the values only to 16 rows / 32 bytes: 1440 and 736 stay
    p16 = engine_plan(
        resolve_model(GPT_OSS_20B), "h100-sxm", tensor_parallel_size=2, max_model_len=8192,
        available_kv_gib=1.0, version="0.16.0",
    )  # fmt: skip
    assert p16.weights_bytes == _gpt_oss_20b_tp2_rank(32 * 2944 * 1440 + 32 * 2880 * 736)


def test_expert_parallel_keeps_the_whole_width():
    # FusedMoE with expert parallelism: each rank holds E / ep experts of the whole width (2880,
    # a multiple of 64), so one rank's Triton experts are the TP-1 layout's with 16 experts
    E, H, Ip = 16, 2880, 2880
    experts = E * (2 * Ip * H // 2 + H * Ip // 2)  # values, no pad (v3.5.0)
    experts += E * (2 * Ip * H // 32 + H * Ip // 32)  # scales
    experts += E * (5888 * 90 + 3072 * 90)  # swizzled scales
    experts += E * (2 * Ip + H) * 4
    from calc.serving.mxfp4 import vllm_mxfp4_layer_extra

    spec = resolve_model(GPT_OSS_20B)
    stored = E * (2 * Ip * H // 2 + 2 * Ip * H // 32 + 2 * Ip * 2 + H * Ip // 2 + H * Ip // 32)
    stored += E * H * 2  # the checkpoint's bf16 biases
    extra = vllm_mxfp4_layer_extra(spec, 2, 2, (0, 14, 1), "h100-sxm")
    assert extra == experts - stored


def test_blackwell_and_unknown_gpus_are_refused_by_name():
    spec = resolve_model(GPT_OSS_20B)
    for v in ("0.11.0", "0.14.1", "0.19.0"):
        with pytest.raises(ValueError, match="FlashInfer / Triton Blackwell backend"):
            engine_plan(spec, "b200", max_model_len=8192, version=v)
    from calc.serving.mxfp4 import mxfp4_backend

    with pytest.raises(ValueError, match="'gpu' 'mi300x' states no CUDA compute_capability"):
        mxfp4_backend((0, 19, 0), "mi300x")
    # vllm/config/vllm.py (0.33.0): Mxfp4Config.get_min_capability() is 80; a T4 is 7.5
    with pytest.raises(ValueError, match="Minimum capability: 80. Current capability: 75"):
        mxfp4_backend((0, 19, 0), "t4")
    assert mxfp4_backend((0, 19, 0), "a10") == "marlin"  # 8.6 (presets/hardware/a10.toml)
    assert mxfp4_backend((0, 19, 0), "h800") == "triton"  # 9.0
    assert mxfp4_backend((0, 11, 2), "h100-sxm") == "marlin"
    assert mxfp4_backend((0, 12, 0), "h200") == "triton"
    assert mxfp4_backend((0, 19, 0), "l40s") == "marlin"  # triton_kernels needs sm90 - sm10x
