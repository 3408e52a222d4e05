"""SGLang's defaults from v0.4.7.post1 to v0.5.6.post2, written out from each release's
python/sglang/srt/server_args.py (sglang's history, read in the kvcache-ai/sglang_awq fork; the
version-bump commit of python/sglang/version.py named in each test). gpu_mem is nvidia-smi's
memory.total in MiB (utils.get_nvgpu_memory_capacity): the presets' driver_total_mib, which
come from published logs (H100 SXM 81,559; L4 23,034; L40S 46,068; B200 183,359 MiB)."""

from pathlib import Path

import pytest

from calc.hf import from_hf_config
from calc.serving.defaults_sglang import sglang_version
from calc.serving.engine import engine_config
from calc.serving.plan import prepare

H100, L4, L40S, B200 = 81559, 23034, 46068, 183359  # MiB
V32 = Path(__file__).parent / "fixtures" / "deepseek_v32" / "DeepSeek-V3.2-Exp.config.json"
H200 = 143771  # MiB: nvidia-smi on an H200 (the h200 preset's notes; passed as GiB here)


def frac(mib: int, **kw) -> float:
    return engine_config("sglang", gpu_memory_gib=mib / 1024, **kw).mem_fraction_static


def test_versions_order_release_candidates_before_the_release():
    assert sglang_version("0.5.3rc0") < sglang_version("0.5.3rc2") < sglang_version("0.5.3")
    assert sglang_version("0.5.3") < sglang_version("0.5.3.post1") < sglang_version("0.5.4")
    assert sglang_version("v0.4.10.post2") == (0, 4, 10, 2)
    with pytest.raises(ValueError, match="'version' must look like"):
        sglang_version("0.5.x")


def test_0_4_7_post1_reserve_by_gpu_memory():
    # v0.4.7.post1 (f9dc9dd; sglang #7054): parallel_size = tp_size * pp_size;
    # gpu_mem < 35 * 1024: reserved_mem = (2.8 + parallel_size / 10) * 1024
    # gpu_mem < 90 * 1024: (9.5 + parallel_size / 2) * 1024; < 160 * 1024: (12 + ps / 2) * 1024;
    # else 32 * 1024; enable_dp_attention: += 4 * 1024;
    # mem_fraction_static = round((gpu_mem - reserved_mem) / gpu_mem, 3)
    assert frac(H100, version="0.4.7") == 0.88  # the day before: the tp table
    got = frac(H100, version="0.4.7.post1", tensor_parallel_size=2, pipeline_parallel_size=2)
    assert got == round((H100 - (9.5 + 4 / 2) * 1024) / H100, 3)
    assert frac(L4, version="0.4.8", tensor_parallel_size=4) == round(
        (L4 - (2.8 + 4 / 10) * 1024) / L4, 3
    )
    assert frac(H200, version="0.5.0rc0", tensor_parallel_size=8) == round(
        (H200 - (12 + 8 / 2) * 1024) / H200, 3
    )
    assert frac(B200, version="0.5.2") == round((B200 - 32 * 1024) / B200, 3)
    dpa = frac(
        H100, version="0.4.9", tensor_parallel_size=8, data_parallel_size=8,
        enable_dp_attention=True,
    )  # fmt: skip
    assert dpa == round((H100 - (9.5 + 8 / 2) * 1024 - 4 * 1024) / H100, 3)
    # 0.5.3rc0 (86a32bb) still has it: the same block as 0.4.7.post1 but for speculative terms
    assert frac(H100, version="0.5.3rc0") == round((H100 - (9.5 + 1 / 2) * 1024) / H100, 3)


def test_0_4_7_post1_chunked_prefill_size():
    # gpu_mem < 35 * 1024: 2048; < 160 * 1024: 8192; else 16384 (0.4.7: 2048 under 25 GiB)
    def chunk(mib, v):
        return engine_config("sglang", version=v, gpu_memory_gib=mib / 1024).chunked_prefill_size

    assert chunk(L40S, "0.4.7.post1") == 8192 and chunk(L4, "0.4.7.post1") == 2048
    assert chunk(B200, "0.4.7.post1") == 16384 and chunk(B200, "0.4.7") == 8192
    assert chunk(L40S, "0.5.3rc2") == 4096  # 0.5.3rc2: 4096 from 35 to 60 GiB ("A100 40GB, L40")


