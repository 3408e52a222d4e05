"""Weights per rank as vLLM and SGLang load them: the layer split, vocab padding, rotary cache.

Built on calc.sharding (tensor-parallel split of each weight matrix, KV-head replication,
weight dtypes); what the engines add:
- pipeline split: vLLM's get_pp_indices (vllm/distributed/utils.py) gives each of the pp ranks
  L // pp layers and one more to each of the L % pp ranks just before the last (the last rank
  already holds the LM head); VLLM_PP_LAYER_PARTITION overrides it ("16,32"). The first rank
  holds the embedding, the last the final norm and the LM head (a tied head is a second copy
  there when pp > 1).
- vocab padding: VocabParallelEmbedding / ParallelLMHead pad the vocabulary to a multiple of
  64 rows (DEFAULT_VOCAB_PADDING_SIZE) before splitting it tp-ways.
- the rotary cos/sin cache: get_rope builds a [rows, rotary_dim] table in the model's dtype on
  every rank, one per distinct rope (rotary_tables: rows from the rope scaling, Gemma 3's local
  table, DeepSeek-V3.2's indexer); "Model loading took" counts it. Llama-3.1-8B in bf16: 8,030,261,248 x 2 B
  + 131072 x 128 x 2 B = 14.9888 GiB, the figure vLLM logs (vllm#10517). vLLM's gpt-oss asks
  for float32 (gpt_oss.py OAIAttention: get_rope(..., dtype=torch.float32), vllm-project/vllm@
  0025d69bcf08bb1b135103167f0bbc82b9af6e69): 131072 x 64 x 4 B; one table, get_rope caches it.
- a multimodal checkpoint's vision tower and projector (spec.vision): vLLM builds them on every
  rank, split as calc/vision.py lists (mm_encoder_tp_mode "weights", the default), in the model
  dtype; calc.serving.vllm_towers takes them off the ranks that skip them (--language-model-only,
  --limit-mm-per-prompt 0, pipeline stages after the first from 0.33) and applies
  --mm-encoder-tp-mode data and SigLIP's split positions up to 0.13. SGLang builds them too (gemma3_mm.py SiglipVisionModel); its split is taken as
  vLLM's: exact at tp 1, not checked against an SGLang log at tp > 1.
Expert parallelism: with enable_expert_parallel vLLM splits the experts ep = tp x dp ways
whole (each rank holds E / ep experts, unsplit) instead of each expert tp-ways; SGLang over
ep = tp_size, and its DP attention splits other modules over other groups (a Split:
calc.serving.sglang_parallel).
"""

from __future__ import annotations

import functools
from math import ceil

from calc.dtypes import dtype_bits
from calc.params import norm_params
from calc.serving.shard_layers import (
    QUANTIZABLE,
    Split,
    attention_tp,
    check_engine_parallel,
    layer_rank_bytes,
    vocab_tp,
)
from calc.sharding import (
    DEFAULT_GROUP_SIZE,
    DEFAULT_SCALE_BYTES,
    QUANTIZED_DTYPES,
    UNQUANTIZED_DTYPE,
    quantized_bytes,
)
from calc.spec import ModelSpec
from calc.vision import vision_rank_params

VOCAB_PADDING = 64  # vllm/model_executor/layers/vocab_parallel_embedding.py


