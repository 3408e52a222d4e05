"""Run the four checks on one model (`run`) or many (`run_many`), reporting progress.

Sizes. Parameters and FLOPs: full width on `meta` (no memory). FLOPs at full depth unless
`flop_layers` is given. KV cache and peak memory on the real device, reduced as `reduce` says;
on CUDA the reduction follows the free memory (checked first, so a big model is scaled down
rather than running out of memory); on CPU it follows fixed budgets that keep a whole
`--all` run to a few minutes on two cores.

How big the KV and peak runs are, and the runs past a window: calc/validate/sizing.py.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence

from calc.spec import ModelSpec
from calc.validate.results import CHECKS, ModelValidation, ValidationReport
from calc.validate.sizing import kv_budget, kv_rows, peak_size

Progress = Callable[[int, int, str], None]  # on_progress(done, total, label)

FLOP_SEQ_LENS = (16, 1024, 8192)  # on meta any length is free; 8192 passes every window
# linear attention and Mamba-2 run token by token (~2 ms per token and layer on meta): shorter
# prompts over one whole layer pattern; the per-token count is the same at any length
LINEAR_FLOP_SEQ_LENS = (16, 128)


def _device_name(device: str) -> str:
    import torch

    dev = torch.device(device)
    if dev.type == "cuda":
        return torch.cuda.get_device_name(dev)
    return f"CPU ({torch.get_num_threads()} threads)"


def default_dtype(device: str) -> str:
    return "bf16" if device.startswith("cuda") else "fp32"


def tolerances(device: str) -> dict[str, str]:
    from calc.validate.checks import EXPONENT_TOLERANCE, PEAK_TOLERANCE

    cuda = device.startswith("cuda")
    peak = PEAK_TOLERANCE["cuda" if cuda else "cpu"]
    return {
        "params": "exact (numel per component)",
        "flops": "exact (FlopCounterMode, full mask)",
        "kv_cache": (
            "exact: requested bytes; allocated bytes exact after 512-byte block rounding "
            "(+ up to 1 MiB per tensor over 1 MiB: the allocator's unsplit tails)"
            if cuda
            else "exact (bytes of the cache tensors' storage)"
        )
        + "; cached decode reproduces the full forward's logits (max difference / max logit "
        "<= 1e-4 in fp32, 3e-2 in bf16)",
        "peak_memory": f"within {peak:.0%} of the predicted live bytes; growth exponent "
        f"within +/-{EXPONENT_TOLERANCE}",
    }


def run(
    spec: ModelSpec,
    device: str = "cpu",
    *,
    dtype: str | None = None,
    claim: ModelSpec | None = None,
    flop_layers: int | None = None,
    checks: Sequence[str] = CHECKS,
    on_progress: Progress | None = None,
) -> ModelValidation:
    """Measure `spec`'s modules and compare with kvcalc on `claim` (default: `spec`).

    >>> import calc, calc.validate
    >>> r = calc.validate.run(calc.load_preset("gpt-3-125m"), checks=["params"])
    >>> r.passed, r.checks[-1].measured      # every component exact; the total
    (True, 125226240)
    """
    import torch

    from calc.dtypes import canonical_dtype
    from calc.validate import checks as ck
    from calc.validate import reduce

    unknown = [c for c in checks if c not in CHECKS]
    if unknown:
        raise ValueError(f"'checks' must be among {', '.join(CHECKS)}: got {unknown[0]!r}")
    v4 = next((s.name for s in (spec, claim) if s is not None and s.is_v4), None)
    if v4 is not None:
        raise ValueError(
            f"'spec' {v4!r} is DeepSeek-V4, whose compressed attention, grouped output and "
            "hyper-connections are not in the reference modules (calc/validate): its parameters "
            "and cache are checked against transformers' own DeepseekV4 model instead "
            "(tests/test_deepseek_v4_reference.py)"
        )
    if not isinstance(device, str) or not re.fullmatch(r"cpu|cuda(:\d+)?", device):
        raise ValueError(f"'device' must be cpu or cuda[:N]: got {device!r}")
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(
            f"'device' {device!r} needs a CUDA GPU: torch.cuda.is_available() is False"
        )
    dtype = canonical_dtype(dtype or default_dtype(device))
    ck.torch_dtype(dtype)
    if dev.type == "cpu" and dtype != "fp32" and "peak_memory" in checks:
        # measured: every bf16 linear allocates a ~258 KB oneDNN buffer the model leaves out
        raise ValueError(
            "'dtype' must be fp32 for peak_memory on CPU (half-precision CPU matmuls allocate "
            f"scratch buffers that the memory model leaves out): got {dtype!r}"
        )
    claim = claim or spec
    cuda = dev.type == "cuda"
    t0 = time.perf_counter()
    rows, setup = [], {}
    for i, name in enumerate(checks):
        if on_progress:
            on_progress(i, len(checks), f"{spec.name}: {name}")
        if name == "params":
            rows += ck.check_params(spec, claim)
            setup["params"] = f"full size, {spec.num_hidden_layers} layers, meta device"
        elif name == "flops":
            lens, depth = FLOP_SEQ_LENS, flop_layers
            if {"linear_attention", "mamba"} & set(spec.attention_counts):
                lens, depth = LINEAR_FLOP_SEQ_LENS, flop_layers or reduce.check_depth(spec)
            rows += ck.check_flops(spec, claim, lens, depth)
            setup["flops"] = (
                f"full width, {depth or spec.num_hidden_layers} layers, meta device, full mask"
                + (f"; n = {', '.join(map(str, lens))}" if lens != FLOP_SEQ_LENS else "")
            )
        elif name == "kv_cache":
            rows += kv_rows(spec, claim, device, dtype, cuda)
            small = reduce.kv_spec(spec, kv_budget(spec, device, dtype, cuda))
            setup["kv_cache"] = (
                f"{small.num_hidden_layers} layers; {_geometry(small)} as the model; "
                f"hidden {small.hidden_size}, MLP {small.intermediate_size}, "
                f"vocab {small.vocab_size}; {device}, {dtype}"
            )
        elif spec.is_mla:  # the peak model walks GQAAttention's steps, not MLA's
            setup["peak_memory"] = "not run: the step-by-step peak model is GQA's, not MLA's"
        else:
            heads, lens = peak_size(spec, device, dtype, cuda)
            rows += ck.check_peak(spec, claim, device, dtype, lens, max_heads=heads)
            a = reduce.attention_spec(spec, heads)
            setup["peak_memory"] = (
                f"one attention layer, {a.num_attention_heads} query / {a.n_kv_heads} KV heads, "
                f"head_dim {a.head_dim}, n = {', '.join(map(str, lens))}; {device}, {dtype}"
            )
        if cuda:
            torch.cuda.empty_cache()
    if on_progress:
        on_progress(len(checks), len(checks), f"{spec.name}: done")
    return ModelValidation(
        model=spec.name,
        device=str(dev),
        dtype=dtype,
        setup=setup,
        checks=rows,
        seconds=round(time.perf_counter() - t0, 3),
    )


def _geometry(s: ModelSpec) -> str:
    """The cache-relevant shape of the reduced model, as the kv_cache setup line states it."""
    kinds = s.attention_counts
    parts = []
    if s.is_mla:
        parts.append(
            f"MLA H={s.num_attention_heads}, kv_lora_rank={s.kv_lora_rank}, "
            f"qk_rope_head_dim={s.qk_rope_head_dim}"
        )
    elif set(kinds) - {"linear_attention", "mamba", "none"}:
        parts.append(f"H={s.num_attention_heads}, G={s.n_kv_heads}, head_dim={s.head_dim}")
    if "indexed_attention" in kinds:
        parts.append(f"indexer {s.index_n_heads} heads x {s.index_head_dim}, top-{s.index_topk}")
    if "linear_attention" in kinds:
        parts.append(
            f"linear heads {s.linear_num_key_heads}/{s.linear_num_value_heads} x "
            f"{s.linear_key_head_dim}/{s.linear_value_head_dim}, "
            f"conv kernel {s.linear_conv_kernel_dim}"
        )
    if "mamba" in kinds:
        parts.append(
            f"mamba {s.mamba_num_heads} heads x {s.mamba_head_dim}, state {s.ssm_state_size}, "
            f"{s.n_groups} group(s), conv kernel {s.conv_kernel}"
        )
    types = ", ".join(f"{n} {k}" for k, n in kinds.items())
    return f"{types}; " + "; ".join(parts)


def run_many(
    specs: Sequence[ModelSpec],
    device: str = "cpu",
    *,
    dtype: str | None = None,
    flop_layers: int | None = None,
    checks: Sequence[str] = CHECKS,
    on_progress: Progress | None = None,
) -> ValidationReport:
    """`run` on each spec; progress counts checks over all models."""
    import torch

    t0 = time.perf_counter()
    per, total = len(checks), len(checks) * len(specs)
    out = []
    for i, spec in enumerate(specs):

        def step(done, _n, label, base=i * per):
            if on_progress:
                on_progress(base + done, total, label)

        out.append(
            run(spec, device, dtype=dtype, flop_layers=flop_layers, checks=checks, on_progress=step)
        )
    return ValidationReport(
        device=device,
        device_name=_device_name(device),
        torch_version=torch.__version__,
        tolerances=tolerances(device),
        models=out,
        seconds=round(time.perf_counter() - t0, 3),
    )
