"""The model spec: one frozen, validated description of a decoder-only transformer.

Field names follow Hugging Face `config.json` where one exists (`num_hidden_layers`,
`num_key_value_heads`, `head_dim`, `layer_types`, `kv_lora_rank`, ...), so a preset can be
diffed against its source. Everything the calculators need is here; nothing else is read.

What it describes: dense and mixture-of-experts decoders whose layers may differ (calc/layout.py:
full / sliding / chunked / linear-attention layers, dense or MoE MLPs, in runs); MHA / GQA / MQA
attention with an explicit `head_dim` (Gemma: 256 != 3072 / 16) or MLA (DeepSeek: a low-rank
latent KV); q/k norms, attention sinks, an output gate; Gated-DeltaNet linear attention (Qwen3-Next);
DeepSeek-V4's compressed attention
(sliding window + CSA / HCA compressed entries, grouped output projection, hyper-connections);
2-matrix or gated 3-matrix MLPs, shared experts, router biases; LayerNorm or RMSNorm, 1, 2 or 4
norms per block; learned / RoPE / ALiBi positions; sequential or parallel blocks; DeepSeek's
multi-token-prediction layer (counted only with `include_mtp`).
A multimodal checkpoint's vision encoder (`vision`, calc/vision.py) is counted only in what the
checkpoint stores and what an engine loads, not in the language model's parameters.
But: no encoder-decoders, no per-layer head counts, no cross-layer KV sharing.

>>> spec = ModelSpec(name="toy", num_hidden_layers=2, hidden_size=64, num_attention_heads=8,
...                  num_key_value_heads=2, intermediate_size=128, vocab_size=100)
>>> spec.head_dim, spec.kv_groups, spec.attention_kind
(8, 4, 'GQA')
"""

from __future__ import annotations

import datetime as _dt
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from calc import layout
from calc.layout import ATTENTION_TYPES, MLP_TYPES, Run
from calc.limits import check_limit
from calc.quant.config import QuantConfig, dtype_name
from calc.rope import RopeScaling
from calc.spec_derived import DerivedShape
from calc.vision import VisionSpec

MlpKind = Literal[
    "standard", "gated"
]  # standard: up+down (GELU); gated: gate+up+down (SwiGLU/GeGLU)
NormKind = Literal["layernorm", "layernorm_nobias", "rmsnorm"]
PositionKind = Literal["learned", "rope", "alibi", "none"]  # none: NoPE (Nemotron-H, Granite-H)
BlockKind = Literal["sequential", "parallel"]
QKNorm = Literal["none", "head", "full"]  # head: RMSNorm(head_dim) (Qwen3); full: over H*d (OLMo 2)

_INT_FIELDS = (
    "num_hidden_layers", "hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim_",
    "intermediate_size", "vocab_size", "max_position_embeddings", "norms_per_block",
    "sliding_window", "sliding_window_pattern", "attention_chunk_size", "num_local_experts",
    "num_experts_per_tok", "moe_intermediate_size", "shared_expert_intermediate_size",
    "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim",
    "linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim",
    "linear_value_head_dim", "linear_conv_kernel_dim", "num_nextn_predict_layers",
    "index_n_heads", "index_head_dim", "index_topk", "o_groups", "o_lora_rank", "hc_mult",
    "compress_rate_csa", "compress_rate_hca", "num_hash_layers",
    "mamba_num_heads", "mamba_head_dim", "ssm_state_size", "n_groups", "conv_kernel",
    "mamba_chunk_size",
)  # fmt: skip


_CACHED = ("attention_types", "mlp_types", "layer_groups", "attention_counts", "memo")


