"""A Mamba-2 mixer layer (Nemotron-H, Granite 4.0-H) and its constant per-sequence state: what
kvcalc's "mamba" numbers (calc/layers_ssm.py) are measured against; and the state-free stand-in
of a block without a mixer ("none": Nemotron-H's MLP-only and MoE-only blocks).

Written from the Mamba-2 (SSD) recurrence, with transformers 5.x's `NemotronHMamba2Mixer`
(models/nemotron_h/modeling_nemotron_h.py) as the reference for shapes and parameter names:
`in_proj` (h -> gate z [inner], x [inner], B and C [n_groups x N each], dt [heads]; inner =
heads x head_dim; bias = mamba_proj_bias), a causal depthwise `conv1d` of kernel K over the x, B,
C channels (bias = use_conv_bias; SiLU), per-head `dt_bias`, `A_log` and `D`, the gated RMSNorm
`norm` (y * SiLU(z), then RMS over each of n_groups groups of inner / n_groups, a weight of
inner), `out_proj` (inner -> h). Heads share B and C within their group.

Per token t and head (dt = softplus(dt_raw + dt_bias), A = -exp(A_log)):
  h_t = exp(dt A) h_{t-1} + dt x_t B_t^T     ([head_dim, N])
  y_t = h_t C_t + D x_t
The update is one `baddbmm` (dt x_t times B_t^T added to the decayed state) and the readout one
`bmm`: FlopCounterMode sees 2 + 2 FLOPs per state element; the decay (1 FLOP per state element,
which kvcalc counts: 5 in all) is an elementwise multiply it does not count (checks.py says so).

State per sequence ("engine" convention, vLLM's MambaStateShapeCalculator.mamba2_state_shape):
the conv's last K - 1 input columns [conv_dim, K - 1] in the cache dtype, and the SSM state
[heads, head_dim, N] in `mamba_ssm_cache_dtype` when the spec sets one, else the cache dtype.
transformers keeps K columns (its update concatenates the new column onto the K stored ones
and drops the oldest); K - 1 are all the next step reads, so the K-th is not measured here.
But: a sequential scan, not the chunked SSD form (`mamba_chunk_size`: the same result, other
work); no dt clamp (transformers clamps dt below at time_step_min in its chunked path only).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from calc.spec import ModelSpec

_TORCH = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}


def ssm_torch_dtype(spec: ModelSpec) -> torch.dtype | None:
    """The SSM state's own dtype (mamba_ssm_cache_dtype), None when it follows the cache's."""
    d = spec.mamba_ssm_cache_dtype
    if d is None:
        return None
    if d not in _TORCH:
        raise ValueError(
            f"'mamba_ssm_cache_dtype' must be one of {', '.join(_TORCH)} for calc.validate: "
            f"got {d!r}"
        )
    return getattr(torch, _TORCH[d])


class MambaState:
    """One layer's state: conv [B, conv_dim, K - 1] and ssm [B, heads, head_dim, N]."""

    def __init__(self, conv: torch.Tensor, ssm: torch.Tensor) -> None:
        self.conv, self.ssm = conv, ssm
        self.length = 0  # tokens seen so far

    def tensors(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self.conv, self.ssm


class NoState:
    """A mixer-less block's cache entry: no tensors; counts tokens like the others."""

    def __init__(self) -> None:
        self.length = 0

    def tensors(self) -> tuple[()]:
        return ()


def ssd_scan(x, dt, A, B, C, state):
    """Sequential Mamba-2 scan. x: [b, n, H, P]; dt: [b, n, H] (after softplus); A: [H]
    (negative); B, C: [b, n, H, N] (groups expanded to heads); state: [b, H, P, N]. Returns
    (y without the D term [b, n, H, P], final state)."""
    b, n, H, P = x.shape
    N = B.shape[-1]
    S = state.reshape(b * H, P, N)
    decay = torch.exp(dt * A).transpose(0, 1).reshape(n, b * H, 1, 1)
    u = (x * dt[..., None]).transpose(0, 1).reshape(n, b * H, P, 1)  # dt x_t
    Bs = B.transpose(0, 1).reshape(n, b * H, 1, N)
    Cs = C.transpose(0, 1).reshape(n, b * H, N, 1)
    ys = []
    for t in range(n):
        S = torch.baddbmm(S * decay[t], u[t], Bs[t])  # exp(dt A) h + (dt x) B^T
        ys.append(torch.bmm(S, Cs[t]))  # h C: [b H, P, 1]
    y = torch.stack(ys, dim=0).reshape(n, b, H, P).transpose(0, 1)
    return y, S.reshape(b, H, P, N)


class GatedRMSNorm(nn.Module):
    """RMSNorm(y * SiLU(z)) over `groups` groups of the last dimension, one weight of `width`."""

    def __init__(self, width: int, groups: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(width))
        self.groups, self.eps = groups, eps

    def forward(self, y: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        g = (y.float() * F.silu(z.float())).unflatten(-1, (self.groups, -1))
        g = g * torch.rsqrt(g.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * g.flatten(-2).to(y.dtype)


class Mamba2Mixer(nn.Module):
    """A Mamba-2 mixer, recurrent form, with an optional `MambaState`."""

    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        h = spec.hidden_size
        self.H, self.P = spec.mamba_num_heads, spec.mamba_head_dim
        self.N, self.G, self.K = spec.ssm_state_size, spec.n_groups, spec.conv_kernel
        self.inner = self.H * self.P
        self.conv_dim = self.inner + 2 * self.G * self.N  # x, B, C channels
        self.ssm_dtype = ssm_torch_dtype(spec)
        out = 2 * self.inner + 2 * self.G * self.N + self.H  # z, x, B, C, dt
        self.in_proj = nn.Linear(h, out, bias=spec.mamba_proj_bias)
        C = self.conv_dim
        self.conv1d = nn.Conv1d(C, C, self.K, groups=C, bias=spec.use_conv_bias)  # depthwise
        # Mamba-2's initial ranges (dt in [0.001, 0.1], A in [1, 16]), spread deterministically:
        # slow decays, so that a cached decode which lost its SSM state fails the check
        dt = torch.exp(torch.linspace(math.log(1e-3), math.log(1e-1), self.H))
        self.dt_bias = nn.Parameter(dt + torch.log(-torch.expm1(-dt)))  # softplus^-1(dt)
        self.A_log = nn.Parameter(torch.log(torch.linspace(1.0, 16.0, self.H)))
        self.D = nn.Parameter(torch.ones(self.H))
        self.norm = GatedRMSNorm(self.inner, self.G)
        self.out_proj = nn.Linear(self.inner, h, bias=spec.mamba_proj_bias)

    def new_cache(self, batch: int, max_tokens: int, dtype, device) -> MambaState:
        """Constant in `max_tokens`: K - 1 conv columns and heads x head_dim x N per sequence."""
        conv = torch.zeros(batch, self.conv_dim, self.K - 1, dtype=dtype, device=device)
        ssm_dtype = self.ssm_dtype or dtype
        ssm = torch.zeros(batch, self.H, self.P, self.N, dtype=ssm_dtype, device=device)
        return MambaState(conv, ssm)

    def forward(self, x, cache: MambaState | None = None, *, path="materialized", causal=True):
        """`path` and `causal` are accepted for the decoder's sake: the layer is causal by
        construction and has one path."""
        b, n, _ = x.shape
        z, xBC, dt = self.in_proj(x).split([self.inner, self.conv_dim, self.H], dim=-1)
        xBC = xBC.transpose(1, 2)  # [b, C, n]
        K1 = self.K - 1
        if cache is not None and cache.length:
            prev = cache.conv.to(x.dtype)
        else:
            prev = xBC.new_zeros(b, self.conv_dim, K1)
        padded = torch.cat([prev, xBC], dim=-1)  # [b, C, K - 1 + n]: causal left context
        w, bias = self.conv1d.weight, self.conv1d.bias
        xBC = F.silu(F.conv1d(padded, w, bias, groups=self.conv_dim)).transpose(1, 2)
        xs, B, C = xBC.split([self.inner, self.G * self.N, self.G * self.N], dim=-1)
        if cache is not None:
            state = cache.ssm
        else:
            state = x.new_zeros(b, self.H, self.P, self.N, dtype=self.ssm_dtype or x.dtype)
        sd = state.dtype  # the scan runs in the state's dtype (fp32 for Nemotron 3)
        r = self.H // self.G  # heads per B / C group
        B = B.reshape(b, n, self.G, self.N).repeat_interleave(r, dim=2).to(sd)
        C = C.reshape(b, n, self.G, self.N).repeat_interleave(r, dim=2).to(sd)
        xs = xs.reshape(b, n, self.H, self.P)
        dt = F.softplus(dt.to(sd) + self.dt_bias.to(sd))  # [b, n, H]
        A = -torch.exp(self.A_log.to(sd))
        y, state = ssd_scan(xs.to(sd), dt, A, B, C, state)
        y = y + xs.to(sd) * self.D.to(sd)[:, None]  # D skip
        if cache is not None:
            if K1:
                cache.conv.copy_(padded[..., -K1:])
            cache.ssm.copy_(state)
            cache.length += n
        y = self.norm(y.reshape(b, n, self.inner).to(x.dtype), z)
        return self.out_proj(y)
