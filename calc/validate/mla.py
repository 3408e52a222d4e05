"""Multi-head latent attention (DeepSeek-V2/V3) and its two caches: what kvcalc's MLA numbers
are measured against.

Modules as transformers' `DeepseekV3Attention` names them: queries through `q_a_proj` ->
`q_a_layernorm` -> `q_b_proj` (or one `q_proj` when q_lora_rank is None, V2-Lite); keys and
values through `kv_a_proj_with_mqa` (h -> kv_lora_rank latent c + one qk_rope_head_dim key shared
by every head), `kv_a_layernorm` over c, and `kv_b_proj` (c -> per head k_nope and v); `o_proj`.

Two caches (`cache=`):
- "latent" (kvcalc's "engine" convention, as vLLM/SGLang): per token the normed latent c and the
  rope key, kv_lora_rank + qk_rope_head_dim elements. Decoding is *absorbed* (DeepSeek-V2
  §2.1.2): q_nope is taken into the latent space through kv_b_proj's k part (W_UK), scores are
  q_lat . c + q_rope . k_rope, and the weighted latent goes out through the v part (W_UV);
- "expanded": per-head K (nope + rope) and V, naive decoding: what a cache without absorption
  would hold (transformers 5.x's DeepSeek attention caches the latent, like the engines).
Prefill is naive either way (kv_b_proj expands every token once). But: no RoPE (values, not
shapes: kvcalc counts neither its parameters nor FLOPs), no softmax scale tweaks (mscale).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from calc.spec import ModelSpec
from calc.validate.attention import PATHS, LayerKVCache, attention_mask

CACHES = ("latent", "expanded")


class MLAAttention(nn.Module):
    """DeepSeek's multi-head latent attention with a latent (or expanded) static KV cache."""

    def __init__(self, spec: ModelSpec, window: int | None = None, cache: str = "latent") -> None:
        super().__init__()
        if not spec.is_mla:
            raise ValueError(f"'spec' must be an MLA model (kv_lora_rank set): got {spec.name!r}")
        if cache not in CACHES:
            raise ValueError(f"'cache' must be one of {', '.join(CACHES)}: got {cache!r}")
        h, H = spec.hidden_size, spec.num_attention_heads
        self.n_heads, self.window, self.chunk, self.cache_kind = H, window, None, cache
        self.nope, self.rope, self.dv = (
            spec.qk_nope_head_dim,
            spec.qk_rope_head_dim,
            spec.v_head_dim,
        )
        self.rank = spec.kv_lora_rank
        dqk = self.nope + self.rope
        if spec.q_lora_rank is None:
            self.q_proj = nn.Linear(h, H * dqk, bias=spec.qkv_bias)
        else:
            self.q_a_proj = nn.Linear(h, spec.q_lora_rank, bias=spec.qkv_bias)
            self.q_a_layernorm = nn.RMSNorm(spec.q_lora_rank)
            self.q_b_proj = nn.Linear(spec.q_lora_rank, H * dqk, bias=False)
        self.kv_a_proj_with_mqa = nn.Linear(h, self.rank + self.rope, bias=spec.qkv_bias)
        self.kv_a_layernorm = nn.RMSNorm(self.rank)
        self.kv_b_proj = nn.Linear(self.rank, H * (self.nope + self.dv), bias=False)
        self.o_proj = nn.Linear(H * self.dv, h, bias=spec.attn_out_bias)
        self.scale = 1.0 / math.sqrt(dqk)

    def new_cache(self, batch: int, max_tokens: int, dtype, device) -> LayerKVCache:
        """Latent: c [B, 1, cap, rank] and k_rope [B, 1, cap, rope]; expanded: K [B, H, cap,
        nope + rope] and V [B, H, cap, v]. A ring of `window` slots for a sliding layer."""
        cap = max_tokens if self.window is None else min(max_tokens, self.window)
        if self.cache_kind == "latent":
            a, b = (batch, 1, cap, self.rank), (batch, 1, cap, self.rope)
        else:
            H = self.n_heads
            a, b = (batch, H, cap, self.nope + self.rope), (batch, H, cap, self.dv)
        z = dict(dtype=dtype, device=device)
        return LayerKVCache(torch.zeros(a, **z), torch.zeros(b, **z), self.window)

    def _q(self, x: torch.Tensor) -> torch.Tensor:
        if hasattr(self, "q_proj"):
            return self.q_proj(x)
        return self.q_b_proj(self.q_latent(x))

    def q_latent(self, x: torch.Tensor) -> torch.Tensor:
        """The normed query latent [B, n, q_lora_rank] (V3.2's indexer reads it too)."""
        return self.q_a_layernorm(self.q_a_proj(x))

    def heads(self, q: torch.Tensor) -> torch.Tensor:
        """[B, n, H * dqk] -> [B, H, n, dqk]."""
        B, n, _ = q.shape
        return q.view(B, n, self.n_heads, self.nope + self.rope).transpose(1, 2)

    def latent(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The normed latent c [B, n, rank] and the shared rope key [B, 1, n, rope]."""
        c, k_rope = self.kv_a_proj_with_mqa(x).split([self.rank, self.rope], dim=-1)
        return self.kv_a_layernorm(c), k_rope[:, None]

    def forward(self, x, cache: LayerKVCache | None = None, *, path="materialized", causal=True):
        if path not in PATHS:
            raise ValueError(f"'path' must be one of {', '.join(PATHS)}: got {path!r}")
        B, n, _ = x.shape
        q = self.heads(self._q(x))  # [B, H, n, dqk]
        # c [B, n, rank]: what the latent cache stores; k_rope [B, 1, n, rope]: one key shared
        # by every head
        c, k_rope = self.latent(x)
        decoding = cache is not None and cache.length
        if decoding and n != 1:
            raise ValueError(f"'x' must hold 1 token when the cache is filled: got {n}")
        if decoding and self.cache_kind == "latent":
            c_all, r_all = cache.append(c[:, None], k_rope)  # [B, 1, t, rank], [B, 1, t, rope]
            return self.o_proj(self._absorbed(q, c_all, r_all))
        if cache is not None and not decoding and self.cache_kind == "latent":
            cache.prefill(c[:, None], k_rope)
        k, v = self.expand(c, k_rope)
        mask = None
        if decoding:  # expanded cache: per-head K and V
            k, v = cache.append(k, v)
        else:
            if cache is not None and self.cache_kind == "expanded":
                cache.prefill(k, v)
            mask = attention_mask(n, causal, self.window, None, x.device)
        return self.o_proj(self.dense(q, k, v, mask, path))

    def expand(self, c, k_rope) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-head K [B, H, n, nope + rope] and V [B, H, n, v] from the latent (kv_b_proj)."""
        B, n, _ = c.shape
        H = self.n_heads
        kv = self.kv_b_proj(c).view(B, n, H, self.nope + self.dv).transpose(1, 2)
        k_nope, v = kv.split([self.nope, self.dv], dim=-1)
        return torch.cat([k_nope, k_rope.expand(B, H, n, self.rope)], dim=-1), v

    def dense(self, q, k, v, mask, path) -> torch.Tensor:
        """Naive attention over every key, `mask` (True = visible) broadcast over [B, H, n, t];
        [B, n, H * v]."""
        B, H, n, _ = q.shape
        if path == "fused":
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=self.scale)
        else:
            scores = torch.matmul(q, k.transpose(-2, -1)) * self.scale  # [B, H, n, t]
            if mask is not None:
                scores = scores.masked_fill(~mask, float("-inf"))
            out = torch.matmul(torch.softmax(scores, dim=-1), v)  # [B, H, n, v]
        return out.transpose(1, 2).reshape(B, n, H * self.dv)

    def _absorbed(self, q, c_all, r_all) -> torch.Tensor:
        """One token against the latent cache, in the latent space; [B, 1, H * v]."""
        B, H = q.shape[0], self.n_heads
        w = self.kv_b_proj.weight.view(H, self.nope + self.dv, self.rank)
        w_uk, w_uv = w[:, : self.nope], w[:, self.nope :]  # [H, nope, rank], [H, v, rank]
        q_nope, q_rope = q.split([self.nope, self.rope], dim=-1)  # [B, H, 1, .]
        q_lat = torch.matmul(q_nope, w_uk)  # [B, H, 1, rank]: 2 H nope rank
        scores = torch.matmul(q_lat, c_all.transpose(-2, -1))  # [B, H, 1, t]: 2 H rank per key
        scores = scores + torch.matmul(q_rope, r_all.transpose(-2, -1))  # 2 H rope per key
        weights = torch.softmax(scores * self.scale, dim=-1)
        o_lat = torch.matmul(weights, c_all)  # [B, H, 1, rank]: 2 H rank per key
        out = torch.matmul(o_lat, w_uv.transpose(-2, -1))  # [B, H, 1, v]: 2 H rank v
        return out.transpose(1, 2).reshape(B, 1, H * self.dv)