class ModelSpec(DerivedShape, BaseModel):
    """A decoder-only transformer, exactly enough to count its parameters, FLOPs and KV cache."""

    # populate_by_name: `model_validate(spec.model_dump())` round-trips (the dump says head_dim_)
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    # --- metadata -----------------------------------------------------------------------------
    name: str = Field(min_length=1)
    family: str = "custom"
    display_name: str | None = None
    source: tuple[str, ...] = ()  # URLs of the config.json / paper the numbers come from
    retrieved: _dt.date | None = None  # when `source` was read
    published_params: str | None = None  # as published: "540.35B", "7B", "8,538,074,112"
    published_active_params: str | None = None  # MoE: active per token, as published
    notes: str | None = None  # resolutions of inconsistent sources, conventions

    # --- shape (HF config.json names) ---------------------------------------------------------
    num_hidden_layers: int = Field(gt=0)
    hidden_size: int = Field(gt=0)
    num_attention_heads: int = Field(gt=0)
    num_key_value_heads: int | None = Field(default=None, gt=0)  # None: MHA (= query heads)
    head_dim_: int | None = Field(default=None, gt=0, alias="head_dim")  # None: hidden / heads
    intermediate_size: int = Field(gt=0)  # a dense MLP's width (and each expert's, by default)
    vocab_size: int = Field(gt=0)
    max_position_embeddings: int = Field(default=2048, gt=0)  # context length

    # --- architecture -------------------------------------------------------------------------
    mlp_kind: MlpKind = "gated"
    hidden_act: str = "silu"  # informational: silu (SwiGLU), gelu (GeGLU / GPT), ...
    # strict: 1, "yes" or "false" are not booleans (lax pydantic would read "false" as False)
    tie_word_embeddings: bool = Field(default=False, strict=True)
    qkv_bias: bool = Field(default=False, strict=True)
    attn_out_bias: bool = Field(default=False, strict=True)
    mlp_bias: bool = Field(default=False, strict=True)  # dense and shared-expert MLPs
    expert_bias: bool = Field(default=False, strict=True)  # routed experts (gpt-oss)
    norm_kind: NormKind = "rmsnorm"
    norms_per_block: Literal[1, 2, 4] = 2  # 1: parallel (PaLM, Falcon-7B); 4: Gemma 2 sandwich
    final_norm: bool = Field(default=True, strict=True)
    position_embedding: PositionKind = "rope"
    block_kind: BlockKind = "sequential"
    qk_norm: QKNorm = "none"
    attention_sinks: bool = Field(default=False, strict=True)  # gpt-oss: one learned logit/head
    attn_output_gate: bool = Field(default=False, strict=True)  # Qwen3-Next: q_proj emits 2x
    fused_qkv: bool = Field(default=False, strict=True)  # Phi-3 qkv_proj: same count, one matrix
    fused_gate_up: bool = Field(default=False, strict=True)  # Phi-3 gate_up_proj

    # --- rotary tables (calc/rope.py): no parameter count, the table an engine keeps ----------
    rope_scaling: RopeScaling | None = None  # config.json rope_scaling; None: the default rope
    partial_rotary_factor: float = Field(default=1.0, gt=0, le=1)  # rotary_dim = head_dim x it
    # Gemma 3: the sliding layers' own unscaled rope (a second table in vLLM)
    rope_local_base_freq: float | None = Field(default=None, gt=0)

    # --- which layer is which (calc/layout.py) ------------------------------------------------
    # explicit runs ([name, count], or one name per layer) or one period repeated to the depth
    layer_types: tuple[Run, ...] | None = None
    layer_pattern: tuple[Run, ...] | None = None
    mlp_layer_types: tuple[Run, ...] | None = None
    mlp_layer_pattern: tuple[Run, ...] | None = None
    sliding_window: int | None = Field(default=None, gt=0)  # tokens a sliding layer attends to
    # without layer_types: None: every layer slides (Mistral). N: every N-th layer (1-based) is
    # global, the rest slide (Gemma 2: N=2, layer 0 slides; same meaning as Gemma 3's field)
    sliding_window_pattern: int | None = Field(default=None, gt=0)
    attention_chunk_size: int | None = Field(default=None, gt=0)  # Llama 4 chunked layers

    # --- MLA: multi-head latent attention (DeepSeek-V2/V3 names) ------------------------------
    q_lora_rank: int | None = Field(default=None, gt=0)  # None: a full-rank q_proj (V2-Lite)
    kv_lora_rank: int | None = Field(default=None, gt=0)  # set: every softmax layer is MLA
    qk_nope_head_dim: int | None = Field(default=None, gt=0)
    qk_rope_head_dim: int | None = Field(default=None, gt=0)
    v_head_dim: int | None = Field(default=None, gt=0)

    # --- DeepSeek Sparse Attention (DeepSeek-V3.2's lightning indexer; config.json names) -----
    # set: every softmax layer is "indexed_attention" (MLA whose queries see the index_topk keys
    # the indexer picks; the indexer caches one key of index_head_dim per token and layer)
    index_n_heads: int | None = Field(default=None, gt=0)
    index_head_dim: int | None = Field(default=None, gt=0)
    index_topk: int | None = Field(default=None, gt=0)

    # --- DeepSeek-V4 (config.json names; calc/layers_v4.py, calc/linears_v4.py) ---------------
    # set o_groups: every layer is V4 attention: shared-KV MQA (one kv_proj head of head_dim, read
    # as K and V; its last qk_rope_head_dim channels rotated), low-rank queries (q_lora_rank),
    # a grouped output projection (o_groups x o_lora_rank, then o_b_proj), per-head sinks, a
    # sliding window; CSA / HCA layers add compressed entries (one per compress rate tokens)
    o_groups: int | None = Field(default=None, gt=0)
    o_lora_rank: int | None = Field(default=None, gt=0)
    compress_rate_csa: int | None = Field(default=None, gt=0)  # compressed_sparse_attention
    compress_rate_hca: int | None = Field(default=None, gt=0)  # heavily_compressed_attention
    hc_mult: int | None = Field(default=None, gt=0)  # hyper-connection streams (mHC)
    # the first num_hash_layers MoE layers route by a tid2eid table (vocab x top-k, int64 in the
    # checkpoint) instead of a scored router with an fp32 bias: the stored bytes differ
    num_hash_layers: int | None = Field(default=None, ge=0)

    # --- linear attention: Gated DeltaNet (Qwen3-Next names) ----------------------------------
    linear_num_key_heads: int | None = Field(default=None, gt=0)
    linear_num_value_heads: int | None = Field(default=None, gt=0)
    linear_key_head_dim: int | None = Field(default=None, gt=0)
    linear_value_head_dim: int | None = Field(default=None, gt=0)
    linear_conv_kernel_dim: int | None = Field(default=None, gt=0)

    # --- Mamba-2 mixer layers ("mamba"; Nemotron-H names; calc/layers_ssm.py) -----------------
    # in_proj: h -> 2 x (heads x head_dim) + 2 x n_groups x ssm_state_size + heads (gate z, x, B,
    # C, dt); a depthwise conv1d over x, B, C; dt_bias, A_log, D per head; a gated RMSNorm over
    # heads x head_dim; out_proj back to h. State per sequence: conv (kernel - 1 columns) + SSM
    mamba_num_heads: int | None = Field(default=None, gt=0)
    mamba_head_dim: int | None = Field(default=None, gt=0)
    ssm_state_size: int | None = Field(default=None, gt=0)  # Granite: mamba_d_state
    n_groups: int | None = Field(default=None, gt=0)  # B / C groups (Granite: mamba_n_groups)
    conv_kernel: int | None = Field(default=None, gt=0)  # Granite: mamba_d_conv
    use_conv_bias: bool = Field(default=True, strict=True)  # Granite: mamba_conv_bias
    mamba_proj_bias: bool = Field(default=False, strict=True)  # in_proj / out_proj biases
    mamba_chunk_size: int | None = Field(default=None, gt=0)  # the chunked scan (no count)
    # the SSM state's dtype when it differs from the cache dtype (Nemotron-H: "float32")
    mamba_ssm_cache_dtype: str | None = None

    # --- mixture of experts (Mixtral / Qwen / DeepSeek names) ---------------------------------
    num_local_experts: int = Field(default=1, gt=0)  # 1: dense
    num_experts_per_tok: int = Field(default=1, gt=0)
    moe_intermediate_size: int | None = Field(default=None, gt=0)  # None: intermediate_size
    shared_expert_intermediate_size: int | None = Field(default=None, gt=0)  # all shared, summed
    shared_expert_gate: bool = Field(default=False, strict=True)  # Qwen2-MoE: sigmoid gate h->1
    router_bias: bool = Field(default=False, strict=True)  # gpt-oss router Linear(h, E, bias)
    # DeepSeek-V3 / GLM-4.5: an fp32 *buffer* of E per MoE layer (stored, not a parameter)
    e_score_correction_bias: bool = Field(default=False, strict=True)

    # --- multi-token prediction (DeepSeek-V3: num_nextn_predict_layers) -----------------------
    num_nextn_predict_layers: int = Field(default=0, ge=0)
    include_mtp: bool = Field(default=False, strict=True)  # count them (checkpoint) or not (paper)

    # --- quantized checkpoint (calc.quant; from config.json's quantization_config) ------------
    quantization: QuantConfig | None = None  # None: every tensor in one dtype
    checkpoint_dtype: str | None = None  # config.json torch_dtype: what weight_bytes stores

    # --- a multimodal checkpoint's vision tower + projector (calc/vision.py) -----------------
    # not in param_count / FLOPs / KV (the language model's); in weight_bytes and engine weights
    vision: VisionSpec | None = None

    # --- checks -------------------------------------------------------------------------------
    @field_validator(*_INT_FIELDS, mode="before")
    @classmethod
    def _not_bool(cls, value: object, info: ValidationInfo) -> object:
        # lax pydantic reads True as 1: a bool here is a mistake (a flag in the wrong field)
        if isinstance(value, bool):
            raise ValueError("must be an integer, not a bool")
        return check_limit(info.field_name, value)  # calc/limits.py: 10^12 layers is a typo

    @field_validator("layer_types", "layer_pattern", mode="before")
    @classmethod
    def _attention_runs(cls, value: object, info) -> object:
        return layout.normalize_runs(value, ATTENTION_TYPES, info.field_name)

    @field_validator("mlp_layer_types", "mlp_layer_pattern", mode="before")
    @classmethod
    def _mlp_runs(cls, value: object, info) -> object:
        return layout.normalize_runs(value, MLP_TYPES, info.field_name)

    @field_validator("checkpoint_dtype", mode="before")
    @classmethod
    def _checkpoint_dtype(cls, value: object) -> object:
        return None if value is None else dtype_name(value, "checkpoint_dtype")

    @field_validator("mamba_ssm_cache_dtype", mode="before")
    @classmethod
    def _ssm_dtype(cls, value: object) -> object:
        return None if value is None else dtype_name(value, "mamba_ssm_cache_dtype")

    @model_validator(mode="after")
    def _check(self) -> ModelSpec:
        from calc.spec_checks import check_spec

        check_spec(self)
        return self

    def model_copy(self, *, update=None, deep: bool = False) -> ModelSpec:
        """pydantic's copy, without the derived values cached for the original (an update may
        change what they derive from)."""
        copy = super().model_copy(update=update, deep=deep)
        for key in _CACHED:
            copy.__dict__.pop(key, None)
        return copy

    def replace(self, **changes) -> ModelSpec:
        """A validated copy with some fields changed (`model_copy` skips validation)."""
        if "head_dim_" in changes:  # the field's own name: the dump below uses the alias
            changes["head_dim"] = changes.pop("head_dim_")
        data = self.model_dump(by_alias=True)
        data.update(changes)
        return ModelSpec.model_validate(data)
