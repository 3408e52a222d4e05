"""The lines vLLM's start-up prints for a plan, in its words and order, and its refusal:
calc.serving.plan chains the figures (calc.serving.figures), this module words them."""

from __future__ import annotations

from calc.serving import vllm_refusal as rf
from calc.serving.vllm_dcp import dcp_line
from calc.serving.vllm_extensible import committed_bytes, warmup_line
from calc.serving.vllm_mamba import page_lines
from calc.serving.vllm_spec import method_lines, padding_lines
from calc.serving.vllm_xpu import xpu_lines

GIB = 2**30
ONE_LINE_FROM = (0, 28, 0)  # "GPU KV cache size: N tokens, Maximum concurrency for ..."
NAMED_DTYPE_FROM = (0, 20, 0)  # "Using %s data type to store kv cache" (config/cache.py)
# "Model loading took" and "Available KV cache memory" (v1/worker/gpu_model_runner.py, gpu/
# model_runner.py, gpu_worker.py; the 0.10.0 - 0.34.0 sdists): "%.4f" / "%.2f" GiB, then
# format_gib (utils/mem_utils.py: f"{round(b / GiB_bytes, 2)}", so 30.5 for 30.50) from 0.14.0;
# "GiB memory and" from 0.11.1 in V1's line, from 0.28.0 in Model Runner V2's ("GiB and"
# before). V0 (before 0.8.0): "Loading model weights took %.4f GB" (worker/model_runner.py).
FORMAT_GIB_FROM = (0, 14, 0)
MEMORY_WORD_FROM = {False: (0, 11, 1), True: (0, 28, 0)}  # by Model Runner V2


def gib_text(b: int, v: tuple[int, ...], digits: int = 2) -> str:
    """A GiB figure as the release's line prints it (see above)."""
    return f"{round(b / GIB, 2)}" if v >= FORMAT_GIB_FROM else f"{b / GIB:.{digits}f}"


def load_line(config, weights: int, v2: bool) -> str:
    """The weights line of one rank in the release's words (the seconds left out); `v2`: Model
    Runner V2 loads the model (calc.serving.vllm_v2)."""
    v = config.version_tuple[:3]
    if not config.is_v1:
        return f"Loading model weights took {weights / GIB:.4f} GB"
    word = " memory" if v >= MEMORY_WORD_FROM[v2] else ""
    return f"Model loading took {gib_text(weights, v, 4)} GiB{word}"


def fp8_cache_line(kv_cache_dtype: str, v: tuple[int, ...]) -> list[str]:
    """CacheConfig's line for an fp8 cache (config/cache.py _validate_cache_dtype, the engine's
    config, so first): "Using fp8 data type ... scaling factor." to 0.19, the dtype named and no
    final period from 0.20 (the 0.10.1 - 0.34.0 sdists); also for the fp8 that --kv-cache-dtype
    auto resolves to (calc.serving.kv_auto), which CacheConfig receives."""
    if not kv_cache_dtype.startswith(("fp8", "nvfp4")):
        return []
    name, end = (kv_cache_dtype, "") if v >= NAMED_DTYPE_FROM else ("fp8", ".")
    return [
        f"Using {name} data type to store kv cache. It reduces the GPU memory footprint and "
        f"boosts the performance. Meanwhile, it may cause accuracy drop without a proper "
        f"scaling factor{end}"
    ]


def v1_refusal(config, r, max_model_len) -> str | None:
    """The one-request check on the memory of the limiting rank (less the null block from 0.29.0),
    and with the extensible cache again after warmup on its measured blocks (0.34.0,
    shrink_kv_cache_configs)."""
    v, ext = config.version_tuple, config.enable_extensible_kv_cache
    u = config.gpu_memory_utilization
    need = r["needed_bytes"]
    hint = rf.vllm_refusal_hint(ext, u, after_warmup=False)
    refusal = rf.vllm_v1_refusal(max_model_len, need, r["check_bytes"], r["longest_len"], v, hint)
    if refusal or r["after_warmup_bytes"] is None:
        return refusal
    hint = rf.vllm_refusal_hint(ext, u, after_warmup=True)
    after, longest = r["after_warmup_bytes"], r["longest_after_len"]
    return rf.vllm_v1_refusal(max_model_len, need, after, longest, v, hint)


