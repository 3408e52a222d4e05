"""vLLM's --cpu-offload-gb: decoder-layer parameters moved to pinned CPU memory and read through
UVA, so "Model loading took" counts the rest.

Read in the PyPI sdists 0.10.0 - 0.34.0 (model_executor/models/utils.py make_layers and, up to
0.16.0, maybe_offload_to_cpu; model_executor/offloader/uva.py UVAOffloader from 0.17.0,
create_offloader in offloader/base.py: cpu_offload_max_bytes = int(cpu_offload_gb x 1024**3)):
make_layers hands each decoder layer to the offloader as it is built; while the bytes moved are
under the budget it moves the layer's parameters in named_parameters order, each checked before
it is moved, so the last crosses the budget (per rank: every worker has its own budget). A
parameter's GPU copy is freed (calc.serving.load_events.offloaded_choice); the embedding, LM
head, norms outside the layers and buffers (the rotary table) stay. From 0.17.0 the offloader
logs "Total CPU offloaded parameters: X GiB" (format_gib). The forward reads the offloaded
weights in place (UVA: no GPU copy), so the profile run does not change.
SGLang's --cpu-offload-gb (an int; read in the 0.5.0rc0 - 0.5.23 wheels: srt/utils.py
maybe_offload_to_cpu, from 0.5.6 srt/utils/offloader.py OffloaderV1, make_layers in
utils/common.py) runs the same loop over the same layers, but copies an offloaded layer's
weights to the GPU for each forward (functional_call; SGLang sizes its pool from
mem_fraction_static, not a profile, so that transient is not planned); from 0.5.21 it keeps MLA's
kv_b_proj resident. No line. Refused there: MLA, quantized models, speculative decoding, and
releases before 0.5.0rc0 (not read).
Refused, not modelled: a quantized checkpoint or --quantization / kvcalc's whole-model dtypes (the
quant methods' after-loading steps on CPU tensors), a vision tower from 0.29.0 (the UVA offloader
also takes towers, built before or after the layers by model), an MTP drafter, and vLLM V0
(its non-UVA offload copies a layer's weights in for each forward).
"""

from __future__ import annotations

from calc.serving.defaults import V1_DEFAULT_FROM

GIB = 2**30
TOTAL_LINE_FROM = (0, 17, 0)
TOWER_OFFLOAD_FROM = (0, 29, 0)
SGLANG_FROM = (0, 5, 0, 0)  # 0.5.0rc0 (an rc reads as its release)


def vllm_offload_bytes(config) -> int:
    """The budget of each rank in bytes (0: no offload)."""
    return int(getattr(config, "cpu_offload_gb", 0) * GIB)


def check_sglang_offload(spec, config, weight_dtype: str) -> None:
    """SGLang's offload that kvcalc does not model (module docstring)."""
    from calc.sharding import QUANTIZED_DTYPES

    if not config.cpu_offload_gb:
        return
    what = None
    if config.version_tuple < SGLANG_FROM:
        what = "SGLang before 0.5.0rc0 (not read)"
    elif spec.is_mla:
        what = "MLA (its kv_b_proj's derived tensors)"
    elif spec.quantization is not None or weight_dtype in QUANTIZED_DTYPES:
        what = "a quantized model"
    elif config.speculative_algorithm is not None:
        what = "speculative decoding"
    if what:
        raise ValueError(f"'cpu_offload_gb' with {what} is not modelled")


def check_vllm_offload(spec, config, weight_dtype: str, towers: bool, draft_layers: int) -> None:
    """The offload kvcalc does not model (module docstring)."""
    from calc.sharding import QUANTIZED_DTYPES

    if not getattr(config, "cpu_offload_gb", 0):
        return
    v = config.version_tuple[:3]
    what = None
    if not config.is_v1 or v < V1_DEFAULT_FROM:
        what = "vLLM V0 (its offload copies the weights in for each forward)"
    elif spec.quantization is not None or config.quantization or weight_dtype in QUANTIZED_DTYPES:
        what = "a quantized model (the quant methods' after-loading steps)"
    elif towers and v >= TOWER_OFFLOAD_FROM:
        what = "a vision tower from 0.29.0 (the offloader takes towers too)"
    elif draft_layers:
        what = "an MTP drafter"
    if what:
        raise ValueError(f"'cpu_offload_gb' with {what} is not modelled")


def offload_line(config, spec, tp: int, ep: int, layers, dtype_bytes: int) -> list[str]:
    """The offloader's line of one rank (0.17.0 on)."""
    from calc.serving.load_events import offloaded_bytes

    budget = vllm_offload_bytes(config)
    if not budget or config.version_tuple[:3] < TOTAL_LINE_FROM:
        return []
    moved = offloaded_bytes(spec, tp, ep, layers, dtype_bytes, budget)
    return [f"Total CPU offloaded parameters: {round(moved / GIB, 2)} GiB"] if moved else []
