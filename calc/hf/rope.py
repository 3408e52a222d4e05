"""config.json's rotary fields -> ModelSpec.rope_scaling / partial_rotary_factor /
rope_local_base_freq (calc/rope.py). They change no parameter count but the cos/sin table an
engine keeps beside the weights, so each rope type is honoured or refused by name.

Read as transformers 5.x does: `rope_scaling` (4.x) or `rope_parameters` (5.x: also carrying
rope_theta and partial_rotary_factor); the type under `rope_type`, else the legacy `type`;
"default" (and a default rope with an `mrope_section`, Qwen3.5's multimodal rope, whose table is
the default one's) is no scaling. A per-layer-type `rope_parameters` (Gemma 4) is refused.
`partial_rotary_factor` (also spelled rotary_pct / rotary_emb_fraction, as vLLM's
transformers_utils/config.py reads it) gives rotary_dim = head_dim x factor. Gemma 3's sliding
layers use their own unscaled rope of base rope_local_base_freq (Gemma3TextConfig default 10000;
vLLM 0.19.0 gemma3.py overrides the local layers' rope_parameters with it).
"""

from __future__ import annotations

from pydantic import ValidationError

from calc.hf.reader import _Config
from calc.rope import RopeScaling

ROPE_TYPES = ("linear", "dynamic", "yarn", "llama3", "longrope")
LOCAL_ROPE_TYPES = ("gemma3_text",)  # sliding layers with their own rope (Gemma3TextConfig)


def _number(cfg: _Config, d: dict, key: str, where: str, low: float = 0.0) -> float | None:
    v = d.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int | float) or v <= low:
        raise cfg.fail(where, f"'s {key} must be a number > {low}")
    return float(v)


def rope_fields(cfg: _Config) -> dict:
    """The spec's rotary fields from a text config (empty when it states none)."""
    out: dict = {}
    data = cfg.data
    where = "rope_parameters" if data.get("rope_parameters") is not None else "rope_scaling"
    rs = data.get(where)
    if rs is not None:
        if not isinstance(rs, dict):
            raise cfg.fail(where, "must be an object")
        if (
            "rope_type" not in rs
            and "type" not in rs
            and all(isinstance(v, dict) for v in rs.values())
        ):
            raise cfg.fail(where, "per layer type (Gemma 4) is not modelled")
        rope_type = rs.get("rope_type", rs.get("type", "default"))
        if rope_type not in ("default", *ROPE_TYPES):
            raise cfg.fail(where, f"'s rope_type must be default or one of {', '.join(ROPE_TYPES)}")
        if rope_type != "default":
            scaling = {"rope_type": rope_type}
            factor = _number(cfg, rs, "factor", where)
            if factor is not None:
                scaling["factor"] = factor
            elif rope_type != "longrope":
                raise cfg.fail(where, f"'s factor is required for rope_type {rope_type!r}")
            orig = rs.get("original_max_position_embeddings")
            if orig is None and rope_type == "longrope":
                orig = data.get("original_max_position_embeddings")
            if orig is not None:
                if isinstance(orig, bool) or not isinstance(orig, int) or orig < 1:
                    raise cfg.fail(where, "'s original_max_position_embeddings must be an integer")
                scaling["original_max_position_embeddings"] = orig
            try:
                out["rope_scaling"] = RopeScaling(**scaling)
            except ValidationError as e:
                msg = e.errors()[0]["msg"].removeprefix("Value error, ")
                raise cfg.fail(where, f"is not valid ({msg})") from None
        partial = _number(cfg, rs, "partial_rotary_factor", where)
        if partial is not None:
            out["partial_rotary_factor"] = partial
    for key in ("partial_rotary_factor", "rotary_pct", "rotary_emb_fraction"):
        partial = _number(cfg, data, key, key)
        if partial is not None:
            out["partial_rotary_factor"] = partial
            break
    if cfg.model_type in LOCAL_ROPE_TYPES:
        base = _number(cfg, data, "rope_local_base_freq", "rope_local_base_freq")
        out["rope_local_base_freq"] = base or 10000.0
    return out
