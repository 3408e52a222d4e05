"""Hardware presets: every file loads, cites its datasheet, and converts published figures right.

Expected values are the datasheet figures quoted in each preset's `notes`, converted by hand here.
"""

import datetime as dt

import pytest

from calc.hardware import (
    HardwareSpec,
    hardware_from_dict,
    hardware_from_toml_text,
    list_hardware,
    load_hardware,
    resolve_hardware,
)

REQUIRED = {
    "a100-40gb",
    "a100-80gb",
    "h100-sxm",
    "h100-pcie",
    "h200",
    "b200",
    "l4",
    "l40s",
    "rtx-4090",
    "rtx-3090",
    "mi300x",
}

# GPUs people deploy on, added 2026-11-23 (each preset cites its datasheet and logs)
ADDED = {
    "a10",
    "t4",
    "v100-sxm2-32gb",
    "l40",
    "rtx-a6000",
    "rtx-6000-ada",
    "rtx-pro-6000",
    "rtx-5090",
    "h20",
    "h800",
    "h100-nvl",
    "gh200",
    "b300",
    "mi325x",
    "mi355x",
}


def test_the_issue_list_is_shipped():
    assert REQUIRED | ADDED <= set(list_hardware())


@pytest.mark.parametrize("name", list_hardware())
def test_every_preset_loads_with_provenance(name):
    h = load_hardware(name)
    assert h.name == name
    assert h.source and all(u.startswith("https://") for u in h.source)
    assert h.retrieved in (dt.date(2026, 11, 20), dt.date(2026, 11, 23))
    assert h.memory_published and h.notes
    # the visible total never exceeds the nominal size by more than rounding, nor falls far below
    assert 0.9 * h.memory_bytes <= h.total_memory_bytes <= h.memory_bytes
    # CUDA's total sits below nvidia-smi's (the driver reserves some), which sits below nominal
    if h.cuda_total_gib is not None and h.driver_total_mib is not None:
        assert h.cuda_total_gib * 2**30 < h.driver_total_mib * 2**20 <= h.memory_bytes
    # every published peak is positive; T4 / V100 publish no bf16 (no bf16 units), an RTX PRO
    # 6000 only FP32 and FP4, so bf16 is not required of every preset
    assert all(h.peak_flops_per_s(d) > 0 for d in h.peak_tflops)
    assert h.hbm_bandwidth_bytes_per_s > 0 and h.interconnect_bytes_per_s > 0


def test_h100_sparse_figures_are_halved():
    h = load_hardware("h100-sxm")
    # datasheet: BF16 1,979 TFLOPS "* With sparsity" -> dense 989.5; FP8 3,958 -> 1,979;
    # FP32 67 is a CUDA-core figure, no sparsity
    assert h.peak_flops_per_s("bf16") == 989.5e12
    assert h.peak_flops_per_s("fp8_e4m3") == 1979e12
    assert h.peak_flops_per_s("fp32") == 67e12
    # ridge point: 989.5e12 FLOP/s / 3.35e12 B/s = 295.37 FLOP/B
    assert h.ridge_flops_per_byte("bf16") == pytest.approx(295.373, abs=1e-3)
    # NVLink 900 GB/s is both directions: 450 GB/s each way
    assert h.interconnect_bytes_per_s == 450e9


def test_a100_dense_figures_are_stored_as_is():
    h = load_hardware("a100-80gb")
    # datasheet prints "312 | 624*" for BF16: the dense 312 is stored and used unchanged
    assert h.peak_flops_per_s("bf16") == 312e12
    assert not h.has_peak("fp8")  # Ampere has no FP8 tensor cores
    with pytest.raises(ValueError, match="'a100-80gb' publishes no fp8 peak"):
        h.peak_flops_per_s("fp8")


