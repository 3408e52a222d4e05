"""A quantized checkpoint's bytes on one GPU under tensor / expert parallelism, sharded as vLLM's
parallel linear layers load them (model_executor/layers/linear.py and fused_moe):

- column-parallel (q/k/v, qkv_proj, gate/up, q_b_proj, kv_b_proj, in_proj_*): output rows split
  tp-ways, each GPU's shard stored as its own matrix (its group / block scales with it, one
  per-tensor scale kept per GPU); K and V keep max(1, G / tp) heads (QKVParallelLinear);
- row-parallel (o_proj, down_proj, out_proj): input columns split, so a group must not straddle
  GPUs (`group_size` must divide in / tp); GPTQ with desc_act keeps every group's scales and
  zeros on each GPU (vLLM gptq.py: scale_and_zero_input_dim None when act order partitions the
  input); the bias is replicated;
- replicated: routers, shared-expert gates, MLA's q_a_proj / kv_a_proj_with_mqa, MTP eh_proj,
  DeepSeek-V3.2's indexer wq_b / wk / weights_proj (ReplicatedLinear in vLLM's deepseek_v2.py
  Indexer, 0.11.0 - 0.17.0 sdists, and SGLang's nsa_indexer.py);
- vocab-parallel: embedding and untied LM head, ceil(V / tp) rows (vLLM's padding to 64 ignored);
- experts: with ep = 1 split like the MLP (tp-ways on the intermediate width); with ep > 1 each
  GPU holds ceil(E / ep) whole experts (vLLM expert parallelism: no TP inside experts).
  gpt-oss's MXFP4 experts (layout "mxfp4") are split in whole 32-value blocks: both engines'
  gpt_oss.py loaders give rank r the intermediate columns [r w, min((r + 1) w, I)) with
  w = cdiv(I / 32, tp) x 32 (vLLM _load_weights_mxfp4, 0.10.1 - 0.33.0 sdists; SGLang
  _load_mxfp4_experts_weights, 0.5.7 / 0.5.23 wheels), so rank 0 holds w (gpt-oss, I = 2880:
  736 at tp 4, 384 at tp 8; the last rank 672 and 192).
But: other non-matrix parameters (norms, sinks, convs, position tables) are counted replicated,
an upper bound by a few KB where vLLM splits them by head.

>>> from calc.spec import ModelSpec
>>> s = ModelSpec(name="t", num_hidden_layers=1, hidden_size=256, num_attention_heads=4,
...               intermediate_size=512, vocab_size=1024)
>>> stored_bytes_per_gpu(s, tp=2)["attn/q"]   # q_proj: 128 of 256 rows x 256 x 2 bytes
65536
"""

from __future__ import annotations

from math import ceil

from calc.errors import check_count
from calc.linears import Linear
from calc.params import COMPONENTS, param_breakdown
from calc.quant.config import dtype_bytes, dtype_name
from calc.quant.layout import PARTS, linear_bytes
from calc.quant.stored import FP32_BYTES, FP32_ROUTER_FAMILIES
from calc.quant.weights import _entries, stored_dtype, take
from calc.sharding import kv_heads_per_gpu
from calc.spec import ModelSpec

ROW = ("o_proj", "down_proj", "out_proj", "w2", "dense", "dense_4h_to_h")  # + Mixtral, Falcon
MXFP4_BLOCK = 32  # values per e8m0 scale (gpt-oss's checkpoint: *_blocks [.., n / 32, 16])
REPLICATED = (
    *("gate", "router", "shared_expert_gate", "q_a_proj", "kv_a_proj_with_mqa", "eh_proj"),
    *("wq_b", "wk", "weights_proj"),  # DeepSeek-V3.2's indexer
)


