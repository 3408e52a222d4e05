"""Vision encoders of multimodal checkpoints: the tower and the projector into the text model.

A multimodal checkpoint (gemma3, mistral3, llama4, qwen3_5, qwen3_5_moe, kimi_k25) stores a vision encoder
beside its language model; calc.from_hf_config reads it from `vision_config` into
`ModelSpec.vision`. param_count, FLOPs and the KV cache stay the language model's; the encoder
is counted where it takes memory: what the checkpoint stores (calc.weight_bytes, component
"vision") and what vLLM loads on each GPU (calc.serving.sharding).

One function per encoder family lists its tensors as transformers 5.x builds them (numel checked
against the model on the meta device: tests/test_vision.py), each with how vLLM 0.19.0 splits
it under tensor parallelism (`split`): "out" (ColumnParallelLinear / QKVParallelLinear: rows and
their bias split tp-ways), "in" (RowParallelLinear: columns split, its bias whole on each
rank), "rep" (replicated: convs, embeddings, norms, plain nn.Linear / nn.Parameter).
- siglip: SiglipVisionModel without its head (transformers siglip/modeling_siglip.py; vLLM
  siglip.py: QKVParallelLinear, RowParallelLinear out_proj, Column fc1 / Row fc2) and Gemma 3's
  projector (gemma3/modeling_gemma3.py Gemma3MultiModalProjector: mm_input_projection_weight
  h_v x h_t, mm_soft_emb_norm; both plain parameters in vLLM gemma3_mm.py);
- pixtral: PixtralVisionModel (pixtral/modeling_pixtral.py: bias-free patch conv, ln_pre, q/k/v/o,
  SwiGLU, two RMSNorms per layer; vLLM pixtral.py PixtralHF*: QKV / MergedColumn gate_up / Row)
  and Mistral3MultiModalProjector (mistral3/modeling_mistral3.py: RMSNorm, the patch merger
  Linear(d x s^2 -> d), linear_1, linear_2; vLLM mistral3.py: nn.Linear merger, Column linear_1,
  Row linear_2);
- llama4: Llama4VisionModel (llama4/modeling_llama4.py: unfold-conv linear, class embedding,
  positions for (image / patch)^2 + 1 patches, pre / post LayerNorms, biased q/k/v/o and fc1 /
  fc2, the pixel-shuffle adapter MLP fc1 (intermediate -> projector_input) and fc2
  (projector_output -> projector_output), no bias) and Llama4MultiModalProjector (linear_1,
  vision_output_dim -> h_t); vLLM mllama4.py splits every linear (mm_encoder_tp_mode "weights",
  its default), the projector column-wise;
- qwen3_5: Qwen3_5VisionModel (qwen3_5/modeling_qwen3_5.py: Conv3d patch embedding with bias,
  learned positions, blocks of two LayerNorms, biased qkv / proj / fc1 / fc2) and its merger
  (LayerNorm, Linear(d s^2 -> d s^2), Linear(d s^2 -> out_hidden_size)); vLLM qwen3_vl.py
  Qwen3_VisionTransformer: QKV / Row proj, Column fc1 / Row fc2 in blocks and merger.
- moonvit (Kimi K2.5): Kimi_K25VisionModel (kimi_k25/modeling_kimi_k25.py: biased patch Conv2d, a
  learned pos_emb_height x pos_emb_width position grid, blocks of two LayerNorms, biased q/k/v /
  proj and fc1 / fc2, a final LayerNorm) and Kimi_K25MultimodalProjection (LayerNorm, Linear(d k^2
  -> d k^2), Linear(d k^2 -> text hidden), biased; k the merge kernel). vLLM kimi_k25_vit.py
  (QKVParallelLinear wqkv, Row wo, Column fc0 / Row fc1, Replicated projector) builds them with
  no quant_config: no quantization method converts them (`linear` False).
But: vLLM's vision rotary tables (Qwen3, Llama 4) and SGLang's loading are not modelled; a
quantized vision tower is refused (calc/quant/weights.py).
"""

from __future__ import annotations

from typing import Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field

VisionKind = Literal["siglip", "pixtral", "llama4", "qwen3_5", "moonvit"]
Split = Literal["out", "in", "rep"]


