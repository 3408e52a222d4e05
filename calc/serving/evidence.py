"""kvcalc against the committed start-up logs (benchmarks/engine_logs/*.toml), check by check.

Each check is one logged figure beside kvcalc's, with a verdict:
- "exact": kvcalc prints what the log prints;
- "in interval": the log's input was rounded (GiB to 2 decimals), and the logged count lies in
  the range of counts that rounded input allows (a range of width 1-2 blocks);
- "within target" / "miss": a first-principles figure within / outside its target
  (weights 0.5 %, available KV memory 2 %);
- "not modelled": kvcalc has no rule for it yet; the reason says which;
- "other rank": the log's token line and its available-memory line were printed by different
  workers ([logged] token_line_other_rank, with the evidence in the case's comments); the
  note gives the memory the token line's own worker had, which the quoted line does not show.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

from calc.presets import load_preset
from calc.quant import parse_quantization_config
from calc.serving import figures
from calc.serving.evidence_checks import HALF, Check, _abs, _eq, _interval, _pct
from calc.serving.evidence_sglang import sglang_checks
from calc.serving.hardware import load_hardware
from calc.serving.plan import GIB, engine_plan, prepare
from calc.spec import ModelSpec

ROOT = Path(__file__).resolve().parents[2]  # the repository: fixtures are named from it
NOT_MODELLED = {
    "not-modelled": "DeepSeek-V4's compressed attention is not in the spec",
}
# the KV cache is checked given the logged memory; the weights (and so the derived memory) not
WEIGHTS_NOT_MODELLED = {
    "quantized": "the checkpoint's quantization_config (its skip list) is not committed",
}


def load_cases(folder: str | Path) -> list[dict]:
    return [tomllib.loads(p.read_text()) for p in sorted(Path(folder).glob("*.toml"))]


def case_spec(case: dict) -> ModelSpec | None:
    spec = None
    if "preset" in case:
        spec = load_preset(case["preset"])
        if "preset_overrides" in case:  # where the served checkpoint's config.json differs
            spec = ModelSpec(**(spec.model_dump() | case["preset_overrides"]))
    elif "model_config" in case:
        spec = ModelSpec(**case["model_config"])
    if spec is not None and "quantization_config_file" in case:  # a committed fixture
        path = ROOT / case["quantization_config_file"]
        case = case | {"quantization_config": json.loads(path.read_text())["quantization_config"]}
    if spec is not None and "quantization_config" in case:  # the checkpoint's config.json
        # the dtype vLLM serves in: the case's torch_dtype, else its --dtype (weight_dtype)
        dtype = case.get("torch_dtype", case.get("weight_dtype", "bf16"))
        q = parse_quantization_config(case["quantization_config"], dtype=dtype, origin=case["id"])
        spec = ModelSpec(**spec.model_dump(exclude={"quantization"}), quantization=q)
    return spec


def _gpu(case: dict):
    try:
        hw = load_hardware(case.get("gpu", ""))
    except ValueError:
        if "total_gpu_memory_gib" not in case:
            return None
        # a GPU the log does not name: only the memory CUDA reported is used (V0's sums and
        # V1's batch defaults depend on nothing else)
        hw = load_hardware("h100-sxm").model_copy(update={"name": case.get("gpu", "unknown")})
    if "total_gpu_memory_gib" in case:  # what CUDA reported in this log
        hw = hw.model_copy(update={"cuda_total_gib": case["total_gpu_memory_gib"]})
    return hw


def _settings(case: dict) -> dict:
    s = dict(case.get("settings", {}))
    s.setdefault("version", case["version"])
    if "pp_layer_partition" in s:
        s["pp_layer_partition"] = tuple(s["pp_layer_partition"])
    return s


def evaluate(case: dict) -> list[Check]:
    cid, log = case["id"], case.get("logged", {})
    blocked = [NOT_MODELLED[c] for c in case.get("categories", []) if c in NOT_MODELLED]
    spec = case_spec(case)
    if blocked or (
        spec is None and "num_gpu_blocks" not in log and "gpu_kv_cache_tokens" not in log
    ):
        return [Check(cid, "all", "-", "-", "not modelled", "; ".join(blocked) or "no model")]
    if spec is None:
        return _report_only(case)
    if case["engine"] == "sglang":
        return sglang_checks(case, spec, _settings(case), _gpu(case) or load_hardware("h100-sxm"))
    return _vllm(case, spec)


def _report_only(case: dict) -> list[Check]:
    """Cases with no model: the report's arithmetic from the logged blocks or tokens."""
    log, L = case["logged"], case["settings"]["max_model_len"]
    out = []
    if "num_gpu_blocks" in log:
        tokens = log["num_gpu_blocks"] * 16
        out.append(_eq(case["id"], "GPU KV cache size, tokens", log["gpu_kv_cache_tokens"], tokens))
    else:
        tokens = log["gpu_kv_cache_tokens"]
    conc = f"{tokens / L:.2f}"
    out.append(_eq(case["id"], "maximum concurrency", f"{log['max_concurrency']:.2f}", conc))
    return out