def test_0_5_3rc2_general_heuristics():
    # v0.5.3rc2 (0b13cbb; sglang #10372, #10975) ServerArgs._handle_gpu_memory_settings:
    # reserved_mem = 512 + max(chunked_prefill_size, 2048) * 1.5 + cuda_graph_max_bs * 2
    #   + tp_size * pp_size / 8 * 1024; if gpu_mem > 60 * 1024: max(reserved_mem, 10 * 1024)
    # H100 (< 90 GiB): chunked_prefill_size 8192, cuda_graph_max_bs 256 if tp < 4 else 512
    r = 512 + 8192 * 1.5 + 256 * 2 + 1 / 8 * 1024
    assert frac(H100, version="0.5.3rc2") == round((H100 - r) / H100, 3)
    r8 = 512 + 8192 * 1.5 + 512 * 2 + 8 / 8 * 1024
    assert frac(H100, version="0.5.6.post2", tensor_parallel_size=8) == round((H100 - r8) / H100, 3)
    # L4 (< 35 GiB): 2048 / cuda_graph_max_bs 16 below tp 4; no 10 GiB floor under 60 GiB
    r_l4 = 512 + 2048 * 1.5 + 16 * 2 + 1 / 8 * 1024
    assert frac(L4, version="0.5.4") == round((L4 - r_l4) / L4, 3)
    # v0.5.4.post1 (55d75e1; sglang #12124): cuda_graph_max_bs 24 there
    r_l4 = 512 + 2048 * 1.5 + 24 * 2 + 1 / 8 * 1024
    assert frac(L4, version="0.5.4.post1") == round((L4 - r_l4) / L4, 3)
    cfg = engine_config("sglang", version="0.5.4.post1", gpu_memory_gib=L4 / 1024)
    assert cfg.cuda_graph_max_bs == 24
    # L40S (35..60 GiB), tp 2: 4096 / 32
    r_l40 = 512 + 4096 * 1.5 + 32 * 2 + 2 / 8 * 1024
    assert frac(L40S, version="0.5.5", tensor_parallel_size=2) == round((L40S - r_l40) / L40S, 3)
    # given chunked_prefill_size and cuda_graph_max_bs enter as given
    r_given = 512 + 4096 * 1.5 + 64 * 2 + 1 / 8 * 1024  # 6784 MiB < the 10 GiB floor
    got = frac(H100, version="0.5.3", chunked_prefill_size=4096, cuda_graph_max_bs=64)
    assert r_given < 10 * 1024 and got == round((H100 - 10 * 1024) / H100, 3)


def test_0_5_3_dp_attention_reserve():
    # enable_dp_attention: += cuda_graph_max_bs * dp_size * 3; and if cuda_graph_max_bs > 300:
    # += cuda_graph_max_bs * dp_size * 1.5. B200 (>= 160 GiB): 16384 tokens, 512 graphs.
    # sglang #11309's 8 x B200 run (--tp 8 --dp 8 --enable-dp-attention) on 0.5.3.post1:
    r = 512 + 16384 * 1.5 + 512 * 2 + 8 / 8 * 1024 + 512 * 8 * 3 + 512 * 8 * 1.5
    got = frac(
        B200, version="0.5.3.post1", tensor_parallel_size=8, data_parallel_size=8,
        enable_dp_attention=True,
    )  # fmt: skip
    assert got == round((B200 - r) / B200, 3)


def test_deepseek_nsa_is_set_to_0_8_in_0_5_3_only():
    # v0.5.3rc2 / v0.5.3 _handle_model_specific_adjustments: `self.mem_fraction_static = 0.8`
    # for DeepSeek NSA (sglang #11061), removed by #11309 (first in v0.5.3.post1)
    kw = dict(tensor_parallel_size=8, data_parallel_size=8, enable_dp_attention=True, nsa=True)
    assert frac(B200, version="0.5.3", **kw) == 0.8
    with pytest.raises(ValueError, match="'mem_fraction_static' is set to 0.8 for DeepSeek NSA"):
        frac(B200, version="0.5.3", mem_fraction_static=0.9, **kw)
    assert frac(B200, version="0.5.3.post1", **kw) != 0.8
    # engine plans pass the model's NSA layers (the checkpoint's config.json fixture)
    spec = from_hf_config(V32, name="deepseek-v3.2-exp")
    s = dict(tensor_parallel_size=8, data_parallel_size=8, enable_dp_attention=True, page_size=64)
    assert prepare(spec, "b200", "sglang", version="0.5.3", **s)[2].mem_fraction_static == 0.8
    with pytest.raises(ValueError, match="'mem_fraction_static' is set to 0.8"):
        prepare(spec, "b200", "sglang", version="0.5.3", mem_fraction_static=0.85, **s)