def pp_layer_split(num_layers: int, pp: int, partition: tuple[int, ...] | None = None):
    """Layers on each pipeline rank, in order (vLLM get_pp_indices)."""
    if partition is not None:
        if len(partition) != pp or sum(partition) != num_layers:
            raise ValueError(
                f"'pp_layer_partition' must have {pp} parts adding up to {num_layers} layers: "
                f"got {','.join(map(str, partition))}"
            )
        return tuple(partition)
    if pp > num_layers:
        raise ValueError(f"'pp' must be at most num_hidden_layers={num_layers}: got {pp}")
    parts = [num_layers // pp] * pp
    for i in range(2, num_layers % pp + 2):
        parts[-i] += 1
    return tuple(parts)


def padded_vocab(vocab_size: int) -> int:
    return -(-vocab_size // VOCAB_PADDING) * VOCAB_PADDING


def rotary_tables(spec: ModelSpec) -> tuple[tuple[int, int], ...]:
    """(rows, rotary_dim) of each cos/sin table vLLM 0.19.0 builds: get_rope caches one per
    distinct (head_size, rotary_dim, max_position, style, rope_parameters, dtype) key
    (vllm/model_executor/layers/rotary_embedding/__init__.py _ROPE_DICT), so a model whose
    layers share one rope holds one table. Rows per rope type: RopeScaling.table_rows (P =
    max_position_embeddings, what the models pass); rotary_dim = qk_rope_head_dim for MLA
    (deepseek_v2.py get_rope(qk_rope_head_dim, ...)), else head_dim x partial_rotary_factor
    (int(), get_rope). A second table where the model asks for a second key:
    - Gemma 3's sliding layers (gemma3.py: rope_type "default", rope_theta rope_local_base_freq),
      P rows: its global rope is scaled or of another base (1e6 vs 1e4 in every Gemma 3 config);
    - DeepSeek-V3.2's indexer (deepseek_v2.py indexer_rope_emb, is_neox_style the opposite of
      the attention's), the same rows.
    None for learned or ALiBi positions."""
    if spec.position_embedding != "rope":
        return ()
    P = spec.max_position_embeddings
    if spec.is_mla:
        dim = spec.qk_rope_head_dim
    else:
        dim = int(spec.head_dim * spec.partial_rotary_factor)
    rows = spec.rope_scaling.table_rows(P) if spec.rope_scaling is not None else P
    tables = [(rows, dim)]
    sliding = spec.attention_counts.get("sliding_attention", 0)
    if spec.rope_local_base_freq is not None and sliding:
        tables.append((P, dim))
    if spec.index_topk is not None:
        tables.append((rows, dim))
    return tuple(tables)


def rotary_cache_elements(spec: ModelSpec) -> int:
    """cos/sin table entries of every table (rotary_tables)."""
    return sum(rows * dim for rows, dim in rotary_tables(spec))


FP32_ROPE_FAMILIES = frozenset({"gpt_oss", "gpt-oss"})  # vLLM gpt_oss.py: dtype=torch.float32


def rotary_cache_bytes(spec: ModelSpec, model_dtype_bytes: int, engine: str = "vllm") -> int:
    """The cos/sin table's bytes: the model dtype, float32 for vLLM's gpt-oss."""
    fp32 = engine == "vllm" and spec.family in FP32_ROPE_FAMILIES
    return rotary_cache_elements(spec) * (4 if fp32 else model_dtype_bytes)


def vision_rank_bytes(spec: ModelSpec, tp: int, dtype_bytes: int, quantized: str = "") -> int:
    """The vision encoder's bytes on each rank (0 without one), in the model dtype; refused when
    the weights are quantized at load time (`quantized`: the option that would do it), as vLLM's
    online quantization converts the encoder's parallel linears too (not modelled)."""
    if spec.vision is None:
        return 0
    if quantized:
        raise ValueError(
            f"'{quantized}' would quantize the vision encoder too, which kvcalc does not model: "
            f"got a {spec.vision.kind} encoder"
        )
    from calc.quant.stored import vision_values

    vision_values(spec)  # refuses a quantized checkpoint's quantized encoder
    return vision_rank_params(spec.vision, spec.hidden_size, tp) * dtype_bytes


def mla_kv_b_copy_bytes(spec: ModelSpec, tp: int, act_bytes: int) -> int:
    """The bf16 copy of a quantized kv_b_proj one MLA layer keeps on each rank (0 without MLA).
    MLAAttention.process_weights_after_loading (0.19.0 sdist, model_executor/layers/attention/
    mla_attention.py; the same in v1/attention/backends/mla/common.py before) takes
    get_and_maybe_dequant_weights(kv_b_proj, out_dtype=model dtype) and keeps W_UK_T and W_UV
    as views of it. Unquantized, that is the weight itself (`weight.to(out_dtype)` of the same
    dtype: no copy); quantized (fp8's scaled_dequantize, or the identity-matmul fallback), a new
    kv_lora_rank x (heads / tp) x (qk_nope_head_dim + v_head_dim) tensor in the model dtype."""
    if not spec.is_mla:
        return 0
    heads = spec.num_attention_heads // tp
    return spec.kv_lora_rank * heads * (spec.qk_nope_head_dim + spec.v_head_dim) * act_bytes


def mla_layers_per_rank(spec: ModelSpec, pp: int, partition=None) -> tuple[int, ...]:
    """MLA layers on each pipeline rank (every softmax layer of an MLA model)."""
    if not spec.is_mla:
        return (0,) * pp
    mla = [k[0] != "linear_attention" for k in spec.layer_kinds]
    out, start = [], 0
    for n in pp_layer_split(spec.num_hidden_layers, pp, partition):
        out.append(sum(mla[start : start + n]))
        start += n
    return tuple(out)


def _bytes(n: int, key: str, wd: str, q: tuple[int, int, int]) -> int:
    if wd in QUANTIZED_DTYPES and key in QUANTIZABLE:
        return quantized_bytes(n, wd, *q)
    return quantized_bytes(n, UNQUANTIZED_DTYPE if wd in QUANTIZED_DTYPES else wd)


@functools.lru_cache(maxsize=4096)
def rank_weight_bytes(
    spec: ModelSpec,
    tp: int = 1,
    pp: int = 1,
    weight_dtype: str = "bf16",
    ep: int = 1,
    partition: tuple[int, ...] | None = None,
    group_size: int = DEFAULT_GROUP_SIZE,
    scale_bytes: int = DEFAULT_SCALE_BYTES,
    zero_point_bits: int = 0,
    engine: str = "vllm",
    vllm_version: tuple[int, ...] | None = None,
    split: Split | None = None,
    offload: int = 0,
) -> tuple[int, ...]:
    """Weight bytes the engine loads on each pipeline rank (every TP rank of a stage alike);
    each layer as calc.serving.shard_layers splits it. With `vllm_version` (engine "vllm", an
    unquantized weight_dtype): what vLLM's "Model loading took" counts, each tensor as torch's
    caching allocator rounds it (calc.serving.allocator); engine "sglang" with a version: the
    segments SGLang's "mem usage" sees. `split`: SGLang's other TP groups (DP attention:
    calc.serving.sglang_parallel), None: every module over tp. `offload`: vLLM's
    --cpu-offload-gb in bytes, each rank's first parameters moved to the CPU (calc.serving.
    vllm_offload)."""
    tp, pp = check_engine_parallel(spec, tp, pp)
    q = (group_size, scale_bytes, zero_point_bits)
    h = spec.hidden_size
    if ep > 1 and spec.is_moe and spec.num_local_experts % ep:
        raise ValueError(
            f"'expert parallel size' (tp x dp = {ep}) must divide num_local_experts="
            f"{spec.num_local_experts}"
        )
    price = lambda n, comp: _bytes(n, comp, weight_dtype, q)  # noqa: E731
    layers = layer_rank_bytes(spec, tp, ep, price, split)
    final_norm = norm_params(spec) if spec.final_norm else 0
    embed_tp, head_tp = vocab_tp(tp, split)
    table = _bytes(ceil(padded_vocab(spec.vocab_size) / embed_tp) * h, "embed", weight_dtype, q)
    head = _bytes(ceil(padded_vocab(spec.vocab_size) / head_tp) * h, "embed", weight_dtype, q)
    pos = 0
    if spec.position_embedding == "learned":  # replicated
        pos = _bytes(spec.max_position_embeddings * h, "pos_embed", weight_dtype, q)
    rope = rotary_cache_bytes(spec, dtype_bits(_act_dtype(weight_dtype)) // 8, engine)
    norm_b = _bytes(final_norm, "norm", weight_dtype, q)
    quantized = "weight_dtype" if weight_dtype in QUANTIZED_DTYPES else ""
    wb = dtype_bits(UNQUANTIZED_DTYPE if quantized else weight_dtype) // 8
    vision = vision_rank_bytes(spec, tp, wb, quantized)
    layout = pp_layer_split(spec.num_hidden_layers, pp, partition)
    if vllm_version is not None and engine in ("vllm", "sglang") and not quantized:
        lm_head = head if not spec.tie_word_embeddings or pp > 1 else 0
        ends = ((table, pos), (norm_b, lm_head))
        sglang = engine == "sglang"
        return _allocated(
            spec, tp, ep, layout, wb, ends, rope, vllm_version, vision, sglang, split=split,
            offload=offload,
        )  # fmt: skip
    # a quantized kv_b_proj ("attn/kv" in QUANTIZABLE) leaves a dequantized copy per MLA layer
    heads_tp = attention_tp(tp, split)
    kv_b = mla_kv_b_copy_bytes(spec, heads_tp, dtype_bits(_act_dtype(weight_dtype)) // 8)
    mla = mla_layers_per_rank(spec, pp, partition) if quantized else (0,) * pp
    out = []
    start = 0
    for r, n_layers in enumerate(layout):
        b = sum(layers[start : start + n_layers]) + rope + vision + mla[r] * kv_b
        start += n_layers
        if r == 0:
            b += table + pos
        if r == pp - 1:
            b += norm_b
            if not spec.tie_word_embeddings or pp > 1:
                b += head
        out.append(b)
    return tuple(out)


def _allocated(
    spec,
    tp,
    ep,
    layout,
    wb,
    ends,
    rope,
    version,
    vision,
    sglang=False,
    quant=None,
    split=None,
    offload=0,
):
    """Each pipeline rank's tensors as the caching allocator counts them (the vision encoder
    as its plain bytes): vLLM's "Model loading took" reads the allocated bytes; SGLang's "Load
    weight end ... mem usage" is the drop in free device memory after torch.cuda.empty_cache()
    (model_runner.py load_model: get_available_gpu_memory(empty_cache=True) before and after),
    i.e. the segments still holding a block, in the same load order (SGLang 0.4's models build
    their layers as vLLM's do), without vLLM's per-attention-layer scalars. `quant`: each
    quantized layer's tensors (calc.serving.quant_tensors)."""
    from calc.serving.allocator import caching_allocator
    from calc.serving.load_events import attention_scalars, vllm_load_events

    elements = rotary_cache_elements(spec) if rope else 0
    out, start = [], 0
    for r, n_layers in enumerate(layout):
        events = vllm_load_events(
            spec,
            tp,
            ep,
            range(start, start + n_layers),
            wb,
            head=[n for n in ends[0] if n and r == 0],
            tail=[n for n in ends[1] if n and r == len(layout) - 1],
            rope_bytes=rope,
            rope_elements=elements,
            scalars=0 if sglang else attention_scalars(version),
            quant=quant,
            split=split,
            offload=offload,
        )
        start += n_layers
        counted = caching_allocator(events, empty_cache=sglang)[1 if sglang else 0]
        out.append(counted + vision)
    return tuple(out)


def _act_dtype(weight_dtype: str) -> str:
    return "fp32" if weight_dtype == "fp32" else "bf16"


def rank_layers(spec: ModelSpec, pp: int, partition: tuple[int, ...] | None = None):
    """Decoder layers on each pipeline rank (the KV cache of each rank covers these)."""
    return pp_layer_split(spec.num_hidden_layers, pp, partition)
