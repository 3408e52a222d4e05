"""Engine-exact serving plans: what vLLM or SGLang will allocate, computed the way they compute it.

Modules: hardware (GPU presets), engine (EngineConfig, per-engine vocabulary and version
defaults), sharding (per-rank weights as the engines load them), memory (KV page sizes, blocks,
token pools), latency (roofline figures for a plan), plan (engine_plan and grids of plans),
logs (reading start-up logs), calibrate (learning the non-KV terms from a log).

Names are loaded on first use (PEP 562), so `import calc.hardware` does not pull in the
planner.
"""

from __future__ import annotations

import importlib

_LAZY = {
    "EngineConfig": "calc.serving.engine",
    "engine_config": "calc.serving.engine",
    "EnginePlan": "calc.serving.plan",
    "engine_plan": "calc.serving.plan",
    "engine_plan_grid": "calc.serving.grid",
    "parse_log": "calc.serving.logs",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'calc.serving' has no attribute {name!r}")