def _vllm(case: dict, spec: ModelSpec) -> list[Check]:
    cid, log, s = case["id"], case["logged"], _settings(case)
    no_weights = [WEIGHTS_NOT_MODELLED[c] for c in case.get("categories", [])
                  if c in WEIGHTS_NOT_MODELLED and spec.quantization is None]  # fmt: skip
    if "weights_not_modelled" in case:  # the case's own reason (from the engine's source)
        no_weights = [case["weights_not_modelled"]]
    wd = case.get("weight_dtype", "bf16")
    hw = _gpu(case) or load_hardware("h100-sxm")  # the GPU only matters on the derived path
    _, _, cfg, lay, _, _, _, _ = prepare(spec, hw, weight_dtype=wd, **s)
    B, L, groups = cfg.block_size, cfg.max_model_len, len(lay.groups)
    out: list[Check] = []
    x = log.get("available_kv_cache_gib")
    if x is not None and x > 0 and "pp_non_kv_total_gib" in log:
        out += _pp_ranks(case, cfg, lay, x)
    elif x is not None and x > 0:
        lo = engine_plan(spec, hw, available_kv_gib=x - HALF, weight_dtype=wd, **s)
        hi = engine_plan(spec, hw, available_kv_gib=x + HALF - 1e-9, weight_dtype=wd, **s)
        for key, label in (
            ("gpu_kv_cache_tokens", "GPU KV cache size, tokens"),
            ("num_gpu_blocks", "GPU blocks"),
        ):
            if key in log and log.get("token_line_other_rank"):
                one = lay.page_bytes(B) * lay.group_size
                per_block = _block_bytes(lay, B) if groups == 1 else one
                out.append(_other_rank(cid, label, log[key], lo, hi, x, B, per_block))
            elif key in log:
                out.append(_interval(cid, label, log[key], getattr(lo, key), getattr(hi, key), x))
        if "needed_kv_cache_gib" in log:
            got = _between(lo.refusal or "", "max seq len (", "GiB KV cache is needed")
            got = got.split("(")[-1].strip() if got else "-"
            want = f"{log['needed_kv_cache_gib']:.2f}"
            out.append(_eq(cid, "KV cache needed for one request, GiB", want, got))
        if "estimated_max_model_len" in log:
            e = log["estimated_max_model_len"]
            out.append(
                _interval(cid, "estimated maximum model length", e, _longest(lo), _longest(hi), x)
            )
    if "max_concurrency" in log:
        out.append(_concurrency(cid, log, cfg, lay, B, L))
    if log.get("refusal"):
        n = _logged_blocks(log, B)
        p = engine_plan(
            spec, hw, available_kv_gib=n * _block_bytes(lay, B) / GIB, weight_dtype=wd, **s
        )
        out.append(_eq(cid, "refusal", log["refusal"], p.refusal, "from the logged blocks"))
    if log.get("refused") or (x is not None and x <= 0):
        p = engine_plan(spec, hw, available_kv_gib=x, weight_dtype=wd, **s)
        note = f"given {x} GiB: {(p.refusal or '')[:60]}"
        out.append(_eq(cid, "refused at start-up", True, not p.fits, note))
    if no_weights:
        out.append(Check(cid, "weights, available memory", "-", "-", "not modelled", no_weights[0]))
        if _gpu(case) is not None and "non_torch_gib" in log and "peak_torch_gib" not in log:
            # the profile's non-torch increase does not depend on the weights
            p = engine_plan(spec, hw, weight_dtype=wd, **s)
            out.append(_abs(cid, "non_torch_gib", log["non_torch_gib"], p.non_torch_bytes / GIB))
        return out
    if "pp_weights_gib" in log:  # each pipeline rank's "weights memory" (DEBUG line)
        w = prepare(spec, hw, weight_dtype=wd, **s)[4]
        for r, (want, got) in enumerate(zip(log["pp_weights_gib"], w, strict=True)):
            out.append(_pct(cid, "weights_gib", want, got / GIB, f"PP rank {r}: "))
    elif "weights_gib" in log:
        p = engine_plan(spec, hw, available_kv_gib=1.0, weight_dtype=wd, **s)
        out.append(_pct(cid, "weights_gib", log["weights_gib"], p.weights_bytes / GIB))
    if _gpu(case) is not None and x is not None:
        p = engine_plan(spec, hw, weight_dtype=wd, **s)
        if "peak_torch_gib" in log and "weights_gib" in log:  # V0: the profile run's peak
            act = log["peak_torch_gib"] - log["weights_gib"]
            out.append(_pct(cid, "activation_gib", round(act, 4), p.activation_bytes / GIB))
        if "pp_non_kv_total_gib" in log and "non_torch_gib" in log:  # V1 PP: the DEBUG lines
            # give each rank's peak; kvcalc's is the last rank's (it samples; it sets the blocks)
            last = log["pp_non_kv_total_gib"][-1] - log["pp_weights_gib"][-1] - log["non_torch_gib"]
            note = "last PP rank (non-KV total - weights - non-torch): "
            out.append(_pct(cid, "activation_gib", round(last, 4), p.activation_bytes / GIB, note))
        elif "activation_peak_gib" in log:  # 0.7+: "PyTorch activation peak memory takes X"
            act = log["activation_peak_gib"]
            out.append(_pct(cid, "activation_gib", act, p.activation_bytes / GIB))
        if "non_torch_gib" in log and "peak_torch_gib" not in log:  # 0.7+: the increase
            nt = log["non_torch_gib"]
            out.append(_abs(cid, "non_torch_gib", nt, p.non_torch_bytes / GIB))
        out.append(_pct(cid, "available_kv_cache_gib", x, p.available_kv_cache_bytes / GIB))
    elif _gpu(case) is not None and groups == 1 and "available_kv_cache_gib" not in log:
        out += _from_logged_blocks(case, spec, hw, wd, s, cfg, lay)
    return out


