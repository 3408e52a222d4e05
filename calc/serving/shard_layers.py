"""One decoder layer's weights on one tensor-parallel rank, as vLLM loads them, for every layer
kind: each matrix of calc.linears plus the layer's vectors (calc.params.layer_breakdown).

vLLM's parallel linear layers (vllm/model_executor/layers/linear.py) and models:
- column-parallel (QKVParallelLinear, MergedColumnParallelLinear, ColumnParallelLinear): the
  output rows, and their bias, split tp-ways; K and V by whole KV heads, one head per rank when
  tp > G (QKVParallelLinear replicates it).
- row-parallel (o_proj, down_proj, GDN out_proj): the input columns split, the bias on every rank.
- replicated (ReplicatedLinear, or `disable_tp=True`): the MoE router `gate` (deepseek_v2.py,
  qwen3_next.py, gpt_oss.py, llama4.py), Qwen3-Next's `shared_expert_gate`, and MLA's down
  projections `q_a_proj` / `kv_a_proj_with_mqa` (deepseek_v2.py DeepseekV2MLAAttention; fused as
  `fused_qkv_a_proj` in later releases, still replicated). MLA's `q_b_proj` and `kv_b_proj` are
  ColumnParallelLinear, `o_proj` row-parallel. DeepSeek-V3.2's indexer `wq_b`, `wk` and
  `weights_proj` are ReplicatedLinear ("no tensor parallel, just replicated": vllm 0.11.0 -
  0.17.0 sdists, vllm/model_executor/models/deepseek_v2.py Indexer; SGLang's nsa_indexer.py
  Indexer alike), its k_norm a replicated LayerNorm.
- routed experts (FusedMoE): each expert's intermediate width split tp-ways (the down bias on
  every rank), or, with expert parallelism, E / ep whole experts per rank. Shared experts are a
  tensor-parallel MLP (DeepseekV2MLP / Qwen3NextMLP / Llama4MLP with the TP group).
- vectors: norms replicated; gpt-oss `sinks` hold H / tp heads (gpt_oss.py OAIAttention); GDN's
  conv1d weight (a ColumnParallelLinear), `A_log` and `dt_bias` split by value heads
  (qwen3_next.py Qwen3NextGatedDeltaNet), its gated RMSNorm over one head replicated.
But: DeepSeek's e_score_correction_bias (E fp32 values a layer) is not counted, as in calc.params.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

from calc.errors import check_count
from calc.linears import Linear, _attention, _mlp
from calc.params import layer_breakdown
from calc.sharding import kv_heads_per_gpu
from calc.spec import ModelSpec

REPLICATED = frozenset(
    {"gate", "shared_expert_gate", "q_a_proj", "kv_a_proj_with_mqa", "wq_b", "wk", "weights_proj"}
)
ROW_PARALLEL = frozenset({"o_proj", "down_proj", "out_proj"})
SPLIT_VECTORS = ("attn/sinks", "attn/linear")  # split by heads; other vectors are replicated
QUANTIZABLE = ("attn/q", "attn/kv", "attn/o", "attn/linear", "mlp", "mlp/shared")


class Split(NamedTuple):
    """TP sizes of the modules that SGLang splits over another group than the TP group
    (calc.serving.sglang_parallel); None in every vLLM plan (each module over tp)."""

    attn: int  # the attention TP group: tp / dp under DP attention
    dense: int  # the dense MLP layers of an MoE model (moe_dense_tp_size=1: 1)
    shared: int  # shared experts (1: a whole copy on each GPU)
    embed: int  # embedding rows (1: replicated under DP attention)
    head: int  # LM head rows (the attention TP group with --enable-dp-lm-head)


def attention_tp(tp: int, split: Split | None) -> int:
    """The TP size attention heads are split over: SGLang's attention group, else tp."""
    return tp if split is None else split.attn


def vocab_tp(tp: int, split: Split | None) -> tuple[int, int]:
    """The TP sizes of the embedding's and the LM head's vocabulary rows."""
    return (tp, tp) if split is None else (split.embed, split.head)


