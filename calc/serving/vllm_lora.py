"""vLLM's LoRA serving (--enable-lora, --max-loras, --max-lora-rank, --fully-sharded-loras): the
adapter slots and punica buffers "Model loading took" counts.

Read in the PyPI sdists 0.10.0 - 0.34.0 (lora/model_manager.py, lora/layers/base_linear.py,
column_parallel_linear.py, row_parallel_linear.py, vocab_parallel_embedding.py,
logits_processor.py, lora/punica_wrapper/punica_base.py and punica_gpu.py, lora/ops/triton_ops/
lora_kernel_metadata.py, v1/worker/lora_model_runner_mixin.py, config/lora.py): load_lora_model
runs inside the load's DeviceMemoryProfiler (V1 and Model Runner V2), and LoRAModelManager makes,
in the lora dtype ("auto": the model dtype), for L = max_loras slots of rank r on each TP rank t:
- each linear of a decoder layer, one A and one B a slice: A (L, 1, rA, in), B (L, 1, out, r);
  column-parallel layers (qkv's three slices q / k / v, gate_up's two) split `out` over t,
  row-parallel ones (o, down) split `in`; --fully-sharded-loras splits the columns' rA = r / t
  and the rows' B output;
- embed_tokens (A (L, vocab, r), B (L, 1, hidden, r)) and the logits processor (A (L, 1, r, hidden),
  B (L, 1, vocab, r)), whole on every rank, where the model declares them in embedding_modules:
  LlamaForCausalLM in every release read, Qwen3ForCausalLM from 0.16.0, Qwen2ForCausalLM never;
  with t >= 2 the logits wrapper also keeps an int64 index of the padded vocabulary;
- the punica wrapper's int64 / int32 indices: 56 N + 24 S bytes (N = max_num_batched_tokens,
  S = max_num_seqs) to 0.28.x, 48 N + 24 S from 0.29.0 (one index halved), and six small
  tensors of one 512 B block each.
The profile run's dummy adapters are built on the CPU and copied into these slots; their fp32
shrink buffers (a few MiB) and LoRA's extra CUDA graphs are not modelled.
Refused, not modelled: releases before 0.12.0 (the extra LoRA vocabulary, which also grows the
base embedding and LM head), MoE, MLA, linear-attention and multimodal models, families whose
LoRA modules were not read (kvcalc plans Llama, Qwen2 / 2.5 and Qwen3 dense models), and SGLang.
"""

from __future__ import annotations

from calc.activation import activation_dtype
from calc.dtypes import dtype_bits

LORA_FROM = (0, 12, 0)
PUNICA_48_FROM = (0, 29, 0)
QWEN3_EMBEDDINGS_FROM = (0, 16, 0)
MAX_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)  # LoRAConfig.max_lora_rank's choices
FAMILIES = {  # kvcalc's family -> the release from which embedding_modules wraps the tables
    "llama": (0, 0, 0),
    "llama-1": (0, 0, 0),
    "llama-2": (0, 0, 0),
    "llama-3": (0, 0, 0),
    "llama-3.1": (0, 0, 0),
    "llama-3.2": (0, 0, 0),
    "qwen3": QWEN3_EMBEDDINGS_FROM,
    "qwen2": None,  # never: only the linears
    "qwen2.5": None,
}


def check_lora_rank(rank: int) -> None:
    if rank not in MAX_LORA_RANKS:
        raise ValueError(
            f"'max_lora_rank' must be one of {', '.join(map(str, MAX_LORA_RANKS))}: got {rank}"
        )


def check_vllm_lora(spec, config) -> None:
    """The LoRA serving kvcalc does not model (module docstring)."""
    if not config.enable_lora:
        return
    v = config.version_tuple[:3]
    what = None
    if v < LORA_FROM:
        what = "vLLM before 0.12.0 (its extra LoRA vocabulary)"
    elif spec.is_moe or spec.is_mla or spec.vision is not None:
        what = "an MoE, MLA or multimodal model"
    elif set(spec.attention_counts) - {"full_attention", "sliding_attention"}:
        what = "linear-attention or chunked layers"
    elif spec.family not in FAMILIES:
        what = f"the {spec.family!r} family (its LoRA modules were not read)"
    if what:
        raise ValueError(f"'enable_lora' with {what} is not modelled")


def _layer_bytes(spec, tp: int, L: int, r: int, full: bool, b: int) -> int:
    h, d, inter = spec.hidden_size, spec.head_dim, spec.intermediate_size
    q = spec.num_attention_heads // tp * d
    kv = max(1, spec.n_kv_heads // tp) * d
    ra = r // tp if full else r
    row_out = h // tp if full else h
    qkv = 3 * ra * h + r * (q + 2 * kv)
    o = r * (spec.num_attention_heads * d // tp) + r * row_out
    gate_up = 2 * ra * h + 2 * r * (inter // tp)
    down = r * (inter // tp) + r * row_out
    return L * b * (qkv + o + gate_up + down)


def lora_load_bytes(spec, config, weight_dtype: str, layers: int, first: bool, last: bool) -> int:
    """What LoRA adds to one rank's "Model loading took": its `layers` decoder layers' slots, the
    embedding's (`first` PP rank) and the logits processor's (`last`), the punica buffers."""
    if not config.enable_lora:
        return 0
    from calc.serving.sharding import padded_vocab

    v, tp = config.version_tuple[:3], config.tensor_parallel_size
    L, r, full = config.max_loras, config.max_lora_rank, config.fully_sharded_loras
    b = dtype_bits(activation_dtype(weight_dtype)) // 8  # the lora dtype "auto": the model's
    out = layers * _layer_bytes(spec, tp, L, r, full, b)
    since = FAMILIES[spec.family]
    if since is not None and v >= since:
        V, h = spec.vocab_size, spec.hidden_size
        out += first * L * b * r * (V + h)
        out += last * (L * b * r * (h + V) + (8 * padded_vocab(V) if tp >= 2 else 0))
    N, S = config.max_num_batched_tokens, config.max_num_seqs
    return out + (48 if v >= PUNICA_48_FROM else 56) * N + 24 * S + 6 * 512