def _from_logged_blocks(case, spec, hw, wd, s, cfg, lay) -> list[Check]:
    """A log that prints blocks or tokens but not the memory (V0 before 0.7, refusals): the
    memory the blocks fill, n x block bytes (+ half a block: the floor's mean remainder),
    against the first-principles figure."""
    B = cfg.block_size
    n = _logged_blocks(case["logged"], B)
    if not n:
        return []
    p = engine_plan(spec, hw, weight_dtype=wd, **s)
    check = _pct(
        case["id"], "available_kv_cache_gib", round((n + 0.5) * _block_bytes(lay, B) / GIB, 4),
        p.available_kv_cache_bytes / GIB, f"from the logged {n:,} blocks: ",
    )  # fmt: skip
    return [check]


def _logged_blocks(log: dict, B: int) -> int:  # printed, or the token capacity / B; else 0
    return log.get("num_gpu_blocks") or log.get("kv_cache_capacity_tokens", 0) // B


def _block_bytes(lay, B: int) -> int:  # a block of every layer (one KV-cache group)
    return lay.page_bytes(B) * max(lay.rank_layers)


def _pp_ranks(case: dict, cfg, lay, x: float) -> list[Check]:
    """Pipeline parallel, vLLM V1: each rank sizes its own cache (requested memory minus its own
    non-KV total, gpu_worker.py determine_available_memory) and the engine keeps the fewest
    blocks (0.19.0 sdist, v1/core/kv_cache_utils.py get_kv_cache_configs). Only rank 0 prints
    "Available KV cache memory" at INFO; every rank prints its "Total non KV cache memory" at
    DEBUG ([logged] pp_non_kv_total_gib), so rank r had x + non_kv[0] - non_kv[r]: three
    figures printed to 0.01 GiB, known to within 0.015 GiB (0.005 for rank 0)."""
    log, L = case["logged"], cfg.max_model_len
    nk = log["pp_non_kv_total_gib"]
    slack = [HALF if r == 0 else 3 * HALF for r in range(len(nk))]
    mid = [x + nk[0] - n for n in nk]
    pairs = list(zip(mid, slack, strict=True))
    lo = figures.vllm_figures(lay, cfg, [int((a - e) * GIB) for a, e in pairs], L)
    hi = figures.vllm_figures(lay, cfg, [int((a + e) * GIB) - 1 for a, e in pairs], L)
    per = ", ".join(f"{a:.2f}" for a in mid)
    out = []
    for key, label, name in (
        ("gpu_kv_cache_tokens", "GPU KV cache size, tokens", "tokens"),
        ("num_gpu_blocks", "GPU blocks", "num_gpu_blocks"),
    ):
        if key in log:
            a, b, got = lo[name], hi[name], log[key]
            verdict = "exact" if a == b == got else ("in interval" if a <= got <= b else "miss")
            note = f"{a:,}..{b:,} for ranks' {per} GiB (limiting rank {lo['rank']})"
            out.append(Check(case["id"], label, got, (a, b), verdict, note))
    return out


