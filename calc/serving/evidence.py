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
from calc.serving.evidence_checks import Check, _abs, _eq, _pct
from calc.serving.evidence_sglang import sglang_checks
from calc.serving.evidence_vllm import (
    block_bytes,
    concurrency_check,
    from_logged_blocks,
    given_memory_checks,
    kv_memory_checks,
    logged_blocks,
    v4_checks,
)
from calc.serving.hardware import load_hardware
from calc.serving.plan import GIB, engine_plan, prepare
from calc.serving.vllm_mamba import padding_pct
from calc.spec import ModelSpec

ROOT = Path(__file__).resolve().parents[2]  # the repository: fixtures are named from it
NOT_MODELLED: dict[str, str] = {}  # a category kvcalc has no rule for: its reason
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
        if "gpu_vendor" in case:  # a GPU with no preset: its vendor's rules (vLLM's platform)
            update = {"name": case["gpu"], "vendor": case["gpu_vendor"]}
            return load_hardware("h100-sxm").model_copy(update=update)
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
    if spec.is_v4:  # its vLLM cache from the logged memory (calc.serving.plan_v4)
        return v4_checks(case, spec, _gpu(case) or load_hardware("h100-sxm"), _settings(case))
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


def _page_checks(case: dict, cfg, lay) -> list[Check]:
    """vLLM's hybrid config lines (the attention block raised for a linear layer's state, the
    state page's padding): from the model's shapes alone (calc.serving.vllm_mamba.page_lines)."""
    log, out = case["logged"], []
    B = lay.hybrid_block_size(cfg.block_size)  # the lines print it before a platform's rounding
    if "attention_block_size" in log:
        out.append(_eq(case["id"], "attention block size", log["attention_block_size"], B))
    if "mamba_page_padding_pct" in log:
        want = f"{log['mamba_page_padding_pct']:.2f}"
        out.append(_eq(case["id"], "mamba page padding, %", want, f"{padding_pct(lay, B):.2f}"))
    return out


def _vllm(case: dict, spec: ModelSpec) -> list[Check]:
    cid, log, s = case["id"], case["logged"], _settings(case)
    no_weights = [WEIGHTS_NOT_MODELLED[c] for c in case.get("categories", [])
                  if c in WEIGHTS_NOT_MODELLED and spec.quantization is None]  # fmt: skip
    if "weights_not_modelled" in case:  # the case's own reason (from the engine's source)
        no_weights = [case["weights_not_modelled"]]
    wd = case.get("weight_dtype", "bf16")
    hw = _gpu(case) or load_hardware("h100-sxm")  # the GPU only matters on the derived path
    if s.get("kv_cache_memory_bytes"):  # the memory is the setting: kvcalc's plan, nothing given
        return kv_memory_checks(case, spec, hw, wd, s)
    _, _, cfg, lay, _, _, _, _ = prepare(spec, hw, weight_dtype=wd, **s)
    B, L, groups = cfg.block_size, cfg.max_model_len, len(lay.groups)
    out: list[Check] = []
    x = log.get("available_kv_cache_gib")
    out += given_memory_checks(case, spec, hw, wd, s, cfg, lay) + _page_checks(case, cfg, lay)
    if "max_concurrency" in log:
        out.append(concurrency_check(cid, log, cfg, lay, B, L))
    if log.get("refusal"):
        n = logged_blocks(log, B)
        p = engine_plan(
            spec, hw, available_kv_gib=n * block_bytes(lay, B) / GIB, weight_dtype=wd, **s
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
    elif "pp_stage_weights_gib" in log:  # the stages a log's lines can be placed on (comments)
        w = prepare(spec, hw, weight_dtype=wd, **s)[4]
        for r, want in sorted((int(k), v) for k, v in log["pp_stage_weights_gib"].items()):
            out.append(_pct(cid, "weights_gib", want, w[r] / GIB, f"PP rank {r}: "))
    elif "weights_gib" in log:
        p = engine_plan(spec, hw, available_kv_gib=1.0, weight_dtype=wd, **s)
        out.append(_pct(cid, "weights_gib", log["weights_gib"], p.weights_bytes / GIB))
    if "derived_not_checked" in case:  # the case's reason (e.g. a release not printed)
        why = case["derived_not_checked"]
        out.append(Check(cid, "available_kv_cache_gib", "-", "-", "not modelled", why))
    elif _gpu(case) is not None and x is not None:
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
        s_log, s_mine = (
            log.get("suggested_kv_cache_memory_bytes"),
            p.suggested_kv_cache_memory_bytes,
        )
        if s_log is not None and s_mine is not None:  # vllm_suggestion
            out.append(_pct(cid, "suggested --kv-cache-memory, GiB", s_log / GIB, s_mine / GIB))
        if "warmup_kv_gib" in log and p.measured_kv_cache_bytes is not None:  # vLLM 0.34
            mine = p.num_gpu_blocks * p.page_bytes * max(lay.rank_layers) / GIB
            out.append(_pct(cid, "KV cache after warmup, GiB", log["warmup_kv_gib"], mine))
    elif _gpu(case) is not None and groups == 1 and "available_kv_cache_gib" not in log:
        out += from_logged_blocks(case, spec, hw, wd, s, cfg, lay)
    return out
