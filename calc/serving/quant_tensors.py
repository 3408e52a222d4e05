"""The tensors vLLM allocates for one quantized linear layer on one rank, in the order it makes
them, for the schemes written out from its source (vllm 0.19.0 sdist); None for the others
(calc.serving.quant_weights then counts the checkpoint's bytes instead).

compressed-tensors W8A8 (weights and activations 8-bit; compressed_tensors.py _is_static_tensor_w8a8
/ _is_dynamic_token_w8a8 pick CompressedTensorsW8A8Int8 for int, CompressedTensorsW8A8Fp8 for
float, channel or tensor weights):
- schemes/compressed_tensors_w8a8_int8.py create_weights: `weight` int8 [out, in], `weight_scale`
  float32 [out, 1] (CHANNEL) or [len(logical_widths)] (TENSOR); static activations add
  `input_scale` float32 [1] and, asymmetric, `input_zero_point` int8 [1].
  CutlassInt8ScaledMMLinearKernel.process_weights_after_loading (kernels/linear/scaled_mm/
  cutlass.py): the weight transposed as a view (no copy), the scale kept; a TENSOR scale of a
  fused module becomes a channel one (convert_to_channelwise: float32 [out, 1]); asymmetric
  activations add `azp_adj` int32 [1, out] (weight.sum over the input).
- schemes/compressed_tensors_w8a8_fp8.py create_weights: `weight` float8_e4m3fn [out, in],
  `weight_scale` float32 [out, 1] (CHANNEL, utils/fp8_utils.py create_fp8_scale_parameter);
  process_fp8_weight_channel_strategy returns them unchanged on CUDA (no fnuz), the weight is
  transposed as a view and CutlassFP8ScaledMMLinearKernel adds nothing. TENSOR (requantized to
  one scale per fused module) and BLOCK weights and static fp8 activations are not written out
  here (None).
The layer's bias, when the model has one, follows in the model dtype (LinearBase creates it
after quant_method.create_weights; vllm/model_executor/layers/linear.py).

GPTQ (`quant_method: gptq`, 4 / 8-bit symmetric): vLLM serves it through gptq_marlin
("The model is convertible to gptq_marlin during runtime", quantization/gptq_marlin.py
override_quantization_method). GPTQMarlinLinearMethod.create_weights: `qweight` int32
[in / pack, out] (pack = 32 / bits), `g_idx` int32 [in] (always, act order or not), `qzeros` int32
[in / group, out / pack] and `scales` [in / group, out] in the model dtype; with act order, or
channelwise on a row-parallel layer, every rank keeps the full input's groups
(marlin_repeat_scales_on_all_ranks). On Hopper (compute capability 9.0), a group size Machete
supports and no act order on a split input, choose_mp_linear_kernel picks MacheteLinearKernel (the logs say "Using MacheteLinearKernel for
GPTQMarlinLinearMethod"); its process_weights_after_loading (kernels/linear/mixed_precision/
machete.py) replaces qweight with machete_prepack_B of a contiguous copy (same element count:
its fake returns empty_like), keeps scales (already contiguous), leaves qzeros and g_idx
registered, and with act order keeps the argsort permutation (int32 [in]) in the activation
permute closure. GPTQ on other GPUs (Marlin's repack and workspace) is not written out (None).
"""

from __future__ import annotations

from calc.quant.config import QuantScheme

FP32 = 4
INT32 = 4
# compressed_tensors_w8a8_*.py get_min_capability: int8 75, fp8 89 (below, vLLM picks the
# weight-only W8A16 schemes); the fp8 kernel list (kernels/linear/__init__.py) puts Marlin FP8
# (below 8.9 only) and FlashInfer (10.0 and up) before Cutlass, so Cutlass is 8.9 - 9.x's
W8A8_INT8_MIN, W8A8_FP8, FP8_NEXT = (7, 5), (8, 9), (10, 0)
MACHETE_CAPABILITY = (9, 0)  # MacheteLinearKernel.can_implement: is_device_capability(90)
MACHETE_BLOCK = (128, 64)  # machete_utils.MACHETE_PREPACKED_BLOCK_SHAPE: in % 128, out % 64


def _w8a8(s: QuantScheme, out: int, inp: int, widths: int, cc) -> list[int] | None:
    if s.bits != 8 or s.input_bits != 8 or s.strategy not in ("channel", "tensor"):
        return None
    if (
        cc is None
        or cc < W8A8_INT8_MIN
        or (s.layout == "ct-float" and not W8A8_FP8 <= cc < FP8_NEXT)
    ):
        return None  # other schemes / kernels (W8A16 Marlin, FlashInfer on Blackwell)
    if s.layout == "ct-float" and (s.strategy != "channel" or s.input_scale is not None):
        return None  # fp8 TENSOR requantization / static fp8 activations: not written out
    if s.input_scale not in (None, "tensor"):
        return None
    scale = out * FP32 if s.strategy == "channel" else widths * FP32
    tensors = [out * inp, scale]  # int8 / float8_e4m3fn weight: one byte a value
    if s.input_scale == "tensor":
        tensors.append(FP32)  # input_scale [1]
        if not s.input_symmetric:
            tensors.append(1)  # input_zero_point int8 [1]
    return tensors


def w8a8_after_load(s: QuantScheme, out: int, widths: int) -> list[int]:
    """What CutlassInt8ScaledMMLinearKernel.process_weights_after_loading allocates for one
    layer (kept): a fused TENSOR scale made per channel, azp_adj for asymmetric activations."""
    if s.layout != "ct-int":
        return []
    extra = []
    if s.strategy == "tensor" and widths > 1:
        extra.append(out * FP32)
    if not s.input_symmetric:
        extra.append(out * INT32)
    return extra