def _concurrency(cid, log, cfg, lay, B, L) -> Check:
    """The concurrency line from the logged blocks, or tokens, through figures.vllm_concurrency
    (what engine_plan prints). With G KV-cache groups the token line is blocks // G x block
    (the attention block, raised for a linear layer's state), so it leaves G candidate block
    counts: the check is that the logged figure is one of theirs."""
    want = f"{log['max_concurrency']:.2f}"
    note = "from the logged blocks / tokens"
    if "num_gpu_blocks" in log:
        candidates = [log["num_gpu_blocks"]]
    elif not cfg.is_v1:
        candidates = [log["gpu_kv_cache_tokens"] // B]
    else:
        groups = len(lay.groups)
        k = log["gpu_kv_cache_tokens"] // lay.report_block(lay.block_size(B), L)
        candidates = [k * groups + i for i in range(groups)]
    got = sorted({f"{figures.vllm_concurrency(lay, cfg, n, L)[1]:.2f}" for n in candidates})
    if len(got) == 1:
        return _eq(cid, "maximum concurrency", want, got[0], note)
    per_request = figures.vllm_concurrency(lay, cfg, candidates[0], L)[2]
    note = (
        f"{candidates[0]:,}..{candidates[-1]:,} blocks of {lay.block_size(B)} tokens, "
        f"{per_request} a request"
    )
    verdict = "in interval" if want in got else "miss"
    return Check(cid, "maximum concurrency", want, (got[0], got[-1]), verdict, note)


def _other_rank(cid, label, logged, lo, hi, x, block, per_block) -> Check:
    """A token / block line printed by another worker than the quoted available-memory line:
    the memory its own worker had is what its blocks need (one group: blocks x bytes a block
    of every layer), to within one block."""
    blocks = logged // block if label.startswith("GPU KV cache size") else logged
    low, high = blocks * per_block / GIB, (blocks + 1) * per_block / GIB
    note = (
        f"{lo.gpu_kv_cache_tokens:,}..{hi.gpu_kv_cache_tokens:,} for the quoted {x} GiB; the "
        f"line's own worker had {low:.3f}..{high:.3f} GiB"
    )
    return Check(cid, label, logged, (getattr(lo, _KEY[label]), getattr(hi, _KEY[label])),
                 "other rank", note)  # fmt: skip


_KEY = {"GPU KV cache size, tokens": "gpu_kv_cache_tokens", "GPU blocks": "num_gpu_blocks"}


def _between(text: str, a: str, b: str) -> str:
    i = text.find(a)
    j = text.find(b, i)
    return text[i + len(a) : j] if i >= 0 and j > i else ""


def _longest(plan) -> int:
    line = plan.refusal or ""
    key = "estimated maximum model length is "
    return int(line[line.find(key) + len(key) :].split(".")[0]) if key in line else -1
