"""Every weight matrix of a model, once: the shapes behind parameter counts, FLOPs and the bytes
a (quantized) checkpoint stores.

`linear_layers(spec)` lists one `Linear` per kind of matrix with how many the model holds
(layers x experts). Module names are transformers' usual ones (`self_attn.q_proj`,
`mlp.experts.gate_proj`, `mlp.shared_experts.down_proj`, `linear_attn.in_proj_qkvz`, `lm_head`);
fused modules (Phi-3's `qkv_proj`, `gate_up_proj`) keep their one name on each part.
Routed experts are marked, so a token's active share is count / E x top-k.
But: biases belong to their matrix (`bias`); tables, norms, convs and vectors are in calc.params.

>>> from calc.spec import ModelSpec
>>> s = ModelSpec(name="t", num_hidden_layers=2, hidden_size=8, num_attention_heads=2,
...               num_key_value_heads=1, intermediate_size=16, vocab_size=10)
>>> [(x.module, x.in_features, x.out_features, x.count) for x in linear_layers(s)][:2]
[('self_attn.q_proj', 8, 8, 2), ('self_attn.k_proj', 8, 4, 2)]
"""

from __future__ import annotations

from typing import NamedTuple

from calc.spec import ModelSpec


class Linear(NamedTuple):
    component: str  # calc.params.COMPONENTS
    module: str  # transformers' module name inside a block (or "lm_head")
    in_features: int
    out_features: int
    count: int  # matrices of this shape in the whole model
    bias: bool = False
    routed: bool = False  # a routed expert: a token uses top-k of every E

    @property
    def numel(self) -> int:
        """One matrix's parameters, with its bias."""
        return self.in_features * self.out_features + (self.out_features if self.bias else 0)

    def active_count(self, spec: ModelSpec) -> int:
        """Matrices of this kind one token multiplies."""
        if not self.routed:
            return self.count
        return self.count // spec.num_local_experts * spec.num_experts_per_tok


def linear_layers(spec: ModelSpec) -> tuple[Linear, ...]:
    """All weight matrices, grouped by kind (cached on the spec)."""
    memo = spec.memo
    if "linears" not in memo:
        out: list[Linear] = []
        for g in spec.layer_groups:
            out += _attention(spec, g.attention, g.count, "")
            out += _mlp(spec, g.mlp, g.count, "")
        if spec.is_v4:  # DeepSeek-V4's hyper-connections (calc/linears_v4.py)
            from calc.linears_v4 import v4_hyper_connections

            out += v4_hyper_connections(spec)
        if not spec.tie_word_embeddings:
            out.append(Linear("lm_head", "lm_head", spec.hidden_size, spec.vocab_size, 1))
        memo["linears"] = tuple(out)
    return memo["linears"]


def mtp_layer_linears(spec: ModelSpec) -> tuple[Linear, ...]:
    """One multi-token-prediction module (DeepSeek-V3 §2.2): eh_proj (2h -> h) and one block
    like the model's last, all labelled "mtp"; it shares the embedding and the output head."""
    h = spec.hidden_size
    kind, mlp = spec.attention_types[-1], spec.mlp_types[-1]
    block = _attention(spec, kind, 1, "mtp.") + _mlp(spec, mlp, 1, "mtp.")
    return (Linear("mtp", "mtp.eh_proj", 2 * h, h, 1),) + tuple(
        x._replace(component="mtp") for x in block
    )


# --- attention -------------------------------------------------------------------------------


