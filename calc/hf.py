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
from typing import Any, NamedTuple

from pydantic import ValidationError

from calc.datafiles import parse_json_object, read_text
from calc.errors import format_error
from calc.hf_export import to_hf_config
from calc.spec import ModelSpec

__all__ = ["LEGACY_FALCON_TYPES", "SUPPORTED_MODEL_TYPES", "from_hf_config", "to_hf_config"]

SUPPORTED_MODEL_TYPES = (
    "llama",
    "mistral",
    "mixtral",
    "qwen2",
    "gemma",
    "gemma2",
    "falcon",
    "gpt2",
)
LEGACY_FALCON_TYPES = ("RefinedWeb", "RefinedWebModel")  # tiiuae's remote-code configs (2023)

_REQUIRED = object()


class _Defaults(NamedTuple):
    """Defaults of the transformers 5.x config class, for keys absent from config.json."""

    kv_heads: int | None  # None: = num_attention_heads (set in __post_init__)
    head_dim: int | None  # None: hidden_size // num_attention_heads
    tie: bool
    max_pos: int
    window: int | None  # sliding_window
    act: str


_LLAMA_LIKE = {  # transformers/models/<type>/configuration_<type>.py, transformers 5.x
    "llama": _Defaults(None, None, False, 2048, None, "silu"),
    "mistral": _Defaults(8, None, False, 4096 * 32, 4096, "silu"),
    "mixtral": _Defaults(8, None, False, 4096 * 32, None, "silu"),
    "qwen2": _Defaults(32, None, False, 32768, 4096, "silu"),
    "gemma": _Defaults(16, 256, True, 8192, None, "gelu_pytorch_tanh"),
    "gemma2": _Defaults(4, 256, True, 8192, 4096, "gelu_pytorch_tanh"),
}


class _Config:
    """A config.json dict whose getters name the file, the key and the bad value."""

    def __init__(self, data: dict, origin: str, model_type: str):
        self.data, self.origin, self.model_type = data, origin, model_type

    def has(self, key: str) -> bool:
        return key in self.data

    def _get(self, keys: tuple[str, ...], default: Any) -> tuple[str | None, Any]:
        """(key found, its value), or (None, default) when every alias is absent."""
        for key in keys:  # the HF name first, then older aliases (n_head, n_layer, ...)
            if key in self.data:
                return key, self.data[key]
        if default is _REQUIRED:
            raise ValueError(
                f"{self.origin}: missing required key '{keys[0]}' for model_type "
                f"{self.model_type!r}"
            )
        return None, default

    def int(
        self, *keys: str, default: Any = _REQUIRED, nullable: bool = False, low: int = 1
    ) -> int | None:
        key, value = self._get(keys, default)
        if key is None or (value is None and nullable):
            return value
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            what = "a positive integer" if low == 1 else f"an integer >= {low}"
            raise ValueError(f"{self.origin}: '{key}' must be {what}: got {value!r}")
        return value

    def bool(self, key: str, default: bool) -> bool:
        found, value = self._get((key,), default)
        if found is not None and not isinstance(value, bool):
            raise ValueError(f"{self.origin}: '{key}' must be true or false: got {value!r}")
        return value

    def str(self, *keys: str, default: str) -> str:
        key, value = self._get(keys, default)
        return value if isinstance(value, str) else default  # informational only

    def fail(self, key: str, message: str) -> ValueError:
        return ValueError(f"{self.origin}: '{key}' {message}: got {self.data.get(key)!r}")


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
    model_type = data.get("model_type")
    if model_type not in SUPPORTED_MODEL_TYPES + LEGACY_FALCON_TYPES:
        supported = ", ".join(SUPPORTED_MODEL_TYPES + LEGACY_FALCON_TYPES)
        raise ValueError(f"{origin}: 'model_type' must be one of {supported}: got {model_type!r}")
    cfg = _Config(data, origin, model_type)
    if model_type in _LLAMA_LIKE:
        fields = _llama_like(cfg, model_type)
    elif model_type == "gpt2":
        fields = _gpt2(cfg)
    else:
        fields = _falcon(cfg, legacy=model_type in LEGACY_FALCON_TYPES)
    fields["name"] = name or _default_name(data, config)
    fields["family"] = "falcon" if model_type in LEGACY_FALCON_TYPES else model_type
    try:
        return ModelSpec.model_validate(fields)
    except ValidationError as e:
        raise ValueError(f"{origin}: {format_error(e)}") from None


def _default_name(data: dict, config: object) -> str:
    named = data.get("_name_or_path")
    if isinstance(named, str) and named.strip():
        return named.strip()
    if isinstance(config, str | Path):
        p = Path(config)
        return p.parent.name if p.name == "config.json" and p.parent.name else p.stem
    return f"hf-{data['model_type']}"


