"""What vLLM's "Model loading took" holds beside the checkpoint's tensors, and where the vision
tower sits, gathered for calc.serving.plan.prepare: the tower by pipeline stage, flag and release
(calc.serving.vllm_towers), an MTP drafter's weights and Model Runner V2's buffers
(calc.serving.vllm_drafter), LoRA's adapter slots (calc.serving.vllm_lora) and the
--cpu-offload-gb checks (calc.serving.vllm_offload)."""

from __future__ import annotations

from calc.activation import activation_dtype
from calc.dtypes import dtype_bits
from calc.serving.quant_weights import plan_weights
from calc.serving.sharding import rank_layers, vision_rank_bytes
from calc.serving.vllm_drafter import v2_load_buffers, vllm_mtp_drafter_bytes
from calc.serving.vllm_lora import check_vllm_lora, lora_load_bytes
from calc.serving.vllm_offload import check_vllm_offload
from calc.serving.vllm_towers import (
    encoder_data_parallel,
    siglip_position_saving_bytes,
    takes_images,
    tower_stages,
)
from calc.serving.vllm_v2 import vllm_uses_v2_runner
from calc.sharding import QUANTIZED_DTYPES
from calc.vision import vision_rank_params


def vllm_stage_weights(spec, config, weight_dtype, ep: int, part, gpu: str):
    """(each stage's weights, the model dtype, whether each stage builds the vision tower)."""
    tp, pp = config.tensor_parallel_size, config.pipeline_parallel_size
    towers = (True,) * pp
    wspec = spec
    if spec.vision is not None:  # the stages without the tower
        towers = tower_stages(spec, config, vllm_uses_v2_runner(spec, config))
        wspec = spec if any(towers) else spec.model_copy(update={"vision": None})
    if any(towers) and encoder_data_parallel(spec, config):  # the tower whole on each rank
        text = spec.model_copy(update={"vision": None})
        weights, wd = plan_weights(text, config, weight_dtype, tp, pp, ep, part, gpu)
        b = dtype_bits(activation_dtype(wd)) // 8
        quantized = "quantization" if config.quantization else ""
        quantized = quantized or ("weight_dtype" if weight_dtype in QUANTIZED_DTYPES else "")
        vision_rank_bytes(spec, 1, b, quantized)  # the checks of a quantized encoder
        tower = vision_rank_params(spec.vision, spec.hidden_size, tp, data=True) * b
        return tuple(w + tower * t for w, t in zip(weights, towers, strict=True)), wd, towers
    weights, wd = plan_weights(wspec, config, weight_dtype, tp, pp, ep, part, gpu)
    if not all(towers) and any(towers):  # the first stage only: the others' without it
        text = spec.model_copy(update={"vision": None})
        bare = plan_weights(text, config, weight_dtype, tp, pp, ep, part, gpu)[0]
        weights = tuple(w if t else b for w, b, t in zip(weights, bare, towers, strict=True))
    if spec.vision is not None and any(towers):  # SigLIP's split positions up to 0.13
        b = dtype_bits(activation_dtype(wd)) // 8
        saving = siglip_position_saving_bytes(spec, config, b)
        weights = tuple(w - saving * t for w, t in zip(weights, towers, strict=True))
    return weights, wd, towers


def vllm_load_extras(spec, config, weights, wd: str, towers, sp, ep: int, part):
    """The weights with the drafter (pp is 1 with MTP) and LoRA's slots; the offload checks."""
    v, tp, pp = config.version_tuple, config.tensor_parallel_size, config.pipeline_parallel_size
    if sp.draft_layers:  # the MTP drafter's weights, loaded with the target's
        draft = vllm_mtp_drafter_bytes(spec, v, wd, tp, ep, sp.draft_layers, config.quantization)
        if draft is not None:  # and from 0.34 Model Runner V2's buffers in the same load
            seqs, tokens = config.max_num_seqs, config.max_num_batched_tokens
            images = takes_images(spec, config)
            draft += v2_load_buffers(spec, v, wd, sp.draft_layers, sp.tokens, tokens, seqs, images)
            weights = (weights[0] + draft,)
    check_vllm_offload(spec, config, wd, spec.vision is not None and any(towers), sp.draft_layers)
    check_vllm_lora(spec, config)
    if config.enable_lora:  # the adapter slots and punica buffers
        n = rank_layers(spec, pp, part)
        weights = tuple(
            w + lora_load_bytes(spec, config, wd, n[r], r == 0, r == pp - 1)
            for r, w in enumerate(weights)
        )
    return weights