def module_tp(lin: Linear, tp: int, split: Split | None) -> int:
    """The TP size one matrix is split over: `split`'s for attention, a dense MLP of an MoE
    model and shared experts, else tp (routed experts, routers)."""
    if lin.component.startswith("attn"):
        return attention_tp(tp, split)
    if split is None:
        return tp
    if lin.component == "mlp/shared":
        return split.shared
    if lin.component == "mlp" and not lin.routed:
        return split.dense
    return tp


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def check_engine_parallel(spec: ModelSpec, tp: int, pp: int = 1) -> tuple[int, int]:
    """tp and pp as ints, or a ValueError naming the division vLLM's layers would refuse."""
    tp, pp = check_count("tp", tp), check_count("pp", pp)
    H, G, L = spec.num_attention_heads, spec.n_kv_heads, spec.num_hidden_layers
    if H % tp:
        raise ValueError(f"'tp' must divide num_attention_heads={H}: got {tp}")
    if not spec.is_mla and G % tp and tp % G:
        raise ValueError(f"'tp' must divide or be a multiple of num_key_value_heads={G}: got {tp}")
    if spec.attention_counts.get("linear_attention"):
        for field in ("linear_num_key_heads", "linear_num_value_heads"):
            n = getattr(spec, field)
            if n % tp:  # vLLM's divide() in the GDN layer and its state shapes
                raise ValueError(f"'tp' must divide {field}={n}: got {tp}")
    if pp > L:
        raise ValueError(f"'pp' must be at most num_hidden_layers={L}: got {pp}")
    return tp, pp


def _matrix(spec: ModelSpec, lin: Linear, tp: int, ep: int, split: Split | None = None) -> int:
    """Parameters of all `lin.count` matrices of one layer on one rank (weights and bias)."""
    tp = module_tp(lin, tp, split)
    name = lin.module.rsplit(".", 1)[-1]
    w, b = lin.in_features * lin.out_features, lin.out_features if lin.bias else 0
    if lin.routed and ep > 1:
        return lin.count // ep * (w + b)  # whole experts
    if name in REPLICATED:
        return lin.count * (w + b)
    if name in ROW_PARALLEL:
        return lin.count * (cdiv(w, tp) + b)
    if lin.component == "attn/kv" and not spec.is_mla:  # k_proj / v_proj by whole heads
        per_head = (w + b) // spec.n_kv_heads
        return lin.count * per_head * kv_heads_per_gpu(spec, tp)
    return lin.count * cdiv(w + b, tp)


@functools.lru_cache(maxsize=4096)
def layer_rank_params(
    spec: ModelSpec, layer: int, tp: int, ep: int = 1, split: Split | None = None
) -> dict[str, int]:
    """One layer's parameters on one rank, by calc.params component; a component's vectors
    (norms, sinks, conv, A_log, dt_bias) under "<component>:vectors", never quantized.
    `split`: SGLang's other TP groups (attention vectors split by its attention TP size)."""
    kind, mlp = spec.layer_kinds[layer]
    linears = _attention(spec, kind, 1, "") + _mlp(spec, mlp, 1, "")
    out: dict[str, int] = {}
    for lin in linears:
        out[lin.component] = out.get(lin.component, 0) + _matrix(spec, lin, tp, ep, split)
    heads_tp = attention_tp(tp, split)
    for comp, n in _vectors(spec, layer, linears).items():
        key = f"{comp}:vectors"
        out[key] = out.get(key, 0) + (n // heads_tp if comp in SPLIT_VECTORS else n)
    return {k: n for k, n in out.items() if n}


def _vectors(spec: ModelSpec, layer: int, linears) -> dict[str, int]:
    """The layer's parameters outside its matrices, by component: layer_breakdown less the
    matrices. layer_breakdown counts a routed expert kind once, not E times (calc/params.py
    `out[lin.component] += lin.numel`, reported); either way is subtracted here."""
    whole = layer_breakdown(spec, layer)
    once: dict[str, int] = {}
    every: dict[str, int] = {}
    for lin in linears:
        once[lin.component] = once.get(lin.component, 0) + lin.numel
        every[lin.component] = every.get(lin.component, 0) + lin.count * lin.numel
    out = {}
    for comp, n in whole.items():
        rest = n - every.get(comp, 0)
        out[comp] = rest if rest >= 0 else n - once[comp]
    return out


def layer_rank_bytes(
    spec: ModelSpec, tp: int, ep: int, dtype_bytes, split: Split | None = None
) -> tuple[int, ...]:
    """Bytes of each decoder layer on one rank; `dtype_bytes(n, component)` prices n params.
    Layers of one (attention, MLP) kind are alike, so each kind is computed once."""
    memo: dict[tuple[str, str], int] = {}
    out = []
    for i, k in enumerate(spec.layer_kinds):
        if k not in memo:
            params = layer_rank_params(spec, i, tp, ep, split)
            memo[k] = sum(dtype_bytes(n, comp) for comp, n in params.items())
        out.append(memo[k])
    return tuple(out)