def vllm_report(
    config,
    lay,
    r,
    weights,
    mtp: bool,
    warm,
    act,
    given: bool,
    reserved=None,
    v2: bool = False,
    fit=((), (), None),
    offload=(),
):
    """(lines, refusal) for figures `r` (calc.serving.figures.vllm_figures); `mtp`: a drafter whose
    weights are not modelled (no load line); `warm`: each rank's (kv, headroom, requested) of the
    extensible cache's measurement, else None; `given`: planned from a given memory; `reserved`:
    --kv-cache-memory-bytes's line, in place of the available memory's (vllm_kv_memory); `v2`:
    Model Runner V2 runs (the load line's words); `fit`: --max-model-len -1's lines before and
    after warmup and its refusal (calc.serving.vllm_autofit.auto_fit), which stands for the size
    lines; `offload`: the CPU offloader's line, before the load line (vllm_offload)."""
    fit_before, fit_after, fit_refusal = fit
    L, B, page, rank = config.max_model_len, r["block_size"], r["page_bytes"], r["rank"]
    n = r["num_gpu_blocks"]
    a, tokens, conc = r["logged_available"], r["tokens"], r["max_concurrency"]
    lines = fp8_cache_line(config.kv_cache_dtype, config.version_tuple)
    lines += [*method_lines(config.speculative_method), *page_lines(lay, config.block_size)]
    lines += xpu_lines(lay, config.block_size, config.version_tuple)
    lines += offload
    if not mtp:
        lines.append(load_line(config, weights[rank], v2))
    if lay.block_line:  # a dense MLA backend's block (vllm_mla_block)
        lines.insert(0, lay.block_line)
    if lay.forced_block and config.block_size != lay.forced_block:  # platforms/cuda.py
        lines.insert(0, "Forcing kv cache block size to 64 for FlashMLASparse backend.")
    override = []  # get_kv_cache_configs / may_override_num_blocks, after the memory line
    if r["profiled_blocks"] is not None:
        override = [
            f"Overriding num_gpu_blocks={r['profiled_blocks']} with num_gpu_blocks_override="
            f"{config.num_gpu_blocks_override}"
        ]
    if not config.is_v1:
        refusal = rf.vllm_v0_refusal(L, n, B)
        # llm_engine logs the override, then the executor "# GPU blocks" with it
        lines += [f"KV cache memory: {a / GIB:.2f} GiB", *override, f"# GPU blocks: {n}"]
        lines += [f"Maximum concurrency for {L} tokens per request: {conc:.2f}x"]
    else:
        refusal = fit_refusal or v1_refusal(config, r, L)
        cp = dcp_line(config.version_tuple, config.decode_context_parallel_size)
        if reserved is not None:
            lines.append(reserved)
        elif not (given and config.enable_extensible_kv_cache):  # given: the measured budget
            lines += [f"Available KV cache memory: {gib_text(a, config.version_tuple)} GiB"]
        lines += [*override, *padding_lines(lay), *([cp] if cp else []), *fit_before]
        if warm is not None:
            _, head, req = warm[rank]
            g = lay.rank_group_size(rank)
            lines.append(warmup_line(head, committed_bytes(page, g), n, page * g, act, req))
        lines += fit_after
        size = f"GPU KV cache size: {tokens:,} tokens"
        most = f"Maximum concurrency for {L:,} tokens per request: {conc:.2f}x"
        # one line from 0.28.0 (kv_cache_utils.update_kv_cache_capacity; two before); none
        # where auto-fit fits no token (get_kv_cache_configs raises first)
        if not fit_refusal:
            one = config.version_tuple >= ONE_LINE_FROM
            lines += [f"{size}, {most}"] if one else [size, most]
    if refusal:
        lines.append(f"ValueError: {refusal}")
    return lines, refusal
