"""Rendering a `ValidationReport`: Markdown for people (reports/validation-*.md), JSON for
programs (`to_json`, read back by `from_json` / `load_report`), and rows for the CLI's table.
No torch.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from calc.datafiles import parse_json_object, read_text, validate
from calc.validate.results import Check, ModelValidation, ValidationReport

# reports/validation-cpu.json is ~330 KB for 36 presets; 50x that is still a report, not data
MAX_REPORT_BYTES = 16_000_000

METHOD = """\
Each check builds real PyTorch modules from the model's spec (`calc/validate/`: a classic GQA
attention with separate W_q/W_k/W_v/W_o and a static KV cache, and the block, norm, MLP and
MoE kinds of every preset), measures them, and compares with kvcalc's functions. Per layer
type it builds full, sliding (a ring of `window` slots) or chunked (a ring of `chunk` slots)
GQA, MLA (`mla.py`: latent cache of kv_lora_rank + qk_rope_head_dim per token, absorbed
decode), MLA with DeepSeek-V3.2's lightning indexer (`indexer.py`: the indexer key of
index_head_dim cached per token too; the indexer scores every earlier key, MLA attends to the
index_topk it picks), Gated-DeltaNet linear attention (`deltanet.py`: recurrent delta rule,
conv state of K - 1 columns + nv x dk x dv state), a Mamba-2 mixer (`mamba2.py`: sequential
SSD scan, conv state of conv_kernel - 1 columns + heads x head_dim x ssm_state_size state, the
latter in mamba_ssm_cache_dtype when set) or no mixer (Nemotron-H's MLP / MoE-only blocks: no
cache); MoE layers with shared experts, their gate and router biases (`mlp.py`). DeepSeek-V4
presets are not built here (tests/test_deepseek_v4_reference.py checks them against
transformers' own model). The `kind-*` models are small specs built with `from_hf_config`
from config dicts of the families no preset has yet (`calc/validate/kinds.py`):

| check | measured with | kvcalc function | model size |
|---|---|---|---|
| params | `numel` per component of the module's parameters | `param_breakdown`, `param_count` | full size, on the `meta` device (no memory) |
| flops | `torch.utils.flop_counter.FlopCounterMode` over prefill forwards (full mask) and one decode step | `forward_flops_prefill(causal=False)`, `forward_flops_decode` | full width on `meta` (CPU SDPA kernels count 0 FLOPs; `meta` runs SDPA as its math decomposition, which counts) |
| kv_cache | bytes of the cache tensors after a prefill and decoded tokens (CUDA: `memory_allocated()` and requested-bytes deltas across the cache allocation); the cached decode must reproduce a full forward's logits | `kv_cache_bytes` at the same depth | reduced depth, full attention geometry (query heads, KV heads, head_dim) |
| peak_memory | one attention layer forward, materialized (matmul, softmax, matmul) and fused (`F.scaled_dot_product_attention`); CPU: `torch.profiler` allocation events, CUDA: `max_memory_allocated()` | `score_matrix_bytes`, `fused_attention_bytes`, plus the O(n) activations alive at each step (`calc/validate/peak_model.py`) | 4 query heads at the model's head_dim (MHA/GQA/MQA kept) on CPU |

Notes on reading the tables:
- *cached decode = full forward*: the logits of the last decoded token, computed from the cache,
  against a forward over all tokens without one: the cache holds exactly the keys each token
  may see (a sliding layer: the last `window`), so the cache bytes are sufficient, not just
  allocated.
- Sliding-window models get a second KV run that goes past the window. Where a prefill of the
  model's own window at full attention width is over the device's FLOP budget (on CPU: every
  preset's 4096-token window), that run uses a 32-token window, and its row says so.
- *growth exponent*: the least-squares slope of log(peak) on log(n) over the measured lengths.
  Fused attention holds no n x n tensor, so its peak grows as n (exponent 1). Materialized
  attention holds two (scores and softmax weights); next to them sit O(n) activations of
  n x head_dim per head, so the exponent rises toward 2 as n grows past head_dim (about 1.6 to
  1.9 at the CPU's 256-2048 tokens; the predicted exponent is fitted the same way).
- The peak breakdown (which tensors are alive at the peak step) is listed under each model for
  the longest length of each path. MLA models have no peak rows (the peak model is GQA's).
- MLA decodes against its latent cache in the absorbed form; its decode-step FLOPs are
  predicted with `attention_flops_decode(mla_absorbed=True)` (the row's note gives what
  `forward_flops_decode`, naive per-head, says). Linear-attention and Mamba-2 models count
  FLOPs at n = 16 and 128 over one layer pattern (the recurrence runs token by token).
- Mamba-2: kvcalc counts 5 FLOPs per SSM state element and token; the decay multiply (1 of
  them) is elementwise and FlopCounterMode does not see it, so those rows compare kvcalc's
  count less it ("less Mamba decay" in the label; the note gives kvcalc's own figure).
- Models with several layer kinds get cache rows per kind; linear-attention and Mamba-2 layers
  also a row against `state_bytes_per_sequence` (engine convention: conv_kernel - 1 conv
  columns, as vLLM / SGLang allocate; transformers keeps conv_kernel).
"""


def _num(x: int | float) -> str:
    if isinstance(x, int):
        return f"{x:,}"
    return f"{x:.4g}"


def _error(c: Check) -> str:
    if c.tolerance_kind == "absolute" or c.rel_error is None:
        return f"{c.error:+.3g}" if isinstance(c.error, float) else f"{c.error:+,}"
    if c.error == 0:
        return "0"
    return f"{c.error:+,} ({c.rel_error:+.3%})"


def _tolerance(c: Check) -> str:
    if c.tolerance_kind == "absolute":
        return f"±{c.tolerance:g}"
    return "exact" if c.tolerance == 0 else f"±{c.tolerance:.0%}"


def check_row(c: Check) -> list[str]:
    """compared | unit | predicted | measured | error | tolerance | verdict."""
    verdict = "pass" if c.passed else "FAIL"
    return [c.label, c.unit, _num(c.predicted), _num(c.measured), _error(c), _tolerance(c), verdict]


HEADERS = ["check", "compared", "unit", "predicted", "measured", "error", "tolerance", "verdict"]


def _md_table(headers: list[str], rows: list[list[str]]) -> list[str]:
    esc = [[str(c).replace("|", "\\|") for c in r] for r in rows]
    out = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    out += ["| " + " | ".join(r) + " |" for r in esc]
    return out


def summary_rows(report: ValidationReport) -> list[list[str]]:
    rows = []
    for s in report.summary():
        rel = s["max_rel_error"]
        absolute = s["max_abs_error_of_absolute_checks"]
        rows.append(
            [
                s["check"],
                str(s["comparisons"]),
                str(s["failed"]),
                "-" if rel is None else f"{rel:.3%}",
                "-" if absolute is None else f"{absolute:.3g}",
                report.tolerances.get(s["check"], ""),
            ]
        )
    return rows


def model_markdown(m: ModelValidation) -> list[str]:
    lines = [f"### {m.model}: {'pass' if m.passed else 'FAIL'} ({m.seconds:.1f} s)", ""]
    lines += [f"- {k}: {v}" for k, v in m.setup.items()]
    lines.append("")
    lines += _md_table(HEADERS, [[c.check, *check_row(c)] for c in m.checks])
    notes = [f"- {c.check} / {c.label}: {c.note}" for c in m.checks if c.note]
    if notes:
        lines += ["", *notes]
    return lines + [""]


def to_markdown(report: ValidationReport, command: str | None = None) -> str:
    failed = [m.model for m in report.models if not m.passed]
    verdict = "all checks pass" if not failed else f"FAILED: {', '.join(failed)}"
    lines = [
        f"# kvcalc measured validation: {report.device_name}",
        "",
        f"{len(report.models)} models, {verdict}. torch {report.torch_version}, device "
        f"`{report.device}`, {report.seconds:.0f} s in all.",
    ]
    if command:
        lines += ["", f"Generated by `{command}`."]
    lines += ["", "## Method", "", METHOD, "## Tolerances", ""]
    lines += [f"- {k}: {v}" for k, v in report.tolerances.items()]
    lines += ["", "## Summary", ""]
    lines += _md_table(
        ["check", "comparisons", "failed", "max relative error", "max absolute error", "tolerance"],
        summary_rows(report),
    )
    lines += ["", "Absolute errors are those of the growth exponents and logit differences.", ""]
    lines += ["## Models", ""]
    for m in report.models:
        lines += model_markdown(m)
    return "\n".join(lines).rstrip() + "\n"


def to_json(report: ValidationReport) -> str:
    data = report.model_dump(mode="json")
    data["summary"] = report.summary()
    return json.dumps(data, indent=2) + "\n"


# --- reading back -----------------------------------------------------------------------------


def _pop_derived(data: dict, cls) -> dict:
    """The computed fields to_json writes (model_dump includes them), taken out of `data`:
    extra="forbid" refuses them on the way back, and they are checked against the inputs."""
    names = [*cls.model_computed_fields, *(["summary"] if cls is ValidationReport else [])]
    return {k: data.pop(k) for k in names if k in data}


def _dicts(data: dict, key: str) -> list[tuple[int, dict]]:
    """(index, item) of the dicts in the list data[key]; anything else is pydantic's to name."""
    items = data.get(key)
    if not isinstance(items, list):
        return []
    return [(i, x) for i, x in enumerate(items) if isinstance(x, dict)]


def _same(a, b) -> bool:
    """Equal JSON values; a bool equals only a bool; NaN equals NaN (a logit check can be NaN)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


def _check_derived(written: dict, obj, where: str, origin: str) -> None:
    actual = obj.model_dump(mode="json", include=set(type(obj).model_computed_fields))
    if "summary" in written:
        actual["summary"] = json.loads(json.dumps(obj.summary()))
    for key, value in written.items():
        if not _same(value, actual[key]):
            raise ValueError(
                f"{origin}: '{where}{key}' must equal what the report's inputs give "
                f"({actual[key]!r}): got {value!r}"
            )


def from_json(text: str, origin: str = "<report>") -> ValidationReport:
    """The report `to_json` wrote: from_json(to_json(r)) == r.

    The derived values to_json adds (error, rel_error, passed, summary) may be left out; where
    present they must equal what predicted, measured and tolerance give, so an edited verdict
    does not load.
    """
    data = parse_json_object(text, origin, MAX_REPORT_BYTES)
    written = {(): _pop_derived(data, ValidationReport)}  # (model index, check index) -> values
    for i, m in _dicts(data, "models"):
        written[(i,)] = _pop_derived(m, ModelValidation)
        for j, c in _dicts(m, "checks"):
            written[(i, j)] = _pop_derived(c, Check)
    report = validate(ValidationReport, data, origin, "report")
    for at, values in written.items():
        obj, where = report, ""
        if len(at) >= 1:
            obj, where = report.models[at[0]], f"models.{at[0]}."
        if len(at) == 2:
            obj, where = obj.checks[at[1]], f"{where}checks.{at[1]}."
        _check_derived(values, obj, where, origin)
    return report


def load_report(path: str | Path) -> ValidationReport:
    """Read a reports/validation-<device>.json; the size is checked before reading."""
    return from_json(read_text(path, MAX_REPORT_BYTES, origin=Path(path).name), Path(path).name)
