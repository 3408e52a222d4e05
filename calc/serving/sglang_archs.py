"""The first SGLang release whose sglang/srt/models has a model's architecture, read in the PyPI
wheels (sglang <version>, every release from 0.4.6.post5 to 0.5.23 and the 0.4.9.post3 - 0.4.10
and 0.5.4.post1 - post3 ones between them). Before it ModelRegistry answers "Model
architectures [...] are not supported for now.", and kvcalc refuses the plan by name:

- Glm4MoeForCausalLM (GLM-4.5 / 4.6, models/glm4_moe.py): from 0.4.9.post5 (absent from the
  0.4.9.post4 wheel);
- Glm4MoeLiteForCausalLM (GLM-4.7-Flash, glm4_moe_lite.py): from 0.5.8 (absent from 0.5.7);
- MiniMaxM2ForCausalLM (MiniMax-M2 / M2.5, minimax_m2.py): from 0.5.4.post1 (absent from 0.5.4);
- KimiK25ForConditionalGeneration (Kimi K2.5): from 0.5.9 (absent from 0.5.8).

Checked elsewhere with their own rules: gpt-oss (calc.serving.sglang_swa), Qwen3-Next and
Qwen3.5 (calc.serving.sglang_hybrid), DeepSeek-V3.2 and GLM-5 (calc.serving.indexed_sglang),
the Mamba-2 hybrids (calc.serving.sglang_ssm).
"""

from __future__ import annotations

from calc.serving.defaults_sglang import release_name, sglang_version
from calc.serving.sglang_page import KIMI_K25_FROM  # KimiK25ForConditionalGeneration's first
from calc.serving.sglang_spec import sglang_arch

GLM4_MOE_FROM = (0, 4, 9, 5)
GLM4_MOE_LITE_FROM = (0, 5, 8, 0)
MINIMAX_M2_FROM = (0, 5, 4, 1)
MINIMAX_FAMILIES = ("minimax", "minimax_m2")


def _architecture(spec) -> tuple[str, tuple[int, ...]] | None:
    """(SGLang's architecture name, its first release) for the models this module checks."""
    if spec.vision is not None and spec.vision.kind == "moonvit":
        return "KimiK25ForConditionalGeneration", KIMI_K25_FROM
    if spec.family in MINIMAX_FAMILIES:
        return "MiniMaxM2ForCausalLM", MINIMAX_M2_FROM
    nsa = "indexed_attention" in spec.attention_counts
    arch = sglang_arch(spec.family, mla=spec.is_mla, nsa=nsa, moe=spec.is_moe, multimodal=False)
    if arch == "glm4_moe":
        return "Glm4MoeForCausalLM", GLM4_MOE_FROM
    if arch == "glm4_moe_lite":
        return "Glm4MoeLiteForCausalLM", GLM4_MOE_LITE_FROM
    return None


def check_architecture(spec, version: str) -> None:
    """ModelRegistry's refusal of an architecture before its first release (module docstring)."""
    known = _architecture(spec)
    if known is None:
        return
    name, since = known
    if sglang_version(version) < since:
        raise ValueError(
            f"'version' must be at least {release_name(since)} for {spec.name!r} in SGLang: got "
            f"{version} ({name} is not in its models: \"Model architectures ['{name}'] are "
            'not supported for now.")'
        )
