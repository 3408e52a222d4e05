"""DeepSeek-V4's weights (transformers 5.x modeling_deepseek_v4.py), once: the matrices of its
attention, compressors, indexer and hyper-connections (`Linear`s, calc.linears), and the vectors
beside them (norms, sinks, position biases, hyper-connection bases and scales).

Per layer (`self_attn.`): q_a_proj (h -> q_lora_rank), q_b_proj (q_lora_rank -> H x head_dim),
kv_proj (h -> head_dim: the one K = V head), o_a_proj (DeepseekV4GroupedLinear: o_groups blocks
of H x head_dim / o_groups -> o_lora_rank, stored as one [o_groups x o_lora_rank,
H x head_dim / o_groups] weight), o_b_proj (o_groups x o_lora_rank -> h), all bias-free;
q_a_norm (q_lora_rank) and kv_norm (head_dim) RMSNorms (q_b_norm has no weight), sinks (H).
A compressed layer's `compressor.`: kv_proj and gate_proj (h -> 2 x head_dim for CSA, whose
two overlapping series share one tensor; h -> head_dim for HCA), position_bias (rate x that
width), kv_norm (head_dim). CSA's `compressor.indexer.`: kv_proj and gate_proj (h -> 2 x
index_head_dim), position_bias (rate x 2 x index_head_dim), kv_norm (index_head_dim), q_b_proj
(q_lora_rank -> index_n_heads x index_head_dim), scorer.weights_proj (h -> index_n_heads).
Every layer's attn_hc and ffn_hc (DeepseekV4HyperConnection): fn ((2 + m) x m rows of m x h),
base ((2 + m) x m) and scale (3), m = hc_mult; the model's hc_head (DeepseekV4HyperHead, before
the final norm): hc_fn (m x m h), hc_base (m), hc_scale (1).
Buffers are not parameters and are not counted (as DeepSeek-V3's e_score_correction_bias):
the hash-routed layers' tid2eid (vocab x top-k int64), the others' e_score_correction_bias (E).
"""

from __future__ import annotations

from calc.linears import Linear
from calc.spec import ModelSpec


def v4_attention(spec: ModelSpec, kind: str, n: int, pre: str) -> list[Linear]:
    h, H, d = spec.hidden_size, spec.num_attention_heads, spec.head_dim
    r, g, ro = spec.q_lora_rank, spec.o_groups, spec.o_lora_rank
    a = pre + "self_attn."
    out = [
        Linear("attn/q", a + "q_a_proj", h, r, n),
        Linear("attn/q", a + "q_b_proj", r, H * d, n),
        Linear("attn/kv", a + "kv_proj", h, d, n),
        Linear("attn/o", a + "o_a_proj", H * d // g, g * ro, n),
        Linear("attn/o", a + "o_b_proj", g * ro, h, n),
    ]
    if kind == "sliding_attention":
        return out
    c = a + "compressor."
    width = 2 * d if kind == "compressed_sparse_attention" else d
    out += [
        Linear("attn/compressor", c + "kv_proj", h, width, n),
        Linear("attn/compressor", c + "gate_proj", h, width, n),
    ]
    if kind == "compressed_sparse_attention":
        i, Hi, di = c + "indexer.", spec.index_n_heads, spec.index_head_dim
        out += [
            Linear("attn/indexer", i + "kv_proj", h, 2 * di, n),
            Linear("attn/indexer", i + "gate_proj", h, 2 * di, n),
            Linear("attn/indexer", i + "q_b_proj", r, Hi * di, n),
            Linear("attn/indexer", i + "scorer.weights_proj", h, Hi, n),
        ]
    return out


def v4_hyper_connections(spec: ModelSpec) -> list[Linear]:
    """The hyper-connections' mixing matrices: F.linear over the m x h flattened streams."""
    m, h, L = spec.hc_mult, spec.hidden_size, spec.num_hidden_layers
    out = [Linear("hc", f"{x}_hc.fn", m * h, (2 + m) * m, L) for x in ("attn", "ffn")]
    if spec.final_norm:  # the HyperHead sits with the final norm
        out.append(Linear("hc", "hc_head.hc_fn", m * h, m, 1))
    return out


def v4_layer_vectors(spec: ModelSpec, kind: str) -> list[tuple[str, int, bool]]:
    """One block's parameters outside its matrices: (component, count, kept in fp32), the last
    true for what the checkpoint stores in float32 (position biases, the hyper-connections'
    bases and scales; the norms are in the base dtype). The sinks and the block norms are
    calc.params' (with gpt-oss's and every model's)."""
    d, m = spec.head_dim, spec.hc_mult
    out = [("norm", spec.q_lora_rank + d, False)]  # q_a_norm, kv_norm
    if kind != "sliding_attention":  # the compressor's kv_norm and position_bias
        csa = kind == "compressed_sparse_attention"
        rate = spec.compress_rate_csa if csa else spec.compress_rate_hca
        out += [("attn/compressor", d, False),
                ("attn/compressor", rate * (2 * d if csa else d), True)]  # fmt: skip
        if csa:  # the indexer's kv_norm and position_bias
            di = spec.index_head_dim
            out += [("attn/indexer", di, False), ("attn/indexer", rate * 2 * di, True)]
    out.append(("hc", 2 * ((2 + m) * m + 3), True))  # attn_hc / ffn_hc base and scale
    return out


def v4_head_vectors(spec: ModelSpec) -> int:
    """hc_head's base and scale (fp32), with the final norm."""
    return spec.hc_mult + 1 if spec.final_norm else 0


def v4_vectors(spec: ModelSpec) -> dict[str, int]:
    """Parameters outside the matrices, by component, over every layer (v4_layer_vectors) and
    the HyperHead: norms, position biases, the hyper-connections' bases and scales."""
    out = {"norm": 0, "attn/compressor": 0, "hc": v4_head_vectors(spec)}
    for kind, n in spec.attention_counts.items():
        for component, count, _ in v4_layer_vectors(spec, kind):
            out[component] = out.get(component, 0) + n * count
    return out
