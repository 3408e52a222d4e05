"""The tensors vLLM allocates while it builds a model, in order, as events for
calc.serving.allocator.caching_allocator (which counts them as vLLM's "Model loading took" does).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

from calc.serving.allocator import Free

# BaseModelLoader.load_model builds the model under `with torch.device("cuda")`, so each parameter
# is allocated at construction, in module order, before any weight is read (the checkpoint is read
# on the CPU and copied in; vllm 0.19.0 sdist, model_executor/model_loader/base_loader.py; 0.7.2
# loader.py alike). Per rank: the embedding (first PP rank), then per decoder layer its attention
# (one QKVParallelLinear tensor for q, k and v; o_proj), the rotary table in the first attention
# layer right after o_proj (get_rope caches it for the later layers), the MLP (one
# MergedColumnParallelLinear gate_up tensor; FusedMoE's stacked w13 [E, 2I, H] and w2 [E, H, I]),
# then the norms; the final norm and the LM head on the last rank (llama.py, qwen2.py, qwen3.py,
# gemma2.py, mixtral.py, qwen3_moe.py of the 0.19.0 sdist). Each Linear of calc.linears is split
# as calc.serving.shard_layers._matrix splits it; its bias is a tensor of its own.
# The rotary table (RotaryEmbeddingBase._compute_cos_sin_cache, vllm 0.7.2 / 0.19.0 sdists,
# rotary_embedding) is built on the GPU in float32: t = arange(max_position), freqs = t x inv_freq
# ([max_position, rotary_dim / 2]), cos, sin, cat((cos, sin)) ([max_position, rotary_dim]); the
# locals are freed on return, then cache.to(dtype) allocates the table and frees the float32 one.
# Those freed blocks are reused by later parameters. Not modelled: the small inv_freq temporaries
# (small pool: they never change a large block), YaRN / llama3 variants' extra temporaries, each
# layer's vectors taken as one tensor per calc.params component (< 512 B each), and the vision
# encoder (added as its plain bytes by the caller).
_QKV = frozenset({"attn/q", "attn/kv"})
_GATE_UP = frozenset({"gate_proj", "up_proj", "gate_up_proj"})


def attention_scalars(version: tuple[int, ...]) -> int:
    """fp32 scalar tensors each attention layer allocates in vLLM's Attention.__init__: _k_scale,
    _v_scale, k_range, v_range from 0.7.0; _q_scale, q_range from 0.8.3; _prob_scale from 0.8.5
    (vllm/attention/layer.py, from 0.16.0 model_executor/layers/attention/attention.py
    set_default_quant_scales; the sdists of 0.6.6, 0.7.0, 0.8.0, 0.8.3, 0.8.5, 0.19.0)."""
    if version >= (0, 8, 5):
        return 7
    if version >= (0, 8, 3):
        return 6
    return 4 if version >= (0, 7, 0) else 0


class LinearAlloc(NamedTuple):
    """The tensors a quantized linear's quant method makes on one rank (calc.serving.
    quant_tensors), bias excluded: `tensors` at construction, in order; `repacked` the indices
    of those process_weights_after_loading replaces by a new tensor of the same size made from
    a contiguous copy (Machete's prepack: copy, new, copy freed, old freed); `kept` what it
    allocates after loading and keeps (azp_adj, a permutation)."""

    tensors: tuple[int, ...]
    repacked: tuple[int, ...] = ()
    kept: tuple[int, ...] = ()


# a linear's fused group on one rank -> its LinearAlloc, or None to keep it in the model dtype
QuantTensors = Callable[[str, list, int, int], "LinearAlloc | None"]


def _rank_shape(lins, w: int, tp: int) -> tuple[int, int]:
    """(out, in) of a fused group's weight on one rank: row-parallel layers split the input."""
    from calc.serving.shard_layers import ROW_PARALLEL

    name = lins[0].module.rsplit(".", 1)[-1]
    inp = lins[0].in_features // tp if name in ROW_PARALLEL else lins[0].in_features
    return w // inp, inp


def _layer_tensors(
    spec,
    layer: int,
    tp: int,
    ep: int,
    dtype_bytes: int,
    quant: QuantTensors | None = None,
    split=None,
) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
    """(attention tensors, the rest) of one decoder layer on one rank, in bytes, each tagged
    "" (made at construction), "repack" (replaced after loading) or "kept" (made after
    loading), in module order."""
    from calc.linears import _attention, _mlp
    from calc.serving.shard_layers import _matrix, layer_rank_params

    kind, mlp = spec.layer_kinds[layer]
    groups: dict[str, list] = {}  # name -> [weight, bias, linears], in construction order
    attn: list[str] = []
    for lin in _attention(spec, kind, 1, "") + _mlp(spec, mlp, 1, ""):
        path, name = lin.module.rsplit(".", 1)
        if lin.component in _QKV and not spec.is_mla:
            key = "qkv"
        elif name in _GATE_UP:
            key = path + ".gate_up"
        else:
            key = lin.module
        w = _matrix(spec, lin._replace(bias=False), tp, ep, split)
        g = groups.setdefault(key, [0, 0, []])
        g[0] += w
        g[1] += _matrix(spec, lin, tp, ep, split) - w
        g[2].append(lin)
        if lin.component.startswith("attn") and key not in attn:
            attn.append(key)

    def tensors(key: str) -> list[tuple[int, str]]:
        w, b, lins = groups.pop(key)
        alloc = quant(key, lins, *_rank_shape(lins, w, tp)) if quant is not None else None
        if alloc is None:
            out = [(w * dtype_bytes, "")]
        else:
            out = [
                (n, "repack" if i in alloc.repacked else "") for i, n in enumerate(alloc.tensors)
            ]
        if b:
            out.append((b * dtype_bytes, ""))
        return out + [(n, "kept") for n in (alloc.kept if alloc is not None else ())]

    params = layer_rank_params(spec, layer, tp, ep, split)
    vectors = [n for k, n in params.items() if ":vectors" in k]
    first = [t for k in attn for t in tensors(k)]
    rest = [t for k in list(groups) for t in tensors(k)] + [(n * dtype_bytes, "") for n in vectors]
    return [t for t in first if t[0]], [t for t in rest if t[0]]


def vllm_load_events(
    spec,
    tp: int,
    ep: int,
    layers: Sequence[int],
    dtype_bytes: int,
    *,
    head: Sequence[int] = (),
    tail: Sequence[int] = (),
    rope_bytes: int = 0,
    rope_elements: int = 0,
    scalars: int = 0,
    quant: QuantTensors | None = None,
    split=None,
    offload: int = 0,
) -> list[int | Free]:
    """The requests (bytes) and frees vLLM makes building `layers` of one rank: `head` tensors
    (embedding, position table) first, `tail` (final norm, LM head) last, in bytes; the rotary
    table of `rope_elements` entries (`rope_bytes` in its dtype) in the first attention layer;
    `scalars` fp32 scalars per attention layer (attention_scalars); `quant` the quantized
    linears' tensors (LinearAlloc), whose after-loading steps follow the load, module by module
    (process_weights_after_loading walks model.named_modules(): construction order).
    `split`: SGLang's other TP groups (calc.serving.shard_layers.Split), None for vLLM;
    `offload`: --cpu-offload-gb's bytes, each layer's parameters moved to the CPU as it is built
    (offloaded_choice)."""
    events: list[int | Free] = list(head)
    moved = 0  # bytes offloaded so far
    count = len(events)
    memo: dict = {}
    post: list[tuple[int, str, int]] = []  # (request index or -1, kind, bytes)
    rope_done = not rope_elements

    def add(entries) -> list[tuple[int, int]]:
        nonlocal count
        made = []  # (request index, bytes) of the parameters made now
        for n, tag in entries:
            if tag == "kept":
                post.append((-1, tag, n))
                continue
            if tag == "repack":
                post.append((count, tag, n))
            events.append(n)
            made.append((count, n))
            count += 1
        return made

    for i in layers:
        k = spec.layer_kinds[i]
        if k not in memo:
            memo[k] = _layer_tensors(spec, i, tp, ep, dtype_bytes, quant, split)
        attn, rest = memo[k]
        made = add(attn)
        if k[0] != "linear_attention":
            if not rope_done:
                rope_done = True
                count = _rope(
                    events, count, spec.max_position_embeddings, rope_elements, rope_bytes
                )
            events += [4] * scalars
            count += scalars
        made += add(rest)
        if moved < offload:  # the offloader wraps each layer as make_layers builds it
            chosen, moved = offloaded_choice([n for _, n in made], moved, offload)
            events += [Free(made[j][0]) for j in chosen]
    if not rope_done:
        count = _rope(events, count, spec.max_position_embeddings, rope_elements, rope_bytes)
    events += list(tail)
    count += len(tail)
    for index, tag, n in post:  # process_weights_after_loading, module by module
        if tag == "kept":
            events.append(n)
            count += 1
        else:  # a contiguous copy, the repacked tensor; the copy freed, then the original
            events += [n, n, Free(count), Free(index)]
            count += 2
    return events


def offloaded_choice(sizes: Sequence[int], done: int, budget: int) -> tuple[list[int], int]:
    """The parameters of one layer (bytes, in named_parameters order) vLLM's CPU offloader moves
    and the bytes offloaded after them: each while the bytes already moved are under the budget
    (so the last may cross it). UVAOffloader._maybe_offload_to_cpu (model_executor/offloader/
    uva.py, 0.17.0 - 0.34.0; models/utils.py maybe_offload_to_cpu before, the same loop)."""
    chosen = []
    for j, n in enumerate(sizes):
        if done >= budget:
            break
        chosen.append(j)
        done += n
    return chosen, done


def offloaded_bytes(spec, tp: int, ep: int, layers: Sequence[int], dtype_bytes: int, budget: int):
    """Bytes --cpu-offload-gb moves off one rank building `layers` ("Total CPU offloaded
    parameters")."""
    done = 0
    for i in layers:
        if done >= budget:
            break
        attn, rest = _layer_tensors(spec, i, tp, ep, dtype_bytes)
        sizes = [n for n, tag in attn + rest if tag != "kept"]
        done = offloaded_choice(sizes, done, budget)[1]
    return done


def _rope(events: list, count: int, positions: int, elements: int, table: int) -> int:
    """_compute_cos_sin_cache then cache.to(dtype): returns the requests made so far."""
    t, freqs, cos, sin, cat = count, count + 1, count + 2, count + 3, count + 4
    events += [positions * 4, elements * 2, elements * 2, elements * 2, elements * 4]
    events += [Free(t), Free(freqs), Free(cos), Free(sin)]
    count += 5
    if table != elements * 4:  # a float32 table is the cat itself
        events += [table, Free(cat)]
        count += 1
    return count
