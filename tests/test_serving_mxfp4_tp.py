"""gpt-oss's MXFP4 experts at TP 4 and TP 8 (and with expert parallelism): the per-rank tensors
written out from vLLM's and SGLang's source, not from kvcalc's.

Sources read (PyPI sdists / wheels):
- vLLM models/gpt_oss.py _load_weights_mxfp4 (0.14.1 sdist, lines 336-342; the same in 0.10.1 -
  0.33.0): `per_rank_intermediate_size_block = cdiv(intermediate_size // 32, tp_size)`, rank r
  loads the intermediate columns [r w, min((r + 1) w, I)), w = 32 x that. gpt-oss (I = 2880,
  90 blocks): w = 736 at TP 4 (rank 3: 672), 384 at TP 8 (rank 7: 192). With
  --enable-expert-parallel it loads E / ep whole experts instead.
- vLLM FusedMoE (fused_moe/layer.py, 0.14.1 line 532 `assert intermediate_size % self.tp_size ==
  0`): intermediate_size_per_partition = I / tp = 720 / 360, which Mxfp4MoEMethod.create_weights
  rounds up (Triton on Hopper: 64; Marlin: 128, hidden to 256) to Ip = 768 / 384, so the loaded
  shard fits: FusedMoE.weight_loader's mxfp4 branch copies it into `param.data[:, :dim1, :dim2]`
  (0.14.1 layer.py line 1159). Allocated: w13 [E, 2 Ip, Hp / 2], w13 scale [E, 2 Ip, Hp / 32],
  w13 bias [E, 2 Ip], w2 [E, Hp, Ip / 2], w2 scale [E, Hp, Ip / 32], w2 bias [E, Hp].
- Triton after loading (see tests/test_serving_mxfp4.py): float32 biases, swizzled values
  (triton_kernels v3.5.0 for 0.12.0 - 0.16.0: rows to 16, packed bytes to 32; v3.6.0 for 0.17.0 on:
  both to 64), swizzled scales (rows to 256, columns to 2) beside the still-registered originals.
- SGLang gpt_oss.py _load_mxfp4_experts_weights (0.5.7 and 0.5.23 wheels): the same whole-block
  split, `math.ceil(intermediate_size_block / moe_tp_size)`.
"""

from __future__ import annotations

from pathlib import Path

from calc.presets import resolve_model
from calc.quant.sharding import stored_bytes_per_gpu
from calc.serving.mxfp4 import triton_expert_tensors
from calc.serving.plan import engine_plan

GPT_OSS_20B = Path(__file__).parent / "fixtures" / "checkpoints" / "gpt-oss-20b" / "config.json"


def _spec_120b():
    # gpt-oss-120b's quantization_config is gpt-oss-20b's (as tests/test_serving_mxfp4.py)
    q = resolve_model(GPT_OSS_20B).quantization
    return resolve_model("gpt-oss-120b").model_copy(update={"quantization": q})


def _numel(shapes) -> int:
    total = 0
    for shape in shapes:
        n = 1
        for d in shape:
            n *= d
        total += n
    return total


