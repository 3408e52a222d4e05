"""vLLM's speculative decoding (--speculative-config '{"method": ..., "num_speculative_tokens": k}')
as far as it changes the KV cache, read in the PyPI sdists 0.9.2 - 0.33.0.

Methods kvcalc plans (VllmConfig.speculative_method):
- "mtp": the model's own multi-token-prediction layers as the drafter. "mtp" is a method from
  0.11.0 (config/speculative.py SpeculativeMethod; MTP_MODEL_TYPES "deepseek_mtp", "glm4_moe_mtp",
  "qwen3_next_mtp", "mimo_mtp", "ernie_mtp", "longcat_flash_mtp" are accepted and turned into
  "mtp": "method `...` is deprecated and replaced with mtp."); 0.9.2 - 0.10.2 knew only the
  model-specific names, which kvcalc does not plan (refused). hf_config_override maps a target
  to its MTP drafter: DeepSeek-V3 / R1 (deepseek_v3) and GLM-4.5 / 4.6 (Glm4MoeForCausalLM) and
  Qwen3-Next from 0.11.0, GLM-4.7-Flash (Glm4MoeLiteForCausalLM) from 0.16.0, Qwen3.5 (qwen3_5,
  qwen3_5_moe) from 0.17.0. The drafter builds
  num_nextn_predict_layers layers (deepseek_mtp.py, glm4_moe_mtp.py; qwen3_next_mtp.py
  getattr(config, "num_nextn_predict_layers", 1): Qwen3-Next's config.json has none, so 1;
  qwen3_5_mtp.py mtp_num_hidden_layers), each a decoder layer with the target's attention
  (DeepSeek: MLA; the others: full attention of the same heads). Their Attention layers join the
  static forward context, so get_kv_cache_spec lists them with the target's and the KV-cache
  groups count them: one more layer in a one-group model, one more full-attention layer in a
  hybrid one (kv_cache_utils: "A typical example is gpt-oss-20b + eagle, with 12 sw + 13 full").
  num_speculative_tokens defaults to n_predict (the MTP layers) and must be divisible by it when
  larger ("num_speculative_tokens:k must be divisible by n_predict=n").
- "ngram": no drafter, no layers.
Linear layers see k itself (any method): the conv state keeps k more columns
(MambaStateShapeCalculator: conv_kernel - 1 + num_spec; the Gated DeltaNet from 0.10.2, Qwen3-
Next's first release; Mamba-2 from 0.17.0, absent from 0.16.0's mamba_mixer2.py), and a request
holds k more state pages (MambaSpec.num_speculative_blocks in max_memory_usage_bytes: "align"
2 + k, "none" 1 + k from 0.16.0; "all" cdiv(L, block) + k from 0.22.0; before 0.16.0 the
pages do not count k).
The MTP drafter's weights are in the "Model loading took" figure (calc.serving.vllm_drafter).
Not modelled, refused by name: EAGLE / EAGLE3 / draft models / Medusa (a separate draft
checkpoint), MTP on DeepSeek-V3.2 / GLM-5 (indexed layers) or DeepSeek-V4, with pipeline
parallelism or decode context parallelism; and from first principles the speculative profile
run (the drafter's dummy run, the rejection sampler's dummy run) and the drafter's buffers, so
a speculative plan is made from a given available memory.
"""

from __future__ import annotations

import json
from typing import NamedTuple

MTP_FROM = (0, 11, 0)
MTP_ALIASES = (
    "deepseek_mtp",
    "mimo_mtp",
    "glm4_moe_mtp",
    "ernie_mtp",
    "qwen3_next_mtp",
    "longcat_flash_mtp",
)
METHODS = ("mtp", "ngram", *MTP_ALIASES)
DRAFT_CHECKPOINT = ("eagle", "eagle3", "draft_model", "medusa", "mlp_speculator")
# hf_config_override's MTP drafters, by kvcalc's model family (a preset's name, or the
# config.json's model_type for an imported model): the first release read with it
MTP_FAMILIES = {
    "deepseek": (0, 11, 0),
    "deepseek_v3": (0, 11, 0),
    "glm": (0, 11, 0),
    "glm4_moe": (0, 11, 0),
    "qwen3-next": (0, 11, 0),
    "qwen3_next": (0, 11, 0),
    "glm4_moe_lite": (0, 16, 0),  # Glm4MoeLiteForCausalLM (GLM-4.7-Flash): absent in 0.14.1
    "qwen3.5": (0, 17, 0),
    "qwen3_5_text": (0, 17, 0),
    "qwen3_5_moe_text": (0, 17, 0),
}
GDN_CONV_FROM = (0, 10, 2)
MAMBA2_CONV_FROM = (0, 17, 0)
SPEC_PAGES_FROM = (0, 16, 0)
ALL_MODE_SPEC_PAGES_FROM = (0, 22, 0)