def _attention(spec: ModelSpec, kind: str, n: int, pre: str) -> list[Linear]:
    h, H = spec.hidden_size, spec.num_attention_heads
    if spec.is_v4:  # DeepSeek-V4: shared-KV MQA, compressors, indexer (calc/linears_v4.py)
        from calc.linears_v4 import v4_attention

        return v4_attention(spec, kind, n, pre)
    if kind == "none":  # a mixer-less block (Nemotron-H's MLP / MoE blocks)
        return []
    if kind == "mamba":  # Mamba-2: in_proj emits gate z, x, B, C and dt; out_proj reads heads
        inner = spec.mamba_num_heads * spec.mamba_head_dim
        out = 2 * inner + 2 * spec.n_groups * spec.ssm_state_size + spec.mamba_num_heads
        a, b = pre + "mamba.", spec.mamba_proj_bias
        return [
            Linear("attn/linear", a + "in_proj", h, out, n, b),
            Linear("attn/linear", a + "out_proj", inner, h, n, b),
        ]
    if kind == "linear_attention":
        kd = spec.linear_num_key_heads * spec.linear_key_head_dim
        vd = spec.linear_num_value_heads * spec.linear_value_head_dim
        a = pre + "linear_attn."
        return [
            Linear("attn/linear", a + "in_proj_qkvz", h, 2 * kd + 2 * vd, n),  # q, k, v, z gate
            Linear("attn/linear", a + "in_proj_ba", h, 2 * spec.linear_num_value_heads, n),
            Linear("attn/linear", a + "out_proj", vd, h, n),
        ]
    a, b = pre + "self_attn.", spec.qkv_bias
    o = Linear("attn/o", a + "o_proj", H * spec.v_dim, h, n, spec.attn_out_bias)
    if spec.is_mla:
        q_out = H * spec.qk_head_dim
        if spec.q_lora_rank is None:  # DeepseekV2/V3Attention: q_proj never has a bias
            q = [Linear("attn/q", a + "q_proj", h, q_out, n)]
        else:  # low-rank queries: h -> q_lora_rank -> H * (nope + rope)
            r = spec.q_lora_rank
            q = [
                Linear("attn/q", a + "q_a_proj", h, r, n, b),
                Linear("attn/q", a + "q_b_proj", r, q_out, n),
            ]
        c = spec.kv_lora_rank
        kv = [  # h -> latent c_KV and the shared rope key; latent -> per-head k_nope and v
            Linear("attn/kv", a + "kv_a_proj_with_mqa", h, c + spec.qk_rope_head_dim, n, b),
            Linear("attn/kv", a + "kv_b_proj", c, H * (spec.qk_nope_head_dim + spec.v_head_dim), n),
        ]
        return q + kv + [o] + (_indexer(spec, n, pre) if kind == "indexed_attention" else [])
    d, G = spec.head_dim, spec.n_kv_heads
    q_out = H * d * (2 if spec.attn_output_gate else 1)  # Qwen3-Next: query and its gate
    names = ("qkv_proj",) * 3 if spec.fused_qkv else ("q_proj", "k_proj", "v_proj")
    return [
        Linear("attn/q", a + names[0], h, q_out, n, b),
        Linear("attn/kv", a + names[1], h, G * d, n, b),
        Linear("attn/kv", a + names[2], h, G * d, n, b),
        o,
    ]


def _indexer(spec: ModelSpec, n: int, pre: str) -> list[Linear]:
    """DeepSeek-V3.2's lightning indexer (transformers 5.x DeepseekV32Indexer, all bias-free):
    wq_b (q_lora_rank -> index_n_heads x index_head_dim), wk (h -> index_head_dim) and
    weights_proj (h -> index_n_heads); its k_norm LayerNorm is in calc.params."""
    a, h = pre + "self_attn.indexer.", spec.hidden_size
    Hi, di = spec.index_n_heads, spec.index_head_dim
    return [
        Linear("attn/indexer", a + "wq_b", spec.q_lora_rank, Hi * di, n),
        Linear("attn/indexer", a + "wk", h, di, n),
        Linear("attn/indexer", a + "weights_proj", h, Hi, n),
    ]


# --- MLP ---------------------------------------------------------------------------------------


def _ffn(spec: ModelSpec, comp: str, prefix: str, f: int, n: int, bias: bool, routed: bool):
    h = spec.hidden_size
    if spec.mlp_kind == "standard":  # up (c_fc / dense_h_to_4h), down
        return [
            Linear(comp, prefix + "up_proj", h, f, n, bias, routed),
            Linear(comp, prefix + "down_proj", f, h, n, bias, routed),
        ]
    gate, up = ("gate_up_proj",) * 2 if spec.fused_gate_up else ("gate_proj", "up_proj")
    return [
        Linear(comp, prefix + gate, h, f, n, bias, routed),
        Linear(comp, prefix + up, h, f, n, bias, routed),
        Linear(comp, prefix + "down_proj", f, h, n, bias, routed),
    ]


def _mlp(spec: ModelSpec, kind: str, n: int, pre: str) -> list[Linear]:
    m = pre + "mlp."
    if kind == "none":  # a mixer-only block (Nemotron-H's Mamba / attention blocks)
        return []
    if kind == "dense":
        return _ffn(spec, "mlp", m, spec.intermediate_size, n, spec.mlp_bias, False)
    E, h = spec.num_local_experts, spec.hidden_size
    f = spec.expert_intermediate_size
    out = _ffn(spec, "mlp", m + "experts.", f, n * E, spec.expert_bias, True)
    out.append(Linear("router", m + "gate", h, E, n, spec.router_bias))  # logits: h -> E
    fs = spec.shared_expert_intermediate_size
    if fs is not None:
        out += _ffn(spec, "mlp/shared", m + "shared_experts.", fs, n, spec.mlp_bias, False)
        if spec.shared_expert_gate:  # Qwen2-MoE: sigmoid(h -> 1) scales the shared output
            out.append(Linear("mlp/shared", m + "shared_expert_gate", h, 1, n))
    return out