def _llama_like(cfg: _Config, mt: str) -> dict:
    d = _LLAMA_LIKE[mt]
    attention_bias = (
        cfg.bool("attention_bias", False) if mt in ("llama", "gemma", "gemma2") else False
    )
    fields = {
        "num_hidden_layers": cfg.int("num_hidden_layers"),
        "hidden_size": cfg.int("hidden_size"),
        "num_attention_heads": cfg.int("num_attention_heads"),
        # absent: the class default; null: "= num_attention_heads" (Llama, Qwen2, Mistral and
        # Mixtral __post_init__), "hidden_size // heads" (Llama, Mistral, Mixtral head_dim);
        # Gemma's int-typed fields refuse null, as transformers' strict config does.
        "num_key_value_heads": cfg.int(
            "num_key_value_heads", default=d.kv_heads, nullable=mt not in ("gemma", "gemma2")
        ),
        "head_dim": cfg.int(
            "head_dim", default=d.head_dim, nullable=mt in ("llama", "mistral", "mixtral")
        ),
        "intermediate_size": cfg.int("intermediate_size"),
        "vocab_size": cfg.int("vocab_size"),
        "max_position_embeddings": cfg.int("max_position_embeddings", default=d.max_pos),
        "mlp_kind": "gated",  # gate_proj, up_proj, down_proj (Mixtral: per expert)
        "hidden_act": cfg.str("hidden_activation", "hidden_act", default=d.act),
        "tie_word_embeddings": cfg.bool("tie_word_embeddings", d.tie),
        # Qwen2Attention: q/k/v_proj bias=True, o_proj bias=False, whatever the config says;
        # Mistral/Mixtral/Qwen2 build every other Linear with bias=False.
        "qkv_bias": True if mt == "qwen2" else attention_bias,
        "attn_out_bias": attention_bias,
        "mlp_bias": cfg.bool("mlp_bias", False) if mt == "llama" else False,
        "norm_kind": "rmsnorm",
        "norms_per_block": 4 if mt == "gemma2" else 2,  # Gemma 2: pre/post attn, pre/post MLP
        "position_embedding": "rope",
        "block_kind": "sequential",
    }
    heads = fields["num_attention_heads"]
    if not cfg.has("num_key_value_heads") and d.kv_heads and heads % d.kv_heads:
        raise ValueError(
            f"{cfg.origin}: 'num_key_value_heads' is absent, and {mt}'s default of "
            f"{d.kv_heads} must divide num_attention_heads={heads}"
        )
    fields.update(_sliding(cfg, mt, fields["num_hidden_layers"]))
    if mt == "mixtral":
        experts = cfg.int("num_local_experts", "num_experts", default=8)
        if experts < 2:  # kvcalc reads 1 expert as a dense MLP, but Mixtral still has a router
            raise cfg.fail("num_local_experts", "must be >= 2 for mixtral")
        fields["num_local_experts"] = experts
        fields["num_experts_per_tok"] = cfg.int("num_experts_per_tok", default=2)
    return fields


