"""Hugging Face `config.json` <-> ModelSpec, for the decoder families transformers implements.

`from_hf_config` reads the config.json (a path or a dict) of a llama, mistral, mixtral, qwen2,
gemma, gemma2, falcon (also the legacy remote-code "RefinedWeb" / "RefinedWebModel" configs) or
gpt2 model and returns the spec of the model transformers builds from it. A key the file leaves
out takes the default of that model type's transformers 5.x config class: MistralConfig has 8 KV
heads and a 4096-token window, GemmaConfig a head_dim of 256, Falcon and GPT-2 tie their LM head.
`to_hf_config` (calc/hf_export.py, re-exported here) goes back: the config dict of a
transformers model with the spec's parameter and KV-cache shapes, or a ValueError saying why no
supported model_type fits (PaLM: parallel block with a gated MLP).

But: RoPE scaling, dropout, soft-capping, token ids and dtypes are ignored (they change no count);
per-layer window patterns other than "every N-th layer is global" are refused, not approximated.

>>> spec = from_hf_config({"model_type": "mistral", "hidden_size": 64, "num_hidden_layers": 2,
...     "num_attention_heads": 8, "intermediate_size": 128, "vocab_size": 100})
>>> spec.num_key_value_heads, spec.sliding_window   # MistralConfig defaults
(8, 4096)
"""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from calc.datafiles import parse_json_object, read_text
from calc.errors import format_error
from calc.hf.classic import _LLAMA_LIKE, _falcon, _gpt2, _llama_like
from calc.hf.deepseek_v4 import deepseek_v4_fields, deepseek_v4_rope
from calc.hf.hybrid_ssm import HYBRID_SSM_TYPES, hybrid_ssm_fields
from calc.hf.modern import MODERN_TYPES, modern_fields
from calc.hf.reader import _Config
from calc.hf.rope import rope_fields
from calc.hf.vision import vision_fields
from calc.hf_export import to_hf_config
from calc.quant import QuantConfig, parse_quantization_config
from calc.quant.config import dtype_name
from calc.spec import ModelSpec

__all__ = [
    "LEGACY_FALCON_TYPES",
    "SUPPORTED_MODEL_TYPES",
    "WRAPPER_TYPES",
    "from_hf_config",
    "to_hf_config",
]

SUPPORTED_MODEL_TYPES = (
    "llama",
    "mistral",
    "mixtral",
    "qwen2",
    "gemma",
    "gemma2",
    "falcon",
    "gpt2",
    *MODERN_TYPES,
    "deepseek_v4",  # calc/hf/deepseek_v4.py
    *HYBRID_SSM_TYPES,  # calc/hf/hybrid_ssm.py: nemotron_h, granitemoehybrid
)
# multimodal checkpoints: the language model is described by their `text_config`, the vision
# encoder by `vision_config` (calc/hf/vision.py; counted in weight_bytes, not in param_count)
WRAPPER_TYPES = {
    "gemma3": "gemma3_text",
    "llama4": "llama4_text",
    "qwen3_5": "qwen3_5_text",
    "qwen3_5_moe": "qwen3_5_moe_text",
    "mistral3": "mistral",
    "kimi_k25": "kimi_k2",  # Kimi K2.5: DeepSeek-V3's text model + MoonViT
}
# remote-code model types that transformers builds with a native class
ALIAS_TYPES = {"kimi_k2": "deepseek_v3"}  # Kimi K2: DeepseekV3ForCausalLM
LEGACY_FALCON_TYPES = ("RefinedWeb", "RefinedWebModel")  # tiiuae's remote-code configs (2023)

# --- config.json -> ModelSpec ------------------------------------------------------------------