class Speculation(NamedTuple):
    """What speculative decoding changes in vLLM's KV cache (calc.serving.layout)."""

    draft_layers: int = 0  # MTP attention layers added to the groups
    tokens: int = 0  # num_speculative_tokens
    own_group: bool = False  # the drafter's layers a KV-cache spec of their own (vllm_draft_group)


def _release(v: tuple[int, ...]) -> str:
    return ".".join(str(x) for x in v[:3])


def mtp_layers(spec) -> int:
    """The layers vLLM's MTP drafter builds for this model (module docstring)."""
    if spec.family in ("qwen3-next", "qwen3_next"):
        return spec.num_nextn_predict_layers or 1
    return spec.num_nextn_predict_layers


def check_method(method: str | None, tokens: int | None) -> None:
    """The model-independent checks of the two settings (VllmConfig, whose field already
    refuses a num_speculative_tokens under 1)."""
    if method is None:
        if tokens is not None:
            raise ValueError(
                "'num_speculative_tokens' needs a 'speculative_method' (vLLM: "
                "num_speculative_tokens was provided but without speculative model.)"
            )
        return
    if method in DRAFT_CHECKPOINT:
        raise ValueError(
            f"'speculative_method' {method!r} needs a separate draft checkpoint, whose layers "
            "kvcalc does not model yet: use 'mtp' or 'ngram'"
        )
    if method not in METHODS:
        raise ValueError(
            f"'speculative_method' must be one of {', '.join(METHODS)}: got {method!r}"
        )
    if method == "ngram" and tokens is None:
        raise ValueError("'num_speculative_tokens' is required with the ngram method")


def speculation(
    spec,
    version: tuple[int, ...],
    method: str | None,
    tokens: int | None,
    *,
    pp: int = 1,
    dcp: int = 1,
) -> Speculation:
    """The speculative settings (VllmConfig's, already through check_method) checked against
    `spec` in vLLM `version` (module docstring)."""
    if method is None:
        return Speculation()
    if method == "ngram":
        return Speculation(0, tokens)
    return Speculation(*_mtp(spec, version, method, tokens, pp, dcp))


def _mtp(spec, version, method, tokens, pp, dcp) -> tuple[int, int]:
    if version < MTP_FROM:
        raise ValueError(
            f"'speculative_method' {method!r}: kvcalc plans vLLM's MTP from {_release(MTP_FROM)} "
            f"(the 'mtp' method; earlier releases' model-specific names are not read): got "
            f"{_release(version)}"
        )
    if spec.is_v4 or "indexed_attention" in spec.attention_counts:
        raise ValueError(
            f"'speculative_method' mtp on {spec.name!r}: the MTP layer of an indexed-attention "
            "model (DeepSeek-V3.2 / V4, GLM-5) is not modelled yet"
        )
    since = MTP_FAMILIES.get(spec.family)
    n = mtp_layers(spec)
    if since is None or n == 0:
        raise ValueError(
            f"'speculative_method' mtp needs a model with MTP layers that vLLM drafts with "
            f"(DeepSeek-V3 / R1, GLM-4.5, Qwen3-Next, Qwen3.5): {spec.name!r} has "
            f"num_nextn_predict_layers={spec.num_nextn_predict_layers}, family {spec.family!r}"
        )
    if version < since:
        raise ValueError(
            f"'version' must be at least {_release(since)} for vLLM's MTP drafter of "
            f"{spec.name!r} (SpeculativeConfig.hf_config_override): got {_release(version)}"
        )
    if pp > 1 or dcp > 1:
        name = "pipeline_parallel_size" if pp > 1 else "decode_context_parallel_size"
        raise ValueError(f"'{name}' > 1 with MTP speculative decoding is not modelled yet")
    k = n if tokens is None else tokens
    if k > n and k % n:
        raise ValueError(f"num_speculative_tokens:{k} must be divisible by n_predict={n}")
    return n, k