class VisionSpec(BaseModel):
    """A multimodal checkpoint's vision tower and projector (vision_config names)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: VisionKind
    hidden_size: int = Field(gt=0)
    intermediate_size: int = Field(gt=0)
    num_hidden_layers: int = Field(gt=0)  # qwen3_5: depth
    num_attention_heads: int = Field(gt=0)  # qwen3_5: num_heads
    num_channels: int = Field(default=3, gt=0)  # qwen3_5: in_channels
    patch_size: int = Field(gt=0)
    # siglip, llama4: the learned positions' grid; pixtral: the largest image side (vLLM's
    # profile image, calc/serving/mm_profile.py)
    image_size: int | None = Field(default=None, gt=0)
    # pixtral: Mistral 3's spatial_merge_size (patch merger); qwen3_5: the merger's
    spatial_merge_size: int | None = Field(default=None, gt=0)
    projector_bias: bool = Field(default=False, strict=True)  # mistral3 multimodal_projector_bias
    feature_layers: int = Field(default=1, gt=0)  # mistral3: len(vision_feature_layer)
    temporal_patch_size: int | None = Field(default=None, gt=0)  # qwen3_5
    num_position_embeddings: int | None = Field(default=None, gt=0)  # qwen3_5, moonvit (h x w)
    out_hidden_size: int | None = Field(default=None, gt=0)  # qwen3_5: the merger's output
    vision_output_dim: int | None = Field(default=None, gt=0)  # llama4
    projector_input_dim: int | None = Field(default=None, gt=0)  # llama4
    projector_output_dim: int | None = Field(default=None, gt=0)  # llama4
    # what one image becomes (vLLM's multimodal profile run, calc/serving/mm_profile.py):
    mm_tokens_per_image: int | None = Field(default=None, gt=0)  # siglip: Gemma 3's wrapper key
    pixel_shuffle_ratio: float | None = Field(default=None, gt=0, le=1)  # llama4 vision_config
    max_patches: int | None = Field(default=None, gt=0)  # llama4: the image processor's tiles


class Tensor(NamedTuple):
    name: str  # module (and .bias) inside the tower or projector
    rows: int
    cols: int
    split: Split  # how vLLM splits it under tensor parallelism
    count: int = 1  # copies (one per encoder layer)
    linear: bool = False  # an nn.Linear's weight (what a quantization method may convert)

    @property
    def numel(self) -> int:
        return self.rows * self.cols * self.count


def _need(v: VisionSpec, *fields: str) -> tuple[int, ...]:
    values = tuple(getattr(v, f) for f in fields)
    missing = [f for f, x in zip(fields, values, strict=True) if x is None]
    if missing:
        raise ValueError(f"vision kind {v.kind!r} needs {', '.join(missing)}: got None")
    return values


def _linear(name: str, n_in: int, n_out: int, split: Split, bias: bool, count: int = 1):
    """A Linear's weight (out x in) and bias; a row-parallel bias is whole on every rank."""
    out = [Tensor(f"{name}.weight", n_out, n_in, split, count, linear=True)]
    if bias:
        out.append(Tensor(f"{name}.bias", n_out, 1, "rep" if split == "in" else split, count))
    return out