def _bf16_rank_120b(tp: int) -> int:
    """One vLLM rank of gpt-oss-120b without its experts (openai/gpt-oss-120b config.json: 36
    layers, hidden 2880, 64 q / 8 KV heads of 64, 128 experts, vocab 201088 untied, biases,
    sinks, YaRN rope over 131072 positions)."""
    q, kv = 64 * 64 // tp, max(1, 8 // tp) * 64  # QKVParallelLinear rows per rank
    qkv = (q + 2 * kv) * 2880 + (q + 2 * kv)
    o = 2880 * (4096 // tp) + 2880  # row-parallel: the bias whole on every rank
    sinks, norms, router = 64 // tp, 2 * 2880, 128 * 2880 + 128
    layers = 36 * 2 * (qkv + o + sinks + norms + router)
    tables = 2 * (201088 // tp) * 2880 * 2  # embed + lm_head: 201088 = 64 x 3142, no padding
    return layers + tables + 2880 * 2 + 131072 * 64 * 4  # final norm, fp32 cos/sin cache


# per-rank expert tensors of one layer, from create_weights / process_weights_after_loading
TRITON_V35 = {  # vLLM 0.12.0 - 0.16.0 on Hopper
    4: [(128, 1536, 1440), (128, 2880, 384), (128, 1536, 90), (128, 2880, 24),
        (128, 1536, 90), (128, 3072, 24), (128, 1536, 4), (128, 2880, 4)],
    8: [(128, 768, 1440), (128, 2880, 192), (128, 768, 90), (128, 2880, 12),
        (128, 768, 90), (128, 3072, 12), (128, 768, 4), (128, 2880, 4)],
}  # fmt: skip
TRITON_V36 = {  # 0.17.0 on: the w13 values' 1440 packed bytes padded to 1472 (64)
    4: [(128, 1536, 1472), *TRITON_V35[4][1:]],
    8: [(128, 768, 1472), *TRITON_V35[8][1:]],
}
MARLIN = {  # Hp = 3072 (256), Ip = 768 / 384 (128); Marlin's repack keeps the byte counts
    4: [(128, 1536, 1536), (128, 1536, 96), (128, 1536, 2), (128, 3072, 384),
        (128, 3072, 24), (128, 3072, 2)],
    8: [(128, 768, 1536), (128, 768, 96), (128, 768, 2), (128, 3072, 192),
        (128, 3072, 12), (128, 3072, 2)],
}  # fmt: skip


def test_triton_rank_tensors_at_tp4_and_tp8():
    names = [
        "w13_weight (swizzled)", "w2_weight (swizzled)", "w13_weight_scale", "w2_weight_scale",
        "w13 scale (swizzled)", "w2 scale (swizzled)", "w13_bias (float32)", "w2_bias (float32)",
    ]  # fmt: skip
    for tp, width in ((4, 720), (8, 360)):  # FusedMoE's intermediate_size_per_partition
        got = triton_expert_tensors(2880, width, 128, (0, 14, 1))
        assert [got[n] for n in names] == TRITON_V35[tp]
        got = triton_expert_tensors(2880, width, 128, (0, 19, 0))
        assert [got[n] for n in names] == TRITON_V36[tp]


def test_vllm_tp4_tp8_weights_per_rank():
    spec = _spec_120b()
    cases = (("0.14.1", TRITON_V35), ("0.19.0", TRITON_V36), ("0.11.2", MARLIN))
    for version, experts in cases:
        for tp in (4, 8):
            p = engine_plan(
                spec, "h100-sxm", tensor_parallel_size=tp, available_kv_gib=1.0, version=version
            )
            assert p.weights_bytes == _bf16_rank_120b(tp) + 36 * _numel(experts[tp]), (version, tp)
    # Marlin on Ampere in any release (a100-80gb: sm80)
    p = engine_plan(spec, "a100-80gb", tensor_parallel_size=8, available_kv_gib=1.0)
    assert p.weights_bytes == _bf16_rank_120b(8) + 36 * _numel(MARLIN[8])


def test_vllm_expert_parallel_tp4_holds_32_whole_experts():
    # --enable-expert-parallel, TP 4: ep = 4, each rank 32 experts of the whole 2880 width
    # (round_up(2880, 64) = 2880); attention stays split 4 ways
    E = 32
    experts = [(E, 5760, 1440), (E, 2880, 1440), (E, 5760, 90), (E, 2880, 90)]
    experts += [(E, 5888, 90), (E, 3072, 90), (E, 5760, 4), (E, 2880, 4)]
    p = engine_plan(
        _spec_120b(), "h100-sxm", tensor_parallel_size=4, enable_expert_parallel=True,
        available_kv_gib=1.0, version="0.14.1",
    )  # fmt: skip
    assert p.weights_bytes == _bf16_rank_120b(4) + 36 * _numel(experts)


def test_checkpoint_shard_is_whole_blocks():
    # the stored shard rank 0 loads (gpt-oss-20b: 24 layers, 32 experts, hidden 2880): gate_up
    # [2 w, 2880 / 32, 16] blocks + [2 w, 90] scales + [2 w] bf16 bias; down [2880, w / 32, 16]
    # + [2880, w / 32] + its [2880] bias (loaded whole)
    spec = resolve_model(GPT_OSS_20B)
    for tp, w in ((1, 2880), (2, 1440), (4, 736), (8, 384)):
        per = stored_bytes_per_gpu(spec, tp)
        assert per["mlp:packed"] == 24 * 32 * (2 * w * 1440 + 2880 * w // 2)
        assert per["mlp:scales"] == 24 * 32 * (2 * w * 90 + 2880 * w // 32)
        assert per["mlp:bias"] == 24 * 32 * (2 * w + 2880) * 2


def test_sglang_tp4_tp8_plan_with_the_stored_shard():
    # SGLang keeps the checkpoint's bytes (calc/serving/mxfp4.py): at TP 4 / TP 8 it plans with
    # rank 0's whole-block shard instead of refusing; one TP step moves exactly the experts'
    # difference between the two shards (the rest of the rank as in vLLM's split)
    spec = _spec_120b()
    w = {4: 736, 8: 384}
    plans = {
        tp: engine_plan(spec, "h100-sxm", engine="sglang", tensor_parallel_size=tp) for tp in (4, 8)
    }
    assert all(p.refusal is None for p in plans.values())
    per_column = 128 * (2 * 1440 + 2880 // 2 + 2 * 90 + 2880 // 32 + 2 * 2)  # bytes a column
    experts = {tp: 36 * (per_column * w[tp] + 128 * 2880 * 2) for tp in w}
    rest = {tp: plans[tp].weights_bytes - experts[tp] for tp in w}
    assert rest[4] > rest[8] > 0
    assert rest[4] - rest[8] == _bf16_rank_120b(4) - _bf16_rank_120b(8)


def test_vllm_tp2_marlin_matches_a_published_log():
    # benchmarks/engine_logs/vllm-runaihotfix-gpt-oss-120b-sm86-tp2.toml (dhayanesh/gpt-oss-120b-
    # runai-f8e8m0-hotfix@71a617bd, benchmark_results/base.log): vLLM 0.12.0, "Device capability
    # 8.6", "Using Marlin backend", TP 2: "Model loading took 34.3774 GiB memory". Marlin: hidden
    # 3072, the 1440-wide shard 1536 (128); bf16 biases
    experts = [(128, 3072, 1536), (128, 3072, 96), (128, 3072, 2)]  # w13, scale, bias
    experts += [(128, 3072, 768), (128, 3072, 48), (128, 3072, 2)]  # w2, scale, bias
    expected = _bf16_rank_120b(2) + 36 * _numel(experts)
    p = engine_plan(
        _spec_120b(), "rtx-a6000", tensor_parallel_size=2, max_model_len=4096,
        available_kv_gib=1.0, version="0.12.0",
    )  # fmt: skip
    assert p.weights_bytes == expected
    assert abs(expected / 2**30 - 34.3774) / 34.3774 < 0.001  # -0.08 %
