"""vLLM's MTP drafter weights in "Model loading took" (calc.serving.vllm_drafter).

Expected values are written out from the vLLM sdists' module shapes (qwen3_5_mtp.py,
deepseek_mtp.py, the proposer's load_model) and from a public start-up log pair
(benchmarks/engine_logs/vllm-aiwork4me-qwen38-27b-rocm*.toml).
"""

from pathlib import Path

import numpy as np
import pytest

import calc
from calc.serving.evidence import load_cases
from calc.serving.grid import engine_plan_grid
from calc.serving.plan import engine_plan
from calc.serving.vllm_drafter import vllm_mtp_drafter_bytes

GIB = 2**30
MTP1 = dict(speculative_method="mtp", num_speculative_tokens=1)
LOGS = {c["id"]: c for c in load_cases(Path(__file__).parent.parent / "benchmarks" / "engine_logs")}


MIB = 2**20


def _counted(n: int) -> int:
    """torch.cuda.memory_allocated for one large request on its own segment: a request of
    10 MiB or more gets a segment rounded up to 2 MiB, and the block is split only when more
    than 1 MiB (kSmallSize) would remain, so an odd number of MiB counts 1 MiB more
    (c10/cuda/CUDACachingAllocator.cpp get_allocation_size, should_split)."""
    seg = -(-n // (2 * MIB)) * 2 * MIB
    return seg if n >= 10 * MIB and seg - n <= MIB else n


def _qwen3_5_27b_drafter(tp: int) -> int:
    """One Qwen3.5-27B MTP layer on one of `tp` ranks, bf16, each tensor rounded to torch's
    512 B blocks (qwen3_5_mtp.py: fc ColumnParallelLinear(2h, h); a full-attention
    Qwen3_5DecoderLayer; pre_fc_norm_hidden / _embedding and norm)."""
    h, H, G, d, inter = 5120, 24, 4, 256, 17408
    qkv = (2 * H * d // tp + 2 * G // tp * d) * h * 2  # q with its output gate, k, v
    o = H * d // tp * h * 2
    gate_up = 2 * inter // tp * h * 2
    down = inter // tp * h * 2
    fc = h // tp * 2 * h * 2
    norms = (2 + 3) * h * 2 + 2 * 512  # the layer's two, the MTP module's three; q / k norms
    scalars = 7 * 512  # Attention's fp32 scales and ranges (load_events.attention_scalars)
    return sum(_counted(n) for n in (qkv, o, gate_up, down, fc)) + norms + scalars


@pytest.mark.parametrize("tp", [1, 2, 4])
def test_qwen3_5_drafter_is_its_mtp_layer_without_the_tables(tp):
    spec = calc.load_preset("qwen3.5-27b")
    got = vllm_mtp_drafter_bytes(spec, (0, 28, 0), "bf16", tp, 1, 1)
    assert got == _qwen3_5_27b_drafter(tp)
    assert _qwen3_5_27b_drafter(1) == 849_402_368  # every matrix a whole number of 2 MiB
    assert _qwen3_5_27b_drafter(4) - _qwen3_5_27b_drafter(1) // 4 > 4 * MIB - 4096  # 35, 15, 85
    # and 25 MiB (qkv, o, gate_up, fc) each count one MiB more; down's 42.5 MiB splits


def test_the_log_pair_loads_the_drafter_on_top_of_the_target():
    """AIwork4me's Qwen3.8-27B on one ROCm APU: 51.1 GiB without MTP, 51.89 GiB with it."""
    plain, mtp = LOGS["vllm-aiwork4me-qwen38-27b-rocm"], LOGS["vllm-aiwork4me-qwen38-27b-rocm-mtp1"]
    a, b = (
        engine_plan(
            "qwen3.5-27b",
            "h100-sxm",
            "vllm",
            version=c["version"],
            **c["settings"],
            available_kv_gib=c["logged"]["available_kv_cache_gib"],
        )  # fmt: skip
        for c in (plain, mtp)
    )
    drafter = (b.weights_bytes - a.weights_bytes) / GIB
    logged = mtp["logged"]["weights_gib"] - plain["logged"]["weights_gib"]  # 0.79, +-0.01
    assert abs(drafter - logged) <= 0.01
    # the log's own words: "Model loading took 51.89 GiB memory and 41.490624 seconds"
    # (format_gib: round(b / GiB, 2)); kvcalc leaves the seconds out
    assert f"Model loading took {round(b.weights_bytes / GIB, 2)} GiB memory" in b.log_lines
    assert b.weights_gib == round(b.weights_bytes / GIB, 4)


def test_deepseek_keeps_its_shared_head_until_0_16():
    """deepseek_mtp.py SharedHead.head: its own padded vocab / TP x h table up to 0.15.1 (the
    0.15.x wheels' eagle.py never names it); from 0.16.0 the proposer replaces it by the target's
    lm_head (vllm PR #34385)."""
    spec = calc.load_preset("deepseek-v3")
    V, h = 129280, 7168  # a multiple of 64: no padding
    for tp in (1, 8):
        new = vllm_mtp_drafter_bytes(spec, (0, 16, 0), "bf16", tp, 1, 1)
        for v in ((0, 14, 0), (0, 15, 1)):
            assert vllm_mtp_drafter_bytes(spec, v, "bf16", tp, 1, 1) - new == V // tp * h * 2


def test_deepseek_v3_fp8_drafter_is_the_stored_mtp_layer():
    """DeepSeek-V3's checkpoint stores its MTP layer (layer 61) with its own embedding and head
    copies and E fp32 e_score_correction_bias values (calc.weight_bytes, checked against the
    Hub in test_quant_checkpoints_fp8). vLLM at TP 1 from 0.16.0 keeps the layer less those
    (the bias is not counted, as for every layer) plus the bf16 kv_b_proj copy MLA keeps:
    kv_lora_rank 512 x 128 heads x (128 + 128) x 2 B."""
    spec = calc.load_preset("deepseek-v3")
    V, h, E = 129280, 7168, 256
    layer = calc.weight_bytes(spec) - calc.weight_bytes(spec.replace(num_nextn_predict_layers=0))
    want = layer - 2 * V * h * 2 - 4 * E + 512 * 128 * 256 * 2
    assert vllm_mtp_drafter_bytes(spec, (0, 16, 0), "bf16", 1, 1, 1) == want


def test_eh_proj_is_replicated_on_every_rank():
    """DeepSeek's eh_proj is a plain nn.Linear: every rank holds the whole 2h x h bf16 matrix,
    so the drafter shrinks less than 1 / tp (Qwen's fc, split, is in the test above)."""
    spec = calc.load_preset("deepseek-v3")
    h = 7168
    bf16 = spec.replace(quantization=None)
    one, eight = (vllm_mtp_drafter_bytes(bf16, (0, 16, 0), "bf16", t, 1, 1) for t in (1, 8))
    eh = 2 * h * h * 2
    assert abs((one - eh) / 8 - (eight - eh)) < 0.02 * (eight - eh)  # the rest splits ~8 ways
    assert eight - eh > 0 and (one - eh) / (eight - eh) < 8.1


def test_not_modelled_where_the_checkpoint_or_dtype_is_not_read():
    q = calc.load_preset("qwen3.5-27b")
    assert vllm_mtp_drafter_bytes(q, (0, 28, 0), "fp8", 1, 1, 1) is None  # kvcalc's whole-model


def test_a_derived_mtp_plan_is_still_refused_for_its_profile_run():
    with pytest.raises(ValueError, match="speculative profile run .*drafter's dummy run"):
        engine_plan("qwen3.5-27b", "h100-sxm", "vllm", version="0.28.0", **MTP1)


def test_the_grid_reports_the_same_weights():
    kw = dict(version="0.28.0", max_model_len=32768, **MTP1)
    g = engine_plan_grid("qwen3.5-27b", "h100-sxm", "vllm", available_kv_gib=[10.0, 20.0], **kw)
    p = engine_plan("qwen3.5-27b", "h100-sxm", "vllm", available_kv_gib=10.0, **kw)
    assert np.allclose(g["weights_gib"], p.weights_bytes / GIB)
    g = engine_plan_grid("qwen3-next-80b-a3b", "h100-sxm", "vllm", available_kv_gib=[10.0],
                         weight_dtype="fp8", tensor_parallel_size=2, **kw)  # fmt: skip
    assert np.isnan(g["weights_gib"]).all()  # kvcalc's whole-model fp8: the drafter not sized