def _sliding(cfg: _Config, mt: str, n_layers: int) -> dict:
    """sliding_window / sliding_window_pattern as transformers reads them for this model type."""
    if mt in ("llama", "gemma"):
        return {}
    if mt == "qwen2" and not cfg.bool("use_sliding_window", False):
        return {"sliding_window": None}  # Qwen2Config.__post_init__ drops the window
    window = cfg.int("sliding_window", default=_LLAMA_LIKE[mt].window, nullable=True)
    if window is None:
        return {"sliding_window": None}
    if mt in ("mistral", "mixtral"):
        return {"sliding_window": window}  # every layer: their attention reads no layer_types
    if cfg.data.get("layer_types") is not None:
        types, key = cfg.data["layer_types"], "layer_types"
    elif mt == "qwen2":  # Qwen2Config: layers i >= max_window_layers slide
        first = cfg.int("max_window_layers", default=28, low=0)
        types = ["sliding_attention" if i >= first else "full_attention" for i in range(n_layers)]
        key = "max_window_layers"
    else:  # Gemma2Config: even layers (0, 2, ...) slide, odd layers are global
        types = ["sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(n_layers)]
        key = "layer_types"
    return _pattern(cfg, key, types, window, n_layers)


def _pattern(cfg: _Config, key: str, types: object, window: int, n_layers: int) -> dict:
    full_names = ("full_attention", "attention")  # "attention": transformers' legacy name
    ok = isinstance(types, list) and len(types) == n_layers
    ok = ok and all(t in full_names or t == "sliding_attention" for t in types)
    if not ok:
        raise cfg.fail(
            "layer_types",
            f"must list 'full_attention' or 'sliding_attention' for each of the {n_layers} layers",
        )
    sliding = [t == "sliding_attention" for t in types]
    if not any(sliding):
        return {"sliding_window": None}
    if all(sliding):
        return {"sliding_window": window}
    for n in range(2, n_layers + 1):  # every n-th layer (1-based) global: spec.layer_is_sliding
        if sliding == [(i + 1) % n != 0 for i in range(n_layers)]:
            return {"sliding_window": window, "sliding_window_pattern": n}
    raise cfg.fail(
        key,
        "must give sliding attention on every layer, on none, or on all but every N-th layer "
        "(the patterns kvcalc describes)",
    )


def _falcon(cfg: _Config, legacy: bool) -> dict:
    heads = cfg.int("num_attention_heads", "n_head")
    hidden = cfg.int("hidden_size", "n_embed")
    # transformers' falcon/convert_custom_code_checkpoint.py: a legacy config with n_head_kv is
    # the new (Falcon-40B) decoder; without it, the old (Falcon-7B) one.
    new = cfg.bool("new_decoder_architecture", legacy and cfg.has("n_head_kv"))
    kv_heads = cfg.int("num_kv_heads", "n_head_kv", default=None, nullable=True)
    multi_query = cfg.bool("multi_query", True)
    parallel = cfg.bool("parallel_attn", True)
    n_ln = cfg.int("num_ln_in_parallel_attn", default=None, nullable=True)
    if cfg.data.get("head_dim") not in (None, hidden // heads):  # FalconConfig.head_dim: property
        raise cfg.fail("head_dim", "is fixed to hidden_size // num_attention_heads for falcon")
    if new:  # FalconAttention: qkv rows (2 * num_kv_heads + heads) * head_dim
        if not parallel:
            raise cfg.fail("parallel_attn", "must be true with new_decoder_architecture")
        if n_ln not in (None, 1, 2):
            raise cfg.fail("num_ln_in_parallel_attn", "must be 1 or 2")
        groups, block, norms = kv_heads or heads, "parallel", n_ln or 2  # ln_attn + ln_mlp
    else:  # qkv rows: hidden + 2 * head_dim (multi_query) or 3 * hidden
        if not multi_query and kv_heads not in (None, heads):
            raise cfg.fail("num_kv_heads", "must equal num_attention_heads without multi_query")
        if parallel and n_ln not in (None, 1):
            raise cfg.fail("num_ln_in_parallel_attn", "must be 1 without new_decoder_architecture")
        groups = 1 if multi_query else heads
        block, norms = ("parallel", 1) if parallel else ("sequential", 2)
    bias = cfg.bool("bias", False)  # every Linear in the block
    ffn = cfg.int("ffn_hidden_size", default=None, nullable=True)
    return {
        "num_hidden_layers": cfg.int("num_hidden_layers", "n_layer"),
        "hidden_size": hidden,
        "num_attention_heads": heads,
        "num_key_value_heads": groups,
        "intermediate_size": ffn or 4 * hidden,  # FalconConfig: ffn_hidden_size = 4 x hidden
        "vocab_size": cfg.int("vocab_size"),
        "max_position_embeddings": cfg.int("max_position_embeddings", default=2048),
        "mlp_kind": "standard",  # dense_h_to_4h, dense_4h_to_h
        "hidden_act": cfg.str("activation", default="gelu"),
        "tie_word_embeddings": cfg.bool("tie_word_embeddings", True),
        "qkv_bias": bias,
        "attn_out_bias": bias,
        "mlp_bias": bias,
        "norm_kind": "layernorm",
        "norms_per_block": norms,
        "position_embedding": "alibi" if cfg.bool("alibi", False) else "rope",
        "block_kind": block,
    }


def _gpt2(cfg: _Config) -> dict:
    hidden = cfg.int("n_embd", "hidden_size")
    if cfg.bool("add_cross_attention", False):
        raise cfg.fail("add_cross_attention", "must be false (encoder-decoders are not modelled)")
    n_inner = cfg.int("n_inner", default=None, nullable=True)
    return {
        "num_hidden_layers": cfg.int("n_layer", "num_hidden_layers"),
        "hidden_size": hidden,
        "num_attention_heads": cfg.int("n_head", "num_attention_heads"),
        "intermediate_size": n_inner or 4 * hidden,  # GPT2Block: n_inner None -> 4 x n_embd
        "vocab_size": cfg.int("vocab_size"),
        "max_position_embeddings": cfg.int("n_positions", "max_position_embeddings", default=1024),
        "mlp_kind": "standard",  # c_fc, c_proj
        "hidden_act": cfg.str("activation_function", default="gelu_new"),
        "tie_word_embeddings": cfg.bool("tie_word_embeddings", True),
        "qkv_bias": True,  # Conv1D layers all carry a bias
        "attn_out_bias": True,
        "mlp_bias": True,
        "norm_kind": "layernorm",
        "norms_per_block": 2,  # ln_1, ln_2
        "position_embedding": "learned",  # wpe: n_positions x n_embd
        "block_kind": "sequential",
    }
