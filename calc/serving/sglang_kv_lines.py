"""SGLang's token pools' "KV Cache is allocated" lines and the dtype they print, by release
(pypi.org sglang wheels 0.4.4 - 0.5.23).

The pool's dtype (ModelRunner.configure_kv_cache_dtype; mem_cache/kv_cache_dtype.py from
0.5.16): "auto" is the model dtype (ModelConfig._get_and_verify_dtype: --dtype, else config.json's
torch_dtype, float32 or none read as float16, bfloat16 for Gemma); fp8_e4m3 torch.float8_e4m3fn,
fp8_e5m2 torch.float8_e5m2; on ROCm float8_e4m3fnuz / float8_e5m2fnuz up to 0.5.6.post1, from
0.5.6.post2 both the platform's fp8_dtype (layers/quantization/fp8_kernel.py is_fp8_fnuz:
float8_e4m3fnuz where "gfx94" is in the arch name, MI300X / MI325X; float8_e4m3fn on gfx950,
MI355X; a hardware file's gfx_arch). 0.5.3rc2 - 0.5.12 log it: "Using KV cache dtype: torch.X".

The lines (MHATokenToKVPool / MLATokenToKVPool._finalize_allocation_log, memory_pool.py):
"KV Cache is allocated. #tokens: T, K size: X GB, V size: X GB" (MLA: "KV size: X GB"), from
0.5.13 with "dtype: torch.bfloat16, " before #tokens (0.5.12: absent, 0.5.13: memory_pool.py
:819). A sliding-window pool (SWAKVPool, swa_memory_pool.py, 0.5.8 on) builds two of them and
then logs "SWAKVPool mem usage: M GB, swa size: S, full size: F" (M: both pools' K + V):
0.5.8 - 0.5.16 the sliding layers' pool first, unlabelled; from 0.5.17 the full layers' first,
labelled "Full KV Cache is allocated." and "SWA KV Cache is allocated." (allocation_label).
sglang#18039's MiMo-V2-Flash log (main of 2026-01-31, between 0.5.8 and 0.5.9) shows the order:
"Use sliding window memory pool. full_layer_tokens=375360, swa_layer_tokens=300288", then "KV
Cache is allocated. #tokens: 300288, ..." (the sliding pool's) on each rank.
"""

from __future__ import annotations

from calc.dtypes import canonical_dtype
from calc.serving import memory as m
from calc.serving.defaults_sglang import sglang_version
from calc.serving.sglang_hybrid import mamba_log_line
from calc.serving.sglang_token_cap import cap_warning, draft_repeats

GIB = 2**30
DTYPE_IN_LINE_FROM = (0, 5, 13, 0)  # "KV Cache is allocated. dtype: ..."
DTYPE_LINE = ((0, 5, 3, 0), (0, 5, 13, 0))  # "Using KV cache dtype: ..." (0.5.3rc2 on)
ROCM_FP8_DTYPE_FROM = (0, 5, 6, 2)  # fp8_dtype on ROCm; before, float8_e4m3fnuz / e5m2fnuz
FULL_POOL_FIRST_FROM = (0, 5, 17, 0)  # SWAKVPool builds the full layers' pool first, labelled
TORCH_NAMES = {
    "bf16": "torch.bfloat16",
    "fp16": "torch.float16",
    "fp32": "torch.float32",
    "fp8_e4m3": "torch.float8_e4m3fn",
    "fp8_e5m2": "torch.float8_e5m2",
    "nvfp4": "torch.float4_e2m1fn_x2",  # calc.serving.sglang_nvfp4
    "fp4_e2m1": "torch.float4_e2m1fn_x2",  # calc.serving.sglang_fp4
}


def sglang_model_dtype(spec, weight_dtype: str | None) -> str:
    """The model dtype SGLang runs in: --dtype (kvcalc's weight_dtype when it is a float), else
    config.json's torch_dtype (a quantized checkpoint's included), float32 read as float16,
    bfloat16 for Gemma (_get_and_verify_dtype). A spec with no torch_dtype (most presets) is
    kvcalc's bf16, as its weights are; SGLang reads a config.json without one as float32 (so
    float16: the same bytes under another name)."""
    if weight_dtype is not None and canonical_dtype(weight_dtype) in ("bf16", "fp16", "fp32"):
        return canonical_dtype(weight_dtype)
    q = spec.quantization
    stored = canonical_dtype(q.dtype if q is not None else spec.checkpoint_dtype or "bf16")
    if stored == "fp32":
        return "bf16" if spec.family.startswith("gemma") else "fp16"
    return stored


def torch_kv_dtype(kv_cache_dtype: str, model_dtype: str, hw, v: tuple[int, ...]) -> str:
    """The pool's torch dtype as SGLang prints it (module docstring)."""
    if kv_cache_dtype in ("auto", "bf16"):
        return TORCH_NAMES[model_dtype if kv_cache_dtype == "auto" else "bf16"]
    if hw.vendor == "AMD" and v < ROCM_FP8_DTYPE_FROM:  # the fnuz types, whatever the arch
        return f"torch.float8_{kv_cache_dtype.removeprefix('fp8_')}fnuz"
    if hw.vendor == "AMD":  # ROCm's fp8_dtype for either fp8 choice (is_fp8_fnuz: "gfx94" in
        fnuz = "gfx94" in (hw.gfx_arch or "")  # the device's gcnArchName; none given: not)
        return "torch.float8_e4m3fnuz" if fnuz else "torch.float8_e4m3fn"
    return TORCH_NAMES[kv_cache_dtype]