def test_memory_units():
    # "80GB" on an A100 is binary: 80 x 2^30 = 85,899,345,920 B (nvidia-smi: 81920 MiB)
    assert load_hardware("a100-80gb").memory_bytes == 85_899_345_920
    # H100: nvidia-smi total 81559 MiB x 2^20 = 85,520,809,984 B; a process sees what CUDA
    # reports, 79.19 GiB in llm-d-planner's vLLM 0.19 logs: 79.19 x 2^30 = 85,029,615,042.56 B
    h100 = load_hardware("h100-sxm")
    assert h100.driver_total_bytes == 81559 * 2**20 == 85_520_809_984
    assert h100.total_memory_bytes == 85_029_615_043
    assert h100.total_memory_source == "CUDA total"
    # L4 with ECC on: 23034 MiB of its 24 GiB (24576 MiB x 15/16 = 23040, less 6 MiB) in
    # nvidia-smi; torch's out-of-memory messages on L4s print "total capacity of 22.03 GiB"
    l4 = load_hardware("l4")
    assert l4.driver_total_bytes == 23034 * 2**20
    assert l4.total_memory_bytes == round(22.03 * 2**30)
    # no published total at all: the nominal size
    assert load_hardware("h100-pcie").total_memory_bytes == 80 * 2**30


def test_cuda_total_cannot_exceed_the_drivers():
    with pytest.raises(ValueError, match=r"'cuda_total_gib' must not exceed nvidia-smi's total"):
        hardware_from_dict(
            {**load_hardware("l4").model_dump(), "cuda_total_gib": 23.0}, origin="test"
        )
    # a decimal-GB custom part: 16 GB = 16 x 10^9 B
    custom = hardware_from_dict(
        {
            "name": "x",
            "memory_size": 16,
            "memory_unit": "GB",
            "hbm_bandwidth_gb_per_s": 1,
            "peak_tflops": {"bf16": 1},
            "interconnect_gb_per_s": 1,
        }
    )
    assert custom.memory_bytes == 16_000_000_000


def test_b200_and_mi300x_figures():
    b = load_hardware("b200")
    assert b.peak_flops_per_s("fp4") == 9000e12  # 18 PFLOPS with sparsity
    assert b.driver_total_bytes == 183359 * 2**20  # nvidia-smi
    # torch's out-of-memory messages on B200s: "total capacity of 178.35 GiB"
    assert b.total_memory_bytes == round(178.35 * 2**30)
    m = load_hardware("mi300x")
    assert m.peak_flops_per_s("fp8") == 2614.9e12  # AMD lists dense figures
    assert m.interconnect_bytes_per_s == 448e9  # 7 x 128 GB/s, both directions, halved


def test_t4_and_v100_have_no_bf16_units():
    t4 = load_hardware("t4")
    # T4 datasheet: mixed precision (FP16/FP32) 65 TFLOPS, INT8 130 TOPS, dense (Turing has no
    # sparsity); no BF16 units, so a bf16 roofline is refused and fp16 is what vLLM runs
    assert t4.peak_flops_per_s("fp16") == 65e12
    assert t4.peak_flops_per_s("int8") == 130e12
    with pytest.raises(ValueError, match="'t4' publishes no bf16 peak"):
        t4.peak_flops_per_s("bf16")
    # ECC on: 16 GiB x 15/16 = 15360 MiB in nvidia-smi (modal-client#2797); torch prints
    # "total capacity of 14.56 GiB" on 2025-26 drivers (CatVTON#133, tribev2#28)
    assert t4.driver_total_bytes == 16 * 1024 * 15 // 16 * 2**20 == 15360 * 2**20
    assert t4.total_memory_bytes == round(14.56 * 2**30)
    # V100 SXM2 datasheet: tensor performance 125 TFLOPS (FP16), NVLink 300 GB/s both ways
    v100 = load_hardware("v100-sxm2-32gb")
    assert v100.peak_flops_per_s("fp16") == 125e12 and not v100.has_peak("bf16")
    assert v100.interconnect_bytes_per_s == 150e9