def _siglip(v: VisionSpec, text_hidden: int) -> list[Tensor]:
    d, m, n, p = v.hidden_size, v.intermediate_size, v.num_hidden_layers, v.patch_size
    (image,) = _need(v, "image_size")
    pre = "vision_tower.vision_model."
    out = [
        Tensor(pre + "embeddings.patch_embedding.weight", d, v.num_channels * p * p, "rep"),
        Tensor(pre + "embeddings.patch_embedding.bias", d, 1, "rep"),
        Tensor(pre + "embeddings.position_embedding.weight", (image // p) ** 2, d, "rep"),
    ]
    layer = pre + "encoder.layers.*."
    for proj in ("q_proj", "k_proj", "v_proj"):
        out += _linear(layer + "self_attn." + proj, d, d, "out", True, n)
    out += _linear(layer + "self_attn.out_proj", d, d, "in", True, n)
    out += _linear(layer + "mlp.fc1", d, m, "out", True, n)
    out += _linear(layer + "mlp.fc2", m, d, "in", True, n)
    out += [Tensor(layer + "layer_norm*", 2 * 2, d, "rep", n)]  # two LayerNorms, weight + bias
    out += [Tensor(pre + "post_layernorm", 2, d, "rep")]
    out += [
        Tensor("multi_modal_projector.mm_input_projection_weight", d, text_hidden, "rep"),
        Tensor("multi_modal_projector.mm_soft_emb_norm.weight", d, 1, "rep"),
    ]
    return out


def _pixtral(v: VisionSpec, text_hidden: int) -> list[Tensor]:
    d, m, n, p = v.hidden_size, v.intermediate_size, v.num_hidden_layers, v.patch_size
    (s,) = _need(v, "spatial_merge_size")
    pre, b = "vision_tower.", v.projector_bias
    out = [
        Tensor(pre + "patch_conv.weight", d, v.num_channels * p * p, "rep"),
        Tensor(pre + "ln_pre.weight", d, 1, "rep"),
    ]
    layer = pre + "transformer.layers.*."
    for proj in ("q_proj", "k_proj", "v_proj"):
        out += _linear(layer + "attention." + proj, d, d, "out", False, n)
    out += _linear(layer + "attention.o_proj", d, d, "in", False, n)
    out += _linear(layer + "feed_forward.gate_proj", d, m, "out", False, n)
    out += _linear(layer + "feed_forward.up_proj", d, m, "out", False, n)
    out += _linear(layer + "feed_forward.down_proj", m, d, "in", False, n)
    out += [Tensor(layer + "attention_norm / ffn_norm", 2, d, "rep", n)]
    proj = "multi_modal_projector."
    out += [Tensor(proj + "norm.weight", d, 1, "rep")]
    out += _linear(proj + "patch_merger.merging_layer", d * s * s, d, "rep", False)
    out += _linear(proj + "linear_1", d * v.feature_layers, text_hidden, "out", b)
    out += _linear(proj + "linear_2", text_hidden, text_hidden, "in", b)
    return out


def _llama4(v: VisionSpec, text_hidden: int) -> list[Tensor]:
    d, m, n, p = v.hidden_size, v.intermediate_size, v.num_hidden_layers, v.patch_size
    image, out_dim, p_in, p_out = _need(
        v, "image_size", "vision_output_dim", "projector_input_dim", "projector_output_dim"
    )
    inner = v.num_attention_heads * (d // v.num_attention_heads)  # heads x (d // heads)
    pre = "vision_model."
    out = [
        Tensor(pre + "patch_embedding.linear.weight", d, v.num_channels * p * p, "out"),
        Tensor(pre + "class_embedding", d, 1, "rep"),
        Tensor(pre + "positional_embedding_vlm", (image // p) ** 2 + 1, d, "rep"),
        Tensor(pre + "layernorm_pre / layernorm_post", 2 * 2, d, "rep"),
    ]
    layer = pre + "model.layers.*."
    for proj in ("q_proj", "k_proj", "v_proj"):
        out += _linear(layer + "self_attn." + proj, d, inner, "out", True, n)
    out += _linear(layer + "self_attn.o_proj", inner, d, "in", True, n)
    out += _linear(layer + "mlp.fc1", d, m, "out", True, n)
    out += _linear(layer + "mlp.fc2", m, d, "in", True, n)
    out += [Tensor(layer + "input_layernorm / post_attention_layernorm", 2 * 2, d, "rep", n)]
    out += _linear(pre + "vision_adapter.mlp.fc1", m, p_in, "out", False)
    out += _linear(pre + "vision_adapter.mlp.fc2", p_out, p_out, "in", False)
    out += _linear("multi_modal_projector.linear_1", out_dim, text_hidden, "out", False)
    return out


def _qwen3_5(v: VisionSpec, text_hidden: int) -> list[Tensor]:
    d, m, n, p = v.hidden_size, v.intermediate_size, v.num_hidden_layers, v.patch_size
    s, t, positions, out_dim = _need(
        v, "spatial_merge_size", "temporal_patch_size", "num_position_embeddings", "out_hidden_size"
    )
    pre = "model.visual."
    out = [
        Tensor(pre + "patch_embed.proj.weight", d, v.num_channels * t * p * p, "rep"),
        Tensor(pre + "patch_embed.proj.bias", d, 1, "rep"),
        Tensor(pre + "pos_embed.weight", positions, d, "rep"),
    ]
    block = pre + "blocks.*."
    out += _linear(block + "attn.qkv", d, 3 * d, "out", True, n)
    out += _linear(block + "attn.proj", d, d, "in", True, n)
    out += _linear(block + "mlp.linear_fc1", d, m, "out", True, n)
    out += _linear(block + "mlp.linear_fc2", m, d, "in", True, n)
    out += [Tensor(block + "norm1 / norm2", 2 * 2, d, "rep", n)]
    merged = d * s * s
    out += [Tensor(pre + "merger.norm", 2, d, "rep")]
    out += _linear(pre + "merger.linear_fc1", merged, merged, "out", True)
    out += _linear(pre + "merger.linear_fc2", merged, out_dim, "in", True)
    return out


def _moonvit(v: VisionSpec, text_hidden: int) -> list[Tensor]:
    d, m, n, p = v.hidden_size, v.intermediate_size, v.num_hidden_layers, v.patch_size
    s, positions = _need(v, "spatial_merge_size", "num_position_embeddings")

    def lin(name: str, n_in: int, n_out: int, split: Split, count: int = 1) -> list[Tensor]:
        w, b = _linear(name, n_in, n_out, split, True, count)  # vLLM: no quant_config
        return [w._replace(linear=False), b]

    pre = "vision_tower."
    out = [
        Tensor(pre + "patch_embed.proj.weight", d, v.num_channels * p * p, "rep"),
        Tensor(pre + "patch_embed.proj.bias", d, 1, "rep"),
        Tensor(pre + "patch_embed.pos_emb.weight", positions, d, "rep"),
    ]
    block = pre + "encoder.blocks.*."
    out += lin(block + "wqkv", d, 3 * d, "out", n)
    out += lin(block + "wo", d, d, "in", n)
    out += lin(block + "mlp.fc0", d, m, "out", n)
    out += lin(block + "mlp.fc1", m, d, "in", n)
    out += [Tensor(block + "norm0 / norm1", 2 * 2, d, "rep", n)]
    out += [Tensor(pre + "encoder.final_layernorm", 2, d, "rep")]
    merged = d * s * s
    out += [Tensor("mm_projector.pre_norm", 2, d, "rep")]
    out += lin("mm_projector.linear_1", merged, merged, "rep")
    out += lin("mm_projector.linear_2", merged, text_hidden, "rep")
    return out


_FAMILIES = {
    "siglip": _siglip,
    "pixtral": _pixtral,
    "llama4": _llama4,
    "qwen3_5": _qwen3_5,
    "moonvit": _moonvit,
}


def vision_tensors(v: VisionSpec, text_hidden: int) -> list[Tensor]:
    """Every tensor of the encoder and its projector (into a text model of width text_hidden)."""
    return _FAMILIES[v.kind](v, text_hidden)


def vision_params(v: VisionSpec, text_hidden: int) -> int:
    """Values the checkpoint stores for the vision tower and projector."""
    return sum(x.numel for x in vision_tensors(v, text_hidden))


# vLLM's --mm-encoder-tp-mode data replicates the tower's parallel linears (disable_tp) but not
# these (mllama4.py Llama4MultiModalProjector.linear_1: a ColumnParallelLinear in every release)
DATA_MODE_SPLIT = frozenset({"multi_modal_projector.linear_1.weight"})


def vision_rank_params(v: VisionSpec, text_hidden: int, tp: int, data: bool = False) -> int:
    """Values of the encoder on each of vLLM's tp ranks (its default mm_encoder_tp_mode
    "weights"): split tensors 1 / tp each (vLLM's divide() asserts an exact split); `data`:
    mm_encoder_tp_mode "data", every split tensor whole but DATA_MODE_SPLIT's."""
    total = 0
    for x in vision_tensors(v, text_hidden):
        if x.split == "rep" or tp == 1 or (data and x.name not in DATA_MODE_SPLIT):
            total += x.numel
            continue
        dim = x.rows if x.split == "out" else x.cols
        if dim % tp:
            raise ValueError(
                f"'tensor_parallel_size' must divide the vision encoder's {x.name} "
                f"({dim} {'rows' if x.split == 'out' else 'columns'}): got {tp}"
            )
        total += x.numel // tp
    return total
