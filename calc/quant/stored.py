"""What a checkpoint stores beyond calc.param_count of its model, for calc.weight_bytes.

- its multi-token-prediction layers whenever `num_nextn_predict_layers` > 0, whatever
  spec.include_mtp says (checkpoint_spec);
- DeepSeek-V3/R1 and GLM-4.5's MTP layers each store their own copy of the V x h embedding and
  output head (deepseek-ai/DeepSeek-V3 and R1: model.layers.61.embed_tokens and
  .shared_head.head; zai-org/GLM-4.5-Air: model.layers.46.*; the Hub's BF16 counts hold two
  V x h tables more than the model); Qwen3-Next / Qwen3.5's mtp.* layers store none (vLLM
  qwen3_5_mtp.py shares the model's embed_tokens and lm_head; Qwen/Qwen3.5-27B's and
  Qwen3.6-35B-A3B's Hub counts are the model, its mtp.* layer and its vision tower, exactly);
- the fp32 e_score_correction_bias buffer, one value per routed expert of every MoE layer, MTP
  layers included (transformers modeling_deepseek_v3.py / modeling_glm4_moe.py register it as
  an nn.Buffer kept in fp32; the Hub's F32 counts);
- MiniMax-M2 / M2.5 store the router (block_sparse_moe.gate, experts x h a MoE layer) in fp32
  (whn09/neuronx-distributed-inference @ e205de97, examples/minimax_m2_misc/
  model_precision_report.txt: block_sparse_moe.gate.weight F32 in every layer of the fp8
  checkpoint; transformers' MiniMaxM2 keeps the gate out of the fp8 conversion);
- DeepSeek-V3.2 stores every norm in fp32 (its block, latent, final and MTP RMSNorms and the
  indexer's k_norm LayerNorm: deepseek-ai/DeepSeek-V3.2's F32 count is exactly those and the
  e_score_correction_bias values; tests/test_hub_counts.py writes them out);
- a multimodal checkpoint's vision tower and projector (spec.vision, calc/vision.py), in the base
  dtype (google/gemma-3-*-it, medgemma-27b-it, Mistral-Small-3.2, Qwen3.5 / 3.6: their Hub
  counts and index totals are the language model and the encoder exactly).
"""

from __future__ import annotations

from calc.params import _mtp_extras, param_breakdown
from calc.quant.match import scheme_for
from calc.spec import ModelSpec
from calc.vision import vision_params, vision_tensors

MTP_TABLE_COPIES = 2  # embed_tokens and shared_head.head, stored again in each MTP layer
# families whose MTP layers share the model's embedding and LM head (vLLM qwen3_next_mtp.py,
# qwen3_5_mtp.py: mtp.fc, mtp.pre_fc_norm_*, mtp.layers.*, mtp.norm; no mtp.embed_tokens)
SHARED_TABLE_MTP = frozenset({"qwen3_next", "qwen3_5_text", "qwen3_5_moe_text", "qwen3.5"})
E_SCORE_BIAS_BYTES = 4  # transformers DeepseekV3 / Glm4Moe: _keep_in_fp32_modules_strict
FP32_NORM_FAMILIES = frozenset({"deepseek_v32"})  # checkpoints that store their norms in fp32
FP32_ROUTER_FAMILIES = frozenset({"minimax", "minimax_m2"})  # ... their router in fp32
FP32_BYTES = 4


def checkpoint_spec(spec: ModelSpec) -> ModelSpec:
    """The spec of what a checkpoint of this model stores: its MTP layers included whenever it has
    any (`num_nextn_predict_layers` > 0), whatever `include_mtp` says for parameter counts."""
    if not spec.num_nextn_predict_layers or spec.include_mtp:
        return spec
    memo = spec.memo
    if "checkpoint_spec" not in memo:
        memo["checkpoint_spec"] = spec.replace(include_mtp=True)
    return memo["checkpoint_spec"]


def checkpoint_extras(spec: ModelSpec) -> tuple[int, int]:
    """(values in the base dtype, fp32 values) a checkpoint stores beyond param_breakdown of its
    checkpoint_spec: the MTP layers' own embedding and head copies, and the
    e_score_correction_bias buffers (module docstring)."""
    n = spec.num_nextn_predict_layers if spec.include_mtp else 0
    copies = 0 if spec.family in SHARED_TABLE_MTP else MTP_TABLE_COPIES
    tables = n * copies * spec.vocab_size * spec.hidden_size
    buffers = 0
    if spec.e_score_correction_bias and spec.is_moe:
        moe = sum(1 for _, mlp in spec.layer_kinds if mlp == "sparse")
        moe += n if spec.mlp_types[-1] == "sparse" else 0  # an MTP block is like the last layer
        buffers = moe * spec.num_local_experts
    return tables, buffers


def fp32_components(spec: ModelSpec) -> dict[str, int]:
    """Values a checkpoint of `spec` (its checkpoint_spec) stores in fp32 rather than the base
    dtype, by the param_breakdown component that counts them; {} for most families."""
    out = {"router": param_breakdown(spec)["router"]} if spec.family in FP32_ROUTER_FAMILIES else {}
    # the preset family "deepseek" with indexed layers is DeepSeek-V3.2 (presets/models)
    v32_preset = spec.family == "deepseek" and "indexed_attention" in spec.attention_counts
    if spec.family not in FP32_NORM_FAMILIES and not v32_preset:
        return out
    indexed = spec.attention_counts.get("indexed_attention", 0)
    n = spec.num_nextn_predict_layers if spec.include_mtp else 0
    out |= {
        "norm": param_breakdown(spec)["norm"],
        "attn/indexer": indexed * 2 * (spec.index_head_dim or 0),  # k_norm weight and bias
        "mtp": n * _mtp_extras(spec),  # an MTP module's values outside its matrices: norms
    }
    return {c: v for c, v in out.items() if v}


# methods that convert the language model's blocks (or experts) only, never a vision tower
_BLOCKS_ONLY = frozenset({"gptq", "awq", "mxfp4"})


def vision_values(spec: ModelSpec) -> int:
    """The vision tower and projector's values (0 without one), all in the base dtype: refused
    where the quantization config would convert one of their matrices (not modelled)."""
    v, q = spec.vision, spec.quantization
    if v is None:
        return 0
    if q is not None and q.method not in _BLOCKS_ONLY:
        for x in vision_tensors(v, spec.hidden_size):
            module = x.name.removesuffix(".weight").replace("*", "0")
            if x.linear and scheme_for(q, module) is not None:
                raise ValueError(
                    f"'quantization_config' must leave the vision encoder unquantized "
                    f"(kvcalc counts it in the base dtype): got {q.method} quantizing {module}"
                )
    return vision_params(v, spec.hidden_size)