def machete_ok(
    s: QuantScheme, out: int, inp: int, in_full: int, capability: tuple[int, int] | None
) -> bool:
    """Whether vLLM 0.19.0 serves this GPTQ layer with MacheteLinearKernel (can_implement: no
    act order on a split input, a supported group size, a prepack-aligned shape)."""
    return (
        capability == MACHETE_CAPABILITY
        and not (s.act_order and inp != in_full)
        and s.group_size in (None, 64, 128)  # query_machete_supported_group_sizes, 16-bit
        and inp % MACHETE_BLOCK[0] == 0
        and out % MACHETE_BLOCK[1] == 0
    )


def _gptq(
    s: QuantScheme, out: int, inp: int, in_full: int, row: bool, act_bytes: int
) -> list[int] | None:
    if s.bits not in (4, 8) or not s.symmetric:
        return None
    pack = 32 // s.bits
    g = s.group_size or in_full  # group_size -1: one group over the whole (unsplit) input
    # marlin_repeat_scales_on_all_ranks (quantization/utils/marlin_utils.py): act order, or
    # channelwise and row-parallel, keeps the full input's groups on every rank
    if s.act_order or (s.group_size is None and row):
        groups = in_full // g
    else:
        groups = inp // g
    return [
        inp // pack * out * INT32,  # qweight
        inp * INT32,  # g_idx
        groups * (out // pack) * INT32,  # qzeros
        groups * out * act_bytes,  # scales
    ]


def vllm_linear_tensors(
    s: QuantScheme,
    out: int,
    inp: int,
    *,
    widths: int,
    act_bytes: int,
    in_full: int,
    row_parallel: bool,
    capability: tuple[int, int] | None,
) -> list[int] | None:
    """Bytes of each tensor vLLM's quant method creates for one linear on one rank (`out` x
    `inp` after the split; `widths` the fused shards; `in_full` the unsplit input), bias not
    included; None where the scheme's vLLM path is not written out (module docstring)."""
    if s.layout in ("ct-int", "ct-float"):
        return _w8a8(s, out, inp, widths, capability)
    if s.layout == "gptq":
        if not machete_ok(s, out, inp, in_full, capability):
            return None
        return _gptq(s, out, inp, in_full, row_parallel, act_bytes)
    return None


def machete_kept_perm(s: QuantScheme, inp: int) -> int:
    """The act-order permutation Machete keeps per layer (int32 [in]), 0 without act order."""
    return inp * INT32 if s.layout == "gptq" and s.act_order else 0


def vllm_checkpoint_rank_bytes(
    spec, tp: int, ep: int, split, base: int, ends, rope: int, version, gpu: str, vision: int
) -> tuple[int, ...] | None:
    """What vLLM's "Model loading took" counts on each pipeline rank for a quantized
    checkpoint whose quantized linears all have a written-out vLLM path (vllm_linear_tensors),
    each tensor as torch's caching allocator rounds it (calc.serving.allocator), the
    after-loading steps included; None otherwise (MoE experts, MLA, a quantized LM head, a
    layer-specific skip list, a scheme not written out). `ends`: ((embedding, position table),
    (final norm, LM head)) bytes; `vision`: the encoder's plain bytes."""
    from calc.quant.match import scheme_for
    from calc.quant.weights import LAYER_PREFIX, _layer_specific, _quantizable, stored_name
    from calc.serving.hardware import cuda_capability
    from calc.serving.load_events import LinearAlloc
    from calc.serving.shard_layers import ROW_PARALLEL
    from calc.serving.sharding import _allocated

    q = spec.quantization
    if q is None or spec.is_moe or spec.is_mla or _layer_specific(q) or q.kv_cache is not None:
        return None
    if not spec.tie_word_embeddings:  # a quantized LM head is refused (not written out)
        from calc.linears import Linear

        lm = Linear("lm_head", "lm_head", spec.hidden_size, spec.vocab_size, 1)
        if _quantizable(q, spec, lm) and scheme_for(q, "lm_head") is not None:
            return None
    capability = cuda_capability(gpu)
    prefix = LAYER_PREFIX.get(spec.family, "model.layers.")
    unsupported: list[str] = []

    def quant(key: str, lins: list, out: int, inp: int):
        found = {
            scheme_for(q, f"{prefix}0.{stored_name(spec, x.module)}")
            if _quantizable(q, spec, x)
            else None
            for x in lins
        }
        if len(found) > 1:
            raise ValueError(
                f"'quantization_config' must give every part of vLLM's fused {key} one scheme "
                f"(vLLM refuses mixed ones): got {len(found)}"
            )
        s = found.pop()
        if s is None:
            return None
        row = lins[0].module.rsplit(".", 1)[-1] in ROW_PARALLEL
        t = vllm_linear_tensors(
            s, out, inp, widths=len(lins), act_bytes=base, in_full=lins[0].in_features,
            row_parallel=row, capability=capability,
        )  # fmt: skip
        if t is None:
            unsupported.append(key)
            return LinearAlloc((0,))
        if s.layout == "gptq":
            return LinearAlloc(tuple(t), repacked=(0,), kept=(machete_kept_perm(s, inp),))
        return LinearAlloc(tuple(t), kept=tuple(w8a8_after_load(s, out, len(lins))))

    counted = _allocated(spec, tp, ep, split, base, ends, rope, version, vision, quant=quant)
    return None if unsupported else counted