def test_what_kvcalc_does_not_model_is_refused_by_name():
    with pytest.raises(ValueError, match="'vision_tower' .* is needed for a multimodal model"):
        frac(H100, version="0.5.4", multimodal="siglip")
    assert frac(H100, version="0.5.4", multimodal="siglip", mem_fraction_static=0.7) == 0.7
    with pytest.raises(ValueError, match="on a AMD GPU"):
        engine_config("sglang", version="0.5.4", gpu_memory_gib=192, gpu_vendor="AMD")
    with pytest.raises(ValueError, match="'speculative_algorithm' NGRAM is not modelled"):
        engine_config("sglang", version="0.5.4", speculative_algorithm="NGRAM")
    with pytest.raises(ValueError, match="speculative decoding in 0.4.7.post1 - 0.5.23"):
        engine_config("sglang", version="0.4.7", speculative_algorithm="EAGLE")
    with pytest.raises(ValueError, match="defaults of 0.4.0 to 0.5.23 only"):
        engine_config("sglang", version="0.5.24")


def test_engine_plan_reads_the_preset_nvidia_smi_total():
    cfg = prepare("llama-3.1-8b", "h100-sxm", "sglang", version="0.5.4")[2]
    r = 512 + 8192 * 1.5 + 256 * 2 + 1 / 8 * 1024
    assert cfg.mem_fraction_static == round((H100 - r) / H100, 3)
    # a multimodal preset: adjust_mem_fraction_for_vlm (#6881) by Mistral-Small-3.1's Pixtral
    # tower, 24 layers of width 1024 (the checkpoint's vision_config), ViT-L/14's 24 x 1024^2
    vlm = prepare("mistral-small-3.1", "h100-sxm", "sglang", version="0.5.4")[2]
    factor = 0.95 * max(0.8, min(1.05, 1 - 0.1 * (24 * 1024**2 / (24 * 1024**2) - 1)))
    assert vlm.mem_fraction_static == pytest.approx(round((H100 - r) / H100, 3) * factor, 1e-12)
    # Gemma 3's multimodal checkpoint is on mm_disabled_models (model_config.py): not scaled
    gemma = prepare("gemma-3-4b", "h100-sxm", "sglang", version="0.5.4")[2]
    assert gemma.mem_fraction_static == round((H100 - r) / H100, 3)
    # an AMD preset is refused by name
    with pytest.raises(ValueError, match="on a AMD GPU"):
        prepare("llama-3.1-8b", "mi300x", "sglang", version="0.5.4")


def test_multimodal_models_have_any_fraction_scaled_before_0_4_9():
    """model_runner.py `if self.is_multimodal: self.mem_fraction_static *= 0.95` at the v0.4.0
    bump (f8b0326), `*= 0.90` from v0.4.4.post4 (#4754, 5cb552b) to v0.4.8.post1; from v0.4.9
    (#7748) the scaling moved into the default: x 0.90 there, and from v0.4.9.post3 (#6881) by
    the vision tower's size (0.95 x 1.05 at most for a tower smaller than ViT-L/14)."""
    h100 = 81559 / 1024  # nvidia-smi memory.total of an H100 SXM, MiB -> GiB
    kw = dict(gpu_memory_gib=h100, multimodal="siglip")
    assert engine_config("sglang", version="0.4.6", **kw).mem_fraction_static == 0.88 * 0.90
    given = engine_config("sglang", version="0.4.0", mem_fraction_static=0.8, **kw)
    assert given.mem_fraction_static == 0.8 * 0.95
    text = engine_config("sglang", version="0.4.6", gpu_memory_gib=h100)
    assert text.mem_fraction_static == 0.88
    base = engine_config("sglang", version="0.4.9", gpu_memory_gib=h100).mem_fraction_static
    assert engine_config("sglang", version="0.4.9", **kw).mem_fraction_static == base * 0.90
    given = engine_config("sglang", version="0.4.9", mem_fraction_static=0.8, **kw)
    assert given.mem_fraction_static == 0.8  # a given fraction is no longer scaled
    small = dict(kw, vision_tower=(12, 768))  # ViT-B: 12 x 768^2 / (24 x 1024^2) = 0.28125
    post3 = engine_config("sglang", version="0.4.9.post3", **small).mem_fraction_static
    text = engine_config("sglang", version="0.4.9.post3", gpu_memory_gib=h100).mem_fraction_static
    assert post3 == pytest.approx(text * 0.95 * 1.05, 1e-12)  # 1 + 0.0719 clamps to 1.05