def _shard(spec: ModelSpec, x: Linear, tp: int, ep: int, block: int = 1) -> tuple[Linear, str]:
    """This GPU's part of one matrix of kind `x`, and how it is split: "col", "row" or "rep".
    `block`: the intermediate width is split in whole blocks of this many values, the first
    ranks taking cdiv(blocks, tp) each (gpt-oss's MXFP4 experts: 32)."""
    leaf = x.module.rsplit(".", 1)[-1]
    if x.component == "lm_head":
        return x._replace(out_features=ceil(x.out_features / tp)), "col"
    if leaf in REPLICATED or (x.routed and ep > 1):  # EP: whole experts, fewer of them
        return x, "rep"
    if block > 1:  # the first rank's whole blocks (most loaded); I % block is _fp4's refusal
        inter = spec.moe_intermediate_size or spec.intermediate_size
        w = ceil(inter // block / tp) * block if inter % block == 0 else inter // tp
        if leaf in ROW:
            return x._replace(in_features=w), "row"
        return x._replace(out_features=x.out_features // inter * w), "col"  # gate_up: 2 w
    if leaf in ROW:
        return x._replace(in_features=x.in_features // tp), "row"
    if leaf in ("k_proj", "v_proj"):
        rows = kv_heads_per_gpu(spec, tp) * x.out_features // spec.n_kv_heads
        return x._replace(out_features=rows), "col"
    if leaf in ("qkv_proj", "query_key_value"):  # fused: q split, k/v as QKVParallelLinear
        kv = 2 * spec.kv_dim
        rows = (x.out_features - kv) // tp + 2 * kv_heads_per_gpu(spec, tp) * spec.head_dim
        return x._replace(out_features=rows), "col"
    return x._replace(out_features=x.out_features // tp), "col"


def stored_bytes_per_gpu(
    spec: ModelSpec, tp: int = 1, ep: int = 1, dtype: str | None = None
) -> dict[str, int]:
    """Bytes on the most loaded GPU, labelled as calc.weight_bytes_breakdown."""
    tp, ep = check_count("tp", tp), check_count("ep", ep)
    H, G = spec.num_attention_heads, spec.n_kv_heads
    if H % tp:
        raise ValueError(f"'tp' must divide num_attention_heads={H}: got {tp}")
    if G % tp and tp % G:
        raise ValueError(f"'tp' must divide or be a multiple of num_key_value_heads={G}: got {tp}")
    E = spec.num_local_experts
    if ep > 1 and not spec.is_moe:
        raise ValueError(f"'ep' must be 1 for a dense model: got {ep}")
    if ep > E:
        raise ValueError(f"'ep' must be at most num_local_experts={E}: got {ep}")
    q = spec.quantization
    d = dtype_name(dtype if dtype is not None else stored_dtype(spec), "dtype")
    base = dtype_bytes(d)
    left = dict(param_breakdown(spec))
    out: dict[str, int] = {}
    # a router both engines keep in fp32 (MiniMax-M2: vLLM GateLinear / SGLang ReplicatedLinear
    # with params_dtype=torch.float32, minimax_m2.py), as its checkpoint stores it
    fp32 = {"router"} if spec.family in FP32_ROUTER_FAMILIES else set()
    entries = _entries(spec, q) if q else _plain_entries(spec)
    for x, s, copies, parts in entries:
        take(left, x, parts, copies)
        block = MXFP4_BLOCK if s is not None and s.layout == "mxfp4" and x.routed else 1
        part, kind = _shard(spec, x, tp, ep, block)
        n = copies if not (x.routed and ep > 1) else copies // E * ceil(E / ep)
        if s is None:  # a row-parallel bias stays whole: out_features is not split
            width = FP32_BYTES if x.component in fp32 else base
            for component, share in _shares(x, parts, part.numel):
                out[component] = out.get(component, 0) + n * width * share
            continue
        if s.bias_always:  # AutoGPTQ's zero biases are not loaded: vllm/model_executor/models/
            s = s.model_copy(update={"bias_always": False})  # llama.py "Skip loading extra bias"
        where = x.module if kind == "rep" or tp == 1 else f"{x.module}, 1/{tp} of it per GPU"
        b = linear_bytes(s, part.out_features, part.in_features, bias=x.bias, dtype=d, module=where)
        if kind == "row" and s.layout == "gptq" and s.act_order and tp > 1:
            full = linear_bytes(s, x.out_features, x.in_features, dtype=d, module=x.module)
            b = b._replace(scales=full.scales, zeros=full.zeros)
        for name, v in zip(PARTS, b, strict=True):
            if v:
                key = f"{x.component}:{name}"
                out[key] = out.get(key, 0) + n * v
    for c in COMPONENTS:
        if c in left:
            rest = left[c] if c != "embed" else ceil(spec.vocab_size / tp) * spec.hidden_size
            out[c] = out.get(c, 0) + rest * base
    if q is not None and q.kv_cache is not None:
        from calc.quant.weights import weight_bytes_breakdown

        out["kv_scales"] = weight_bytes_breakdown(spec, d)["kv_scales"]  # per-layer scalars
    return out


def _plain_entries(spec: ModelSpec):
    from calc.params import linear_layers

    for x in linear_layers(spec):
        yield x, None, x.count, ((x.component, x.numel),)


def _shares(x, parts, numel: int) -> list[tuple[str, int]]:
    """An unquantized fused matrix's per-GPU parameters, back to each part's component in
    proportion (every part is split the same way: by output rows, or all by input columns)."""
    if len(parts) == 1:
        return [(parts[0][0], numel)]
    shares = [(c, numel * n // x.numel) for c, n in parts]
    first, rest = shares[0], numel - sum(n for _, n in shares)
    return [(first[0], first[1] + rest), *shares[1:]]
