"""engine_plan for vLLM (calc.serving.plan): the available memory per worker, given
(available_kv_gib), set (--kv-cache-memory-bytes: calc.serving.vllm_kv_memory) or derived
(calc.serving.overheads; 0.34's extensible measurement: calc.serving.vllm_extensible), then
calc.serving.figures' chain, vLLM's lines (calc.serving.vllm_lines) and its suggestion after
capture (calc.serving.vllm_suggestion)."""

from __future__ import annotations

from calc.dtypes import dtype_bits
from calc.serving import figures as f
from calc.serving.figures import GIB
from calc.serving.overheads import overheads
from calc.serving.plan_result import EnginePlan, identity
from calc.serving.vllm_autofit import auto_fit, check_auto_fit
from calc.serving.vllm_drafter import drafter_modelled
from calc.serving.vllm_extensible import init_free_bytes
from calc.serving.vllm_kv_memory import check_one_memory, oom_refusal, reserved_line, sets_memory
from calc.serving.vllm_lines import vllm_report
from calc.serving.vllm_offload import offload_line
from calc.serving.vllm_spec import canonical_method, check_derivable
from calc.serving.vllm_suggestion import plan_suggestion, with_suggestion
from calc.serving.vllm_towers import (
    DATA_FALLBACK_LINE,
    HEADS_FALLBACK_LINE,
    encoder_data_parallel,
    heads_fallback,
)
from calc.serving.vllm_v2 import vllm_uses_v2_runner
from calc.serving.vllm_xpu import check_xpu_derivable


def vllm_plan(spec, hw, config, lay, weights, kd, wd, total, given_gib, calibration) -> EnginePlan:
    """engine_plan's vLLM report from calc.serving.plan.prepare's pieces: the available memory
    (given, set by --kv-cache-memory-bytes, or derived; 0.34's extensible measurement), the
    figures, the lines and the refusal."""
    L = config.max_model_len
    # an MTP drafter whose weights are not modelled: no weights figure (vllm_drafter)
    mtp = lay.speculation.draft_layers > 0 and not drafter_modelled(spec, wd)
    extensible = config.enable_extensible_kv_cache
    measured = warm = reserved = None
    # the worker's init snapshot (its free memory): a calibration's, else kvcalc's estimate
    init_free = init_free_bytes(total, config.gpus_per_replica, hw, calibration)
    kv_set = sets_memory(config)  # --kv-cache-memory-bytes: each worker's memory, unprofiled
    check_one_memory(given_gib, config)
    if given_gib is not None or kv_set:
        act = nt = cg = None
        if kv_set:
            avail = f.vllm_set_memory(config, weights)
            reserved = reserved_line(config.version_tuple, init_free, avail[0])
            source = "kv_cache_memory_bytes"
        else:
            avail = [f.given_bytes(given_gib)] * len(weights)
            source = "given"
    else:
        check_derivable(config.speculative_method)
        check_xpu_derivable(hw.vendor)
        act, nt, cg = overheads(spec, config, wd, calibration, hw)
        u = config.gpu_memory_utilization
        avail, warm = f.vllm_derived_memory(config, weights, total, act, nt, cg, u, hw, calibration)
        measured = None if warm is None else [x[0] for x in warm]
        source = "calibrated" if calibration else "derived"
    r = f.vllm_figures(lay, config, avail, L, measured)
    fit_before, fit_after, fit_refusal = [], [], None
    if config.auto_max_model_len:  # --max-model-len -1: the longest that fits (vllm_autofit)
        check_auto_fit(spec, config, lay)
        fit, fit_before, fit_after, fit_refusal = auto_fit(config, r, hw.vendor)
        if fit != L:
            L = fit
            config = config.model_copy(update={"max_model_len": fit})
            r = f.vllm_figures(lay, config, avail, L, measured)
    page, rank, n = r["page_bytes"], r["rank"], r["num_gpu_blocks"]
    tokens, conc, groups = r["tokens"], r["max_concurrency"], len(lay.groups)
    given = given_gib is not None
    offload = []
    if config.cpu_offload_gb:  # the offloader's total, before the load line (vllm_offload)
        start = sum(lay.rank_layers[:rank])
        layers = range(start, start + lay.rank_layers[rank])
        tp, ep, wb = config.tensor_parallel_size, config.expert_parallel_size, dtype_bits(wd) // 8
        offload = offload_line(config, spec, tp, ep, layers, wb)
    v2 = vllm_uses_v2_runner(spec, config)
    fit = (fit_before, fit_after, fit_refusal)
    lines, refusal = vllm_report(
        config, lay, r, weights, mtp, warm, act, given, reserved, v2, fit, offload
    )
    if (
        config.mm_encoder_tp_mode == "data"
        and spec.vision
        and not encoder_data_parallel(spec, config)
    ):  # ModelConfig's fallback, before the model is built
        lines.insert(0, DATA_FALLBACK_LINE)
    if heads_fallback(spec, config):  # Kimi K2.5's MoonViT, whole on every rank (vllm_towers)
        lines.insert(0, HEADS_FALLBACK_LINE)
    if kv_set and refusal is None:
        refusal = oom_refusal(avail[0], max(weights), init_free)
        lines += [f"torch.OutOfMemoryError: {refusal}"] if refusal else []
    a = r["logged_available"]  # the profiled memory determine_available_memory logged
    hint = suggest = None  # vLLM's suggested --kv-cache-memory (vllm_suggestion), derived only
    if source == "derived" and refusal is None:
        hint, suggest = plan_suggestion(config, init_free, total, weights[rank], act, nt, cg, a)
    lines = with_suggestion(lines, hint)
    return EnginePlan(
        **identity(spec, hw, config, kd, source, total),
        max_num_batched_tokens=config.max_num_batched_tokens,
        weights_bytes=None if mtp else max(weights),
        weights_gib=None if mtp else round(max(weights) / GIB, 4),
        activation_bytes=act,
        non_torch_bytes=nt,
        cudagraph_bytes=cg,
        available_kv_cache_bytes=a,
        available_kv_cache_gib=round(a / GIB, 2),
        kv_groups=groups,
        page_bytes=page,
        num_gpu_blocks=n,
        gpu_kv_cache_tokens=tokens,
        max_concurrency=conc,
        refusal=refusal,
        extensible_kv_cache=bool(extensible),
        measured_kv_cache_bytes=None if measured is None else int(measured[rank]),
        initial_free_bytes=init_free,
        suggested_kv_cache_memory_bytes=suggest,
        speculative_method=canonical_method(config.speculative_method),
        num_speculative_tokens=lay.speculation.tokens or None,
        draft_layers=lay.speculation.draft_layers,
        log_lines=lines,
    )
