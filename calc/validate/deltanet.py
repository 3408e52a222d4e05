"""A Gated-DeltaNet linear-attention layer (Qwen3-Next) and its constant per-sequence state: what
kvcalc's linear-attention numbers are measured against.

Modules as transformers' `Qwen3NextGatedDeltaNet` names them: `in_proj_qkvz` (h -> q, k over
the key heads, v and the output gate z over the value heads), `in_proj_ba` (h -> beta and the
decay input a, one per value head), a causal depthwise `conv1d` of kernel K over the q, k, v
channels (SiLU), per-value-head `dt_bias` and `A_log`, a gated RMSNorm over one value head
(`out_norm`: RMSNorm(o) * SiLU(z)), `out_proj`.

State per sequence ("engine" convention, as vLLM allocates it): the conv's last K - 1 input
columns and one dk x dv matrix S per value head. The delta rule runs in its recurrent form, token
by token, with every product a `bmm` so that FlopCounterMode sees it:
  S <- S * exp(g_t);  u = beta_t (v_t - k_t^T S);  S <- S + k_t u^T;  o_t = q_t^T S
(k^T S, the rank-1 update and q^T S: 2 nv dk dv FLOPs each). The decay, gates, l2 norms and
softmax-free scalings are elementwise: FlopCounterMode counts none of them, nor does kvcalc.
But: no chunked (parallel) prefill form: it does other work (kvcalc counts the recurrent form).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from calc.spec import ModelSpec


class LinearState:
    """One layer's state: conv [B, conv_dim, K - 1] and recurrent [B, nv, dk, dv]."""

    def __init__(self, conv: torch.Tensor, recurrent: torch.Tensor) -> None:
        self.conv, self.recurrent = conv, recurrent
        self.length = 0  # tokens seen so far

    def tensors(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self.conv, self.recurrent


def delta_rule(q, k, v, g, beta, state):
    """Recurrent gated delta rule. q, k: [B, n, nv, dk] (l2-normed, q scaled); v: [B, n, nv, dv];
    g, beta: [B, n, nv]; state: [B, nv, dk, dv]. Returns (o [B, n, nv, dv], final state)."""
    B, n, nv, dk = k.shape
    dv = v.shape[-1]
    S = state.reshape(B * nv, dk, dv)
    decay = g.exp().transpose(0, 1).reshape(n, B * nv, 1, 1)
    b = beta.transpose(0, 1).reshape(n, B * nv, 1, 1)
    qs = q.transpose(0, 1).reshape(n, B * nv, 1, dk)
    ks = k.transpose(0, 1).reshape(n, B * nv, 1, dk)
    vs = v.transpose(0, 1).reshape(n, B * nv, 1, dv)
    outs = []
    for t in range(n):
        S = S * decay[t]
        u = (vs[t] - torch.bmm(ks[t], S)) * b[t]  # beta (v - k^T S): [B nv, 1, dv]
        S = S + torch.bmm(ks[t].transpose(1, 2), u)  # rank-1 update k u^T: [B nv, dk, dv]
        outs.append(torch.bmm(qs[t], S))  # q^T S: [B nv, 1, dv]
    o = torch.stack(outs, dim=0).reshape(n, B, nv, dv).transpose(0, 1)
    return o, S.reshape(B, nv, dk, dv)


class GatedDeltaNet(nn.Module):
    """Qwen3-Next's linear attention, recurrent form, with an optional `LinearState`."""

    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        h = spec.hidden_size
        self.nk, self.nv = spec.linear_num_key_heads, spec.linear_num_value_heads
        self.dk, self.dv = spec.linear_key_head_dim, spec.linear_value_head_dim
        self.kernel = spec.linear_conv_kernel_dim
        if self.nv % self.nk:
            raise ValueError(f"'linear_num_key_heads' must divide {self.nv}: got {self.nk}")
        self.kd, self.vd = self.nk * self.dk, self.nv * self.dv
        self.conv_dim = 2 * self.kd + self.vd  # q, k, v channels
        self.in_proj_qkvz = nn.Linear(h, 2 * self.kd + 2 * self.vd, bias=False)
        self.in_proj_ba = nn.Linear(h, 2 * self.nv, bias=False)
        C = self.conv_dim
        self.conv1d = nn.Conv1d(C, C, self.kernel, groups=C, bias=False)  # depthwise
        self.dt_bias = nn.Parameter(torch.ones(self.nv))
        self.A_log = nn.Parameter(torch.log(torch.linspace(1.0, 16.0, self.nv)))
        self.out_norm = nn.RMSNorm(self.dv)  # gated: times SiLU(z) after
        self.out_proj = nn.Linear(self.vd, h, bias=False)

    def new_cache(self, batch: int, max_tokens: int, dtype, device) -> LinearState:
        """Constant in `max_tokens`: K - 1 conv columns and nv dk x dv matrices per sequence."""
        z = dict(dtype=dtype, device=device)
        conv = torch.zeros(batch, self.conv_dim, self.kernel - 1, **z)
        return LinearState(conv, torch.zeros(batch, self.nv, self.dk, self.dv, **z))

    def forward(self, x, cache: LinearState | None = None, *, path="materialized", causal=True):
        """`path` and `causal` are accepted for the decoder's sake: the layer is causal by
        construction and has one path."""
        B, n, _ = x.shape
        q, k, v, z = self.in_proj_qkvz(x).split([self.kd, self.kd, self.vd, self.vd], dim=-1)
        b, a = self.in_proj_ba(x).split([self.nv, self.nv], dim=-1)
        mixed = torch.cat([q, k, v], dim=-1).transpose(1, 2)  # [B, C, n]
        K1 = self.kernel - 1
        if cache is not None and cache.length:
            prev = cache.conv
        else:
            prev = torch.zeros(B, self.conv_dim, K1, dtype=x.dtype, device=x.device)
        padded = torch.cat([prev, mixed], dim=-1)  # [B, C, K - 1 + n]: causal left context
        conv = F.silu(F.conv1d(padded, self.conv1d.weight, groups=self.conv_dim))  # [B, C, n]
        q, k, v = conv.transpose(1, 2).split([self.kd, self.kd, self.vd], dim=-1)
        r = self.nv // self.nk  # value heads per key head
        q = F.normalize(q.reshape(B, n, self.nk, self.dk), dim=-1) * self.dk**-0.5
        k = F.normalize(k.reshape(B, n, self.nk, self.dk), dim=-1)
        q, k = q.repeat_interleave(r, dim=2), k.repeat_interleave(r, dim=2)  # [B, n, nv, dk]
        beta = torch.sigmoid(b)
        g = -self.A_log.exp() * F.softplus(a + self.dt_bias)  # log decay, [B, n, nv]
        if cache is not None:
            state = cache.recurrent
        else:
            state = torch.zeros(B, self.nv, self.dk, self.dv, dtype=x.dtype, device=x.device)
        o, state = delta_rule(q, k, v.reshape(B, n, self.nv, self.dv), g, beta, state)
        if cache is not None:
            if K1:
                cache.conv.copy_(padded[..., -K1:])
            cache.recurrent.copy_(state)
            cache.length += n
        o = self.out_norm(o) * F.silu(z.reshape(B, n, self.nv, self.dv))
        return self.out_proj(o.reshape(B, n, self.vd))