def conv_columns(spec, version: tuple[int, ...], tokens: int) -> int:
    """Extra conv-state columns a linear layer keeps for `tokens` speculative tokens."""
    if not tokens:
        return 0
    if "mamba" in spec.attention_counts:
        return tokens if version >= MAMBA2_CONV_FROM else 0
    return tokens if version >= GDN_CONV_FROM else 0


def state_spec_pages(mode: str, version: tuple[int, ...], tokens: int) -> int:
    """Extra state pages a request holds for `tokens` (MambaSpec.max_memory_usage_bytes)."""
    if not tokens or version < SPEC_PAGES_FROM:
        return 0
    if mode == "all" and version < ALL_MODE_SPEC_PAGES_FROM:
        return 0
    return tokens


def padding_lines(lay) -> list[str]:
    """vLLM's warning for each layer kind padded to whole KV-cache groups (kv_cache_utils /
    kv_cache_planning, the same words 0.9.2 - 0.33.0); kept here since a drafter's layer is the
    usual cause of it with MTP."""
    return [
        f"Add {pad} padding layers, may waste at most {100 * pad / n:.2f}% KV cache memory"
        for pad, n in lay.padding
    ]


CONFIG_KEYS = ("method", "num_speculative_tokens")
CONFIG_MAX_CHARS = 1000


def parse_speculative_config(text: str) -> tuple[str | None, int | None]:
    """`--speculative-config` as vLLM takes it, a JSON object; kvcalc reads its method and
    num_speculative_tokens and refuses any other key by name (a draft `model`, its tensor
    parallel size, ... change what kvcalc does not model)."""
    if len(text) > CONFIG_MAX_CHARS:
        raise ValueError(
            f"'speculative_config' must be at most {CONFIG_MAX_CHARS} characters: got {len(text)}"
        )
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if not isinstance(data, dict):
        raise ValueError(
            "'speculative_config' must be a JSON object like "
            '{"method": "mtp", "num_speculative_tokens": 1}: got ' + repr(text[:80])
        )
    for key in data:
        if key not in CONFIG_KEYS:
            raise ValueError(
                f"'speculative_config.{key}' is not modelled (kvcalc reads "
                f"{' and '.join(CONFIG_KEYS)}): got {str(data[key])[:40]!r}"
            )
    method, tokens = data.get("method"), data.get("num_speculative_tokens")
    if method is not None and not isinstance(method, str):
        raise ValueError(f"'speculative_config.method' must be a string: got {method!r}")
    if tokens is not None and (isinstance(tokens, bool) or not isinstance(tokens, int)):
        raise ValueError(
            f"'speculative_config.num_speculative_tokens' must be an integer: got {tokens!r}"
        )
    if method is None:
        raise ValueError("'speculative_config.method' is required (kvcalc plans mtp and ngram)")
    return method, tokens


def check_derivable(method: str | None) -> None:
    """A plan that derives the available memory is refused with speculative decoding (the
    module docstring): plan.engine_plan and grid.engine_plan_grid."""
    if not method:
        return
    what = "the drafter's dummy run and " if method != "ngram" else ""
    raise ValueError(
        f"'speculative_method' {method!r}: vLLM's speculative profile run ({what}the rejection "
        "sampler's) is not modelled, so the available memory cannot be derived: plan from a "
        "logged 'available_kv_gib' (--available-kv-gib)"
    )


def method_lines(method: str | None) -> list[str]:
    """SpeculativeConfig.__post_init__'s warning for a model-specific MTP name (0.11.0 on)."""
    if method in MTP_ALIASES:
        return [f"method `{method}` is deprecated and replaced with mtp."]
    return []


def canonical_method(method: str | None) -> str | None:
    """The method vLLM runs: "mtp" for its aliases."""
    return "mtp" if method in MTP_ALIASES else method