def test_hopper_variants_datasheet_figures():
    # H100 NVL datasheet: BF16 1,671 TFLOPS with sparsity -> 835.5 dense; 94GB HBM3 at 3.9 TB/s
    nvl = load_hardware("h100-nvl")
    assert nvl.peak_flops_per_s("bf16") == 835.5e12
    assert nvl.hbm_bandwidth_bytes_per_s == 3.9e12
    assert nvl.memory_bytes == 94 * 2**30
    # H800 SXM: the H100 SXM's tensor rates, NVLink 400 GB/s both ways -> 200 GB/s one way
    h800, h100 = load_hardware("h800"), load_hardware("h100-sxm")
    assert h800.peak_flops_per_s("fp8") == h100.peak_flops_per_s("fp8") == 1979e12
    assert h800.interconnect_bytes_per_s == 200e9
    # H20: 148 TFLOPS BF16 dense (a measured bf16 matmul reached 142.25), 4.0 TB/s; nvidia-smi
    # 97871 MiB (nvtrust#128), with no public CUDA total, so plans use nvidia-smi's
    h20 = load_hardware("h20")
    assert h20.peak_flops_per_s("bf16") == 148e12
    assert h20.ridge_flops_per_byte("bf16") == pytest.approx(148e12 / 4.0e12)  # 37 FLOP/B
    assert h20.total_memory_bytes == 97871 * 2**20
    assert h20.total_memory_source == "nvidia-smi total"
    # GH200 96GB: nvidia-smi 97871 MiB, torch "total capacity of 94.88 GiB" (litgpt#1892)
    gh = load_hardware("gh200")
    assert gh.driver_total_bytes == 97871 * 2**20
    assert gh.total_memory_bytes == round(94.88 * 2**30)


def test_blackwell_and_cdna_figures():
    b = load_hardware("b300")
    # HGX B300, 8 GPUs: FP4 144 PFLOPS sparse | 105 dense -> 13.125 PF dense per GPU, stored
    # as published (not half of the sparse figure); BF16 36 PF sparse -> 36/8/2 = 2.25 PF
    assert b.peak_flops_per_s("fp4") == 105e15 / 8
    assert b.peak_flops_per_s("bf16") == 36e15 / 8 / 2
    assert b.memory_bytes == 288 * 2**30
    # RTX 5090 whitepaper: FP16 with FP32 accumulate 209.5 TFLOPS dense; 32GB GDDR7 at 1,792 GB/s
    r = load_hardware("rtx-5090")
    assert r.peak_flops_per_s("bf16") == 209.5e12
    assert r.driver_total_bytes == 32607 * 2**20  # club-3090#1229
    # RTX PRO 6000 Blackwell: AI TOPS 4,000 (FP4 with sparsity) -> 2,000 dense; no bf16 rate
    # published, so a bf16 roofline is refused rather than invented
    pro = load_hardware("rtx-pro-6000")
    assert pro.peak_flops_per_s("fp4") == 2000e12
    with pytest.raises(ValueError, match="'rtx-pro-6000' publishes no bf16 peak"):
        pro.peak_flops_per_s("bf16")
    # MI325X: the MI300X's dense rates with 256GB HBM3E at 6 TB/s
    m = load_hardware("mi325x")
    assert m.peak_flops_per_s("fp8") == load_hardware("mi300x").peak_flops_per_s("fp8")
    assert m.memory_bytes == 256 * 2**30 and m.hbm_bandwidth_bytes_per_s == 6e12
    # MI355X: 8 XCDs x 32 CUs x 8,192 FP8 FLOP/clock x 2.4 GHz = 5,033.16 TFLOPS (ISSCC 2026)
    assert load_hardware("mi355x").peak_flops_per_s("fp8") == pytest.approx(
        8 * 32 * 8192 * 2.4e9, rel=1e-5
    )
    # 7 Infinity Fabric links x 153.6 GB/s, both directions, halved
    assert load_hardware("mi355x").interconnect_bytes_per_s == pytest.approx(7 * 153.6e9 / 2)