def dtype_line(v: tuple[int, ...], dtype: str) -> list[str]:
    """configure_kv_cache_dtype's "Using KV cache dtype: torch.X" (0.5.3rc2 - 0.5.12, before the
    pools; from 0.5.13 the pool line names the dtype instead)."""
    return [f"Using KV cache dtype: {dtype}"] if DTYPE_LINE[0] <= v < DTYPE_LINE[1] else []


def kv_line(v: tuple[int, ...], dtype: str, tokens, size_bytes: int, *, mla: bool, label="") -> str:
    """One pool's "KV Cache is allocated" line: K and V sizes (each `size_bytes`), or MLA's KV."""
    head = f"{label} KV Cache" if label else "KV Cache"
    kind = f"dtype: {dtype}, " if v >= DTYPE_IN_LINE_FROM else ""
    gb = f"{size_bytes / GIB:.2f} GB"
    sizes = f"KV size: {gb}" if mla else f"K size: {gb}, V size: {gb}"
    return f"{head} is allocated. {kind}#tokens: {tokens}, {sizes}"


def swa_k_bytes(lay, page_size: int, full, swa) -> tuple[int, int]:
    """The K buffers (V: the same) of SWAKVPool's full-layer and sliding-layer pools."""
    n_full, n_swa = lay.sglang_swa
    args = (page_size, lay.kv_heads, lay.head_size)
    return (
        m.sglang_k_size_bytes(full, *args, n_full, lay.kv_bytes),
        m.sglang_k_size_bytes(swa, *args, n_swa, lay.kv_bytes),
    )


def allocated_pool_bytes(lay, config, r: dict, rest: int) -> int | None:
    """What the pools allocate when --max-total-tokens binds (None when it does not): K + V of
    the token pools (MLA: the one latent buffer) and the mamba states the budget gave."""
    limit, seen = config.max_total_tokens, r.get("cap_seen")
    if limit is None or getattr(seen, "ndim", 0) or limit >= seen:
        return None
    if lay.sglang_swa:
        token_pools = 2 * sum(swa_k_bytes(lay, config.page_size, r["tokens"], r["swa_tokens"]))
    else:
        token_pools = r["k_size_bytes"] * (1 if lay.mla else 2)
    mamba = r.get("mamba")
    return int(token_pools + (rest - mamba["rest"] if mamba else 0))


def swa_pool_lines(v: tuple[int, ...], dtype: str, lay, page_size: int, full, swa) -> list[str]:
    """SWAKVPool's two pools' lines and its own (module docstring)."""
    k_full, k_swa = swa_k_bytes(lay, page_size, full, swa)
    if v >= FULL_POOL_FIRST_FROM:
        pools = [
            kv_line(v, dtype, full, k_full, mla=False, label="Full"),
            kv_line(v, dtype, swa, k_swa, mla=False, label="SWA"),
        ]
    else:
        pools = [
            kv_line(v, dtype, swa, k_swa, mla=False),
            kv_line(v, dtype, full, k_full, mla=False),
        ]
    usage = 2 * (k_full + k_swa) / GIB
    return [*pools, f"SWAKVPool mem usage: {usage:.2f} GB, swa size: {swa}, full size: {full}"]


def sglang_pool_lines(lay, config, r: dict, dtype: str) -> list[str]:
    """The pool lines SGLang prints after the weights (figures.sglang_figures' `r`; `dtype`
    torch_kv_dtype's): the --max-total-tokens warning (sglang_token_cap; from 0.5.11 after the
    sliding pools' first line), MambaPool's (HybridReqToTokenPool is built first), then the
    token pool's (the draft worker's: draft_pool_lines)."""
    tokens, k_size, v = r["tokens"], r["k_size_bytes"], sglang_version(config.version)
    pool, first, limit = r.get("mamba"), r.get("swa_profiled"), config.max_total_tokens
    warn = cap_warning(limit, r.get("cap_seen"))
    lines = [swa_line(*first)] if first and limit is not None else []
    lines += warn
    if pool and pool["slots"] > 0:
        lines.append(mamba_log_line(config.version, pool))
    if lay.sglang_swa:
        if first is None or limit is None or tokens != first[0]:  # the configurator re-ran
            lines.append(swa_line(tokens, r["swa_tokens"]))
        lines += swa_pool_lines(v, dtype, lay, config.page_size, tokens, r["swa_tokens"])
    else:
        lines.append(kv_line(v, dtype, tokens, k_size, mla=lay.mla))
    return lines


def draft_pool_lines(config, r: dict, dtype: str, draft_bytes: int) -> list[str]:
    """The MTP draft worker's own ModelRunner after the target's: its "Using KV cache dtype"
    (0.5.3rc2 - 0.5.12), up to 0.5.8 the --max-total-tokens warning again (it compares the cap
    with the target's count: sglang_token_cap), its MLATokenToKVPool line over the target's
    tokens."""
    v = sglang_version(config.version)
    lines = dtype_line(v, dtype)
    if draft_repeats(v):
        lines += cap_warning(config.max_total_tokens, r.get("cap_seen"))
    return [*lines, kv_line(v, dtype, r["tokens"], draft_bytes, mla=True)]


def swa_line(full, swa) -> str:
    """The sliding-window pools' sizes as 0.5.7 - 0.5.23 print them (model_runner_kv_cache_mixin
    .py, then pool_configurator.py); "Use Sliding ..." up to 0.5.6.post2 is never printed by
    kvcalc, whose first sliding-window pool is Llama 4's from 0.5.8 (calc.serving.sglang_swa)."""
    return f"Use sliding window memory pool. full_layer_tokens={full}, swa_layer_tokens={swa}"