def from_hf_config(
    config: str | Path | dict, *, name: str | None = None, origin: str | None = None
) -> ModelSpec:
    """The spec of the model transformers builds from this config.json (a path or a dict).

    The spec is named `name`, else the config's `_name_or_path`, else after the file
    (`llama-2-70b/config.json` -> "llama-2-70b"). Errors about a dict name `origin` (e.g. the
    uploaded file it was read from), else "<config dict>".
    """
    if isinstance(config, dict):
        data, origin = config, origin or "<config dict>"
    elif isinstance(config, str | Path):
        origin = str(config)
        data = parse_json_object(read_text(config), origin=origin)
    else:
        raise ValueError(
            f"'config' must be a path to a config.json or a dict: got {type(config).__name__}"
        )
    outer, model_type = data, data.get("model_type")
    vision = None
    if model_type in WRAPPER_TYPES:
        vision = vision_fields(data, origin)  # calc/hf/vision.py: the encoder + projector
        text = data.get("text_config")
        if not isinstance(text, dict):
            raise ValueError(
                f"{origin}: 'text_config' must be an object for model_type {model_type!r}"
            )
        data = {"model_type": WRAPPER_TYPES[model_type], **text}
        data["model_type"] = text.get("model_type") or WRAPPER_TYPES[model_type]
        if "tie_word_embeddings" not in text and "tie_word_embeddings" in outer:
            data["tie_word_embeddings"] = outer["tie_word_embeddings"]
        model_type = data["model_type"]
    if model_type in ALIAS_TYPES:
        data = {**data, "model_type": ALIAS_TYPES[model_type]}
        model_type = data["model_type"]
    if model_type not in SUPPORTED_MODEL_TYPES + LEGACY_FALCON_TYPES:
        supported = ", ".join(SUPPORTED_MODEL_TYPES + LEGACY_FALCON_TYPES + tuple(WRAPPER_TYPES))
        raise ValueError(f"{origin}: 'model_type' must be one of {supported}: got {model_type!r}")
    cfg = _Config(data, origin, model_type)
    if model_type == "deepseek_v4":
        fields = deepseek_v4_fields(cfg)
    elif model_type in HYBRID_SSM_TYPES:
        fields = hybrid_ssm_fields(cfg, model_type)
    elif model_type in MODERN_TYPES:
        fields = modern_fields(cfg, model_type)
    elif model_type in _LLAMA_LIKE:
        fields = _llama_like(cfg, model_type)
    elif model_type == "gpt2":
        fields = _gpt2(cfg)
    else:
        fields = _falcon(cfg, legacy=model_type in LEGACY_FALCON_TYPES)
    if model_type == "deepseek_v4":
        fields |= deepseek_v4_rope(cfg, fields)
    elif fields.get("position_embedding", "rope") == "rope":
        fields |= rope_fields(cfg)  # calc/hf/rope.py: the cos/sin table's size
    fields["name"] = name or _default_name(outer, config)
    fields["family"] = "falcon" if model_type in LEGACY_FALCON_TYPES else model_type
    if vision is not None:
        fields["vision"] = vision
    quantization = _quantization(outer, data, origin)  # issue 11: quantized checkpoints
    if quantization is not None:
        fields["quantization"] = quantization
    stored = _stored_dtype(outer, data)
    if stored is not None and stored != "auto":  # what the checkpoint's tensors are stored in
        try:
            fields["checkpoint_dtype"] = dtype_name(stored, "torch_dtype")
        except ValueError as e:
            raise ValueError(f"{origin}: {e}") from None
    try:
        return ModelSpec.model_validate(fields)
    except ValidationError as e:
        raise ValueError(f"{origin}: {format_error(e)}") from None


def _quantization(outer: dict, text: dict, origin: str) -> QuantConfig | None:
    """The checkpoint's `quantization_config` (also inside a wrapper's text_config), read with
    its base dtype (torch_dtype / dtype: what unquantized tensors are stored in); None if absent."""
    qc = outer.get("quantization_config", text.get("quantization_config"))
    if qc is None:
        return None
    experts = text.get("expert_dtype")  # DeepseekV4Config.__post_init__ moves it into its
    if text.get("model_type") == "deepseek_v4" and experts is not None and isinstance(qc, dict):
        qc = {"expert_dtype": experts, **qc}  # quantization_config (V4.1 ships it there)
    dtype = _stored_dtype(outer, text) or "bfloat16"
    return parse_quantization_config(qc, dtype=dtype, origin=f"{origin}: quantization_config")


def _stored_dtype(outer: dict, text: dict) -> object:
    """torch_dtype (transformers 4) or dtype (5), outside a wrapper first; None if absent."""
    dtypes = (
        outer.get("torch_dtype"),
        outer.get("dtype"),
        text.get("torch_dtype"),
        text.get("dtype"),
    )
    return next((d for d in dtypes if d is not None), None)


def _default_name(data: dict, config: object) -> str:
    named = data.get("_name_or_path")
    if isinstance(named, str) and named.strip():
        return named.strip()
    if isinstance(config, str | Path):
        p = Path(config)
        return p.parent.name if p.name == "config.json" and p.parent.name else p.stem
    return f"hf-{data['model_type']}"