def test_interconnect_kind_decides_nvswitch():
    from calc.serving.sglang_memory import nvswitch

    # HGX parts join their GPUs through NVSwitch; PCIe cards, DGX-1's cube-mesh and AMD's mesh don't
    assert all(nvswitch(load_hardware(n)) for n in ("h20", "h800", "b300"))
    assert not any(
        nvswitch(load_hardware(n))
        for n in ("t4", "a10", "l40", "rtx-pro-6000", "h100-nvl", "v100-sxm2-32gb", "mi355x")
    )


def test_unknown_gpu_lists_closest_names():
    with pytest.raises(ValueError, match=r"unknown GPU 'h100'; closest: .*h100-sxm"):
        load_hardware("h100")
    with pytest.raises(ValueError, match="unknown GPU 'tpu-v5'"):
        resolve_hardware("tpu-v5")


def test_custom_hardware_same_schema(tmp_path):
    text = """
name = "my-gpu"
memory_size = 32
memory_unit = "GiB"
hbm_bandwidth_gb_per_s = 1000
peak_tflops = { bf16 = 400, fp8 = 800 }
peak_tflops_sparse = ["fp8"]
interconnect_gb_per_s = 100
"""
    path = tmp_path / "my-gpu.toml"
    path.write_text(text)
    h = resolve_hardware(str(path))
    assert h == hardware_from_toml_text(text)
    assert h.peak_flops_per_s("fp8") == 400e12
    assert resolve_hardware(h) is h
    assert resolve_hardware(h.model_dump()) == h
    assert hash(h) == hash(hardware_from_toml_text(text))  # frozen: usable as a cache key


@pytest.mark.parametrize(
    "change, message",
    [
        ({"memory_size": 0}, "'memory_size' input should be greater than 0"),
        ({"hbm_bandwidth_gb_per_s": -1}, "'hbm_bandwidth_gb_per_s' input should be greater"),
        ({"memory_unit": "TB"}, "'memory_unit' input should be 'GB' or 'GiB'"),
        ({"peak_tflops": {}}, "'peak_tflops' must list at least one dtype"),
        ({"peak_tflops": {"bf16": 0}}, r"'peak_tflops.bf16' must be > 0: got 0"),
        ({"peak_tflops_sparse": ["fp8"]}, "'peak_tflops_sparse' must name dtypes in peak_tflops"),
        ({"peak_tflops": {"bf17": 1}}, "peak_tflops.bf17"),
        ({"unknown_field": 1}, "unknown_field"),
    ],
)
def test_bad_hardware_names_field_and_value(change, message):
    data = {
        "name": "x",
        "memory_size": 16,
        "memory_unit": "GiB",
        "hbm_bandwidth_gb_per_s": 1,
        "peak_tflops": {"bf16": 1},
        "interconnect_gb_per_s": 1,
    }
    data.update(change)
    with pytest.raises(ValueError, match=message):
        hardware_from_dict(data, "<test>")


def test_bad_dtype_and_toml():
    h = load_hardware("h100-sxm")
    with pytest.raises(ValueError, match="'dtype' must be one of"):
        h.peak_flops_per_s("int3")
    with pytest.raises(ValueError, match="malformed TOML"):
        hardware_from_toml_text("name = ")
    assert isinstance(h, HardwareSpec)


def test_cuda_capability_is_read_from_the_presets():
    # developer.nvidia.com/cuda-gpus: A100 8.0, RTX 3090 8.6, L4 / L40S / RTX 4090 8.9,
    # H100 / H200 9.0, B200 10.0, RTX PRO 6000 Blackwell 12.0; AMD parts state none
    from calc.serving.hardware import cuda_capability

    expected = {
        "a100-80gb": (8, 0),
        "rtx-3090": (8, 6),
        "l4": (8, 9),
        "l40s": (8, 9),
        "rtx-4090": (8, 9),
        "h100-sxm": (9, 0),
        "h200": (9, 0),
        "b200": (10, 0),
        "rtx-pro-6000": (12, 0),
        "mi300x": None,
    }
    assert {g: cuda_capability(g) for g in expected} == expected
    nvidia = [g for g in list_hardware() if load_hardware(g).vendor == "NVIDIA"]
    assert all(cuda_capability(g) is not None for g in nvidia)
