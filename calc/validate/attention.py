"""The reference GQA attention module and its KV cache: what kvcalc's KV and attention numbers
are measured against.

Classic form, as the seed notes' `GroupedQueryAttention` (000_*.txt, section 11.5): separate
W_q (h -> H*d), W_k and W_v (h -> G*d), W_o (H*d -> h); each KV head is shared by H / G query
heads. G = H is MHA, G = 1 is MQA. Two attention paths:
- "materialized": scores = Q K^T (batch x H x n x t), softmax, times V; K/V repeated to H heads
  with `repeat_interleave`, as the seed does;
- "fused": `F.scaled_dot_product_attention(..., enable_gqa=True)`: no n x t matrix is stored.

The cache is static (allocated once for `max_tokens`, like HF's StaticCache and vLLM): a full
layer keeps every token; a sliding layer is a ring of `window` slots, so it holds the last
`window` tokens; a chunked layer (Llama 4) a ring of `chunk` slots, of which a query reads its
own chunk's (kvcalc's "engine" convention).
Per spec, also: q/k norms (per head or over all heads), gpt-oss's per-head sink logits (an extra
softmax column, materialized path only) and Qwen3-Next's sigmoid output gate (W_q emits 2x).

But: no RoPE or ALiBi (parameter-free and FLOP-free in kvcalc's convention: they change values,
not shapes); no dropout; a prefill must start on an empty cache (no chunked prefill).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from calc.spec import ModelSpec

PATHS = ("materialized", "fused")


# --- KV cache ---------------------------------------------------------------------------------


class LayerKVCache:
    """K and V of one layer: [B, G, capacity, d] each; a ring buffer when `window` is set."""

    def __init__(
        self, k: torch.Tensor, v: torch.Tensor, window: int | None, chunk: int | None = None
    ) -> None:
        self.k, self.v, self.window, self.chunk = k, v, window, chunk
        self.length = 0  # tokens seen so far (positions 0 .. length-1)

    @property
    def ring(self) -> bool:
        return self.window is not None or self.chunk is not None

    @property
    def capacity(self) -> int:
        return self.k.shape[2]

    @property
    def filled(self) -> int:
        """Slots holding a token: min(tokens seen, capacity)."""
        return min(self.length, self.capacity)

    def tensors(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self.k, self.v

    def prefill(self, k: torch.Tensor, v: torch.Tensor) -> None:
        """Store a prompt's K/V [B, G, n, d]; a ring keeps only the last `capacity` tokens."""
        if self.length:
            raise ValueError(f"'cache' must be empty for a prefill: holds {self.length} tokens")
        n, cap = k.shape[2], self.capacity
        if not self.ring and n > cap:
            raise ValueError(f"'max_tokens' must be >= {n} prompt tokens: got {cap}")
        keep = min(n, cap)
        slots = torch.arange(n - keep, n, device=k.device) % cap  # token p lives in slot p % cap
        self.k.index_copy_(2, slots, k[:, :, n - keep :])
        self.v.index_copy_(2, slots, v[:, :, n - keep :])
        self.length = n

    def append(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Add one token's K/V [B, G, 1, d]; return the keys/values it attends to."""
        pos, cap = self.length, self.capacity
        if not self.ring and pos >= cap:
            raise ValueError(f"'max_tokens' must be > {pos} to decode another token: got {cap}")
        self.k[:, :, pos % cap] = k[:, :, 0]
        self.v[:, :, pos % cap] = v[:, :, 0]
        self.length = pos + 1
        t = self.filled  # a ring's slot order does not matter: softmax is order-free over keys
        if self.chunk is not None:  # chunks start at multiples of cap: slots 0 .. pos % cap
            t = pos % cap + 1
        return self.k[:, :, :t], self.v[:, :, :t]


class KVCache:
    """One `LayerKVCache` per attention layer, shaped from the modules themselves."""

    def __init__(self, layers: list[LayerKVCache]) -> None:
        self.layers = layers

    @classmethod
    def for_attention(
        cls,
        attns: list[GQAAttention],
        batch: int,
        max_tokens: int,
        dtype: torch.dtype,
        device: torch.device | str,
    ) -> KVCache:
        return cls([a.new_cache(batch, max_tokens, dtype, device) for a in attns])

    @property
    def length(self) -> int:
        return self.layers[0].length if self.layers else 0

    def tensors(self) -> list[torch.Tensor]:
        return [t for layer in self.layers for t in layer.tensors()]

    def layer_nbytes(self) -> list[int]:
        return [sum(t.untyped_storage().nbytes() for t in layer.tensors()) for layer in self.layers]

    def nbytes(self) -> int:
        """Bytes of the cache tensors (their storages: a view cannot hide a larger buffer)."""
        return sum(t.untyped_storage().nbytes() for t in self.tensors())


# --- attention --------------------------------------------------------------------------------


def attention_mask(n: int, causal: bool, window, chunk, device) -> torch.Tensor | None:
    """[n, n] bool, True where query i may see key j; None when every pair is visible."""
    if not causal and window is None and chunk is None:
        return None
    i = torch.arange(n, device=device)[:, None]
    j = torch.arange(n, device=device)[None, :]
    ok = (j <= i) if causal else torch.ones(n, n, dtype=torch.bool, device=device)
    if window is not None:
        ok = ok & (i - j < window) & (j - i < window)  # band of `window` keys
    if chunk is not None:
        ok = ok & (i // chunk == j // chunk)  # same chunk only
    return ok


class GQAAttention(nn.Module):
    """Grouped-query attention with separate W_q, W_k, W_v, W_o and an optional KV cache."""

    def __init__(
        self,
        hidden: int,
        n_heads: int,
        n_kv_heads: int,
        head_dim: int,
        *,
        qkv_bias: bool = False,
        out_bias: bool = False,
        window: int | None = None,
        chunk: int | None = None,
        qk_norm: str = "none",
        sinks: bool = False,
        output_gate: bool = False,
    ) -> None:
        super().__init__()
        if n_heads % n_kv_heads:
            raise ValueError(f"'n_kv_heads' must divide n_heads={n_heads}: got {n_kv_heads}")
        self.n_heads, self.n_kv_heads, self.head_dim = n_heads, n_kv_heads, head_dim
        self.groups = n_heads // n_kv_heads  # query heads per KV head
        self.window = window  # a sliding layer attends to the last `window` tokens
        self.chunk = chunk  # a chunked layer attends within its `chunk`-token block
        self.qk_norm, self.output_gate = qk_norm, output_gate
        if qk_norm != "none":  # "head": RMSNorm(d) per head (Qwen3); "full": over H*d / G*d
            self.q_norm = nn.RMSNorm(head_dim if qk_norm == "head" else n_heads * head_dim)
            self.k_norm = nn.RMSNorm(head_dim if qk_norm == "head" else n_kv_heads * head_dim)
        if sinks:  # gpt-oss: one learned logit per head joins every softmax, then is dropped
            self.sinks = nn.Parameter(torch.zeros(n_heads))
        q_out = n_heads * head_dim * (2 if output_gate else 1)  # Qwen3-Next: query and gate
        self.W_q = nn.Linear(hidden, q_out, bias=qkv_bias)
        self.W_k = nn.Linear(hidden, n_kv_heads * head_dim, bias=qkv_bias)
        self.W_v = nn.Linear(hidden, n_kv_heads * head_dim, bias=qkv_bias)
        self.W_o = nn.Linear(n_heads * head_dim, hidden, bias=out_bias)

    @classmethod
    def from_spec(
        cls, spec: ModelSpec, window: int | None = None, *, kind: str | None = None
    ) -> GQAAttention:
        """The attention of one of `spec`'s layers: `window` a sliding layer's, or `kind` a
        layer type ("sliding_attention" takes spec.sliding_window, "chunked_attention" the
        chunk size)."""
        chunk = None
        if kind == "sliding_attention":
            window = spec.sliding_window
        elif kind == "chunked_attention":
            chunk = spec.attention_chunk_size
        return cls(
            spec.hidden_size,
            spec.num_attention_heads,
            spec.n_kv_heads,
            spec.head_dim,
            qkv_bias=spec.qkv_bias,
            out_bias=spec.attn_out_bias,
            window=window,
            chunk=chunk,
            qk_norm=spec.qk_norm,
            sinks=spec.attention_sinks,
            output_gate=spec.attn_output_gate,
        )

    def new_cache(self, batch: int, max_tokens: int, dtype, device) -> LayerKVCache:
        """A static cache for `max_tokens`: a ring of `window` (or `chunk`) slots if smaller."""
        ring = self.window or self.chunk
        cap = max_tokens if ring is None else min(max_tokens, ring)
        shape = (batch, self.n_kv_heads, cap, self.head_dim)  # [B, G, capacity, d]
        k = torch.zeros(shape, dtype=dtype, device=device)
        v = torch.zeros(shape, dtype=dtype, device=device)
        return LayerKVCache(k, v, self.window, self.chunk)

    def _heads(self, y: torch.Tensor, n_heads: int) -> torch.Tensor:
        B, n, _ = y.shape
        return y.view(B, n, n_heads, self.head_dim).transpose(1, 2)  # [B, heads, n, d], a view

    def forward(
        self,
        x: torch.Tensor,  # [B, n, h]
        cache: LayerKVCache | None = None,
        *,
        path: str = "materialized",
        causal: bool = True,
    ) -> torch.Tensor:
        if path not in PATHS:
            raise ValueError(f"'path' must be one of {', '.join(PATHS)}: got {path!r}")
        B, n, _ = x.shape
        q, gate = self.W_q(x), None
        if self.output_gate:  # per head [query | gate] (Qwen3NextAttention)
            q, gate = q.view(B, n, self.n_heads, 2 * self.head_dim).chunk(2, dim=-1)
            q, gate = q.reshape(B, n, -1), gate.reshape(B, n, -1)
        k, v = self.W_k(x), self.W_v(x)
        if self.qk_norm == "full":
            q, k = self.q_norm(q), self.k_norm(k)
        q = self._heads(q, self.n_heads)  # [B, H, n, d]
        k = self._heads(k, self.n_kv_heads)  # [B, G, n, d]
        v = self._heads(v, self.n_kv_heads)  # [B, G, n, d]
        if self.qk_norm == "head":
            q, k = self.q_norm(q), self.k_norm(k)
        if cache is not None and cache.length:  # decode: one new token against the cache
            if n != 1:
                raise ValueError(f"'x' must hold 1 token when the cache is filled: got {n}")
            k, v = cache.append(k, v)  # [B, G, t, d], t = tokens in the cache
            mask = None  # the cache holds exactly the keys this token may see
        else:
            if cache is not None:
                cache.prefill(k, v)
            mask = self._mask(n, causal, x.device)
        if path == "fused":
            if hasattr(self, "sinks"):
                raise ValueError("'path' must be materialized for attention sinks: got 'fused'")
            out = F.scaled_dot_product_attention(
                q, k, v, attn_mask=mask, enable_gqa=self.groups > 1
            )
        else:
            out = self._materialized(q, k, v, mask)
        out = out.transpose(1, 2).reshape(B, n, self.n_heads * self.head_dim)  # merge heads
        if gate is not None:
            out = out * torch.sigmoid(gate)
        return self.W_o(out)

    def _mask(self, n: int, causal: bool, device) -> torch.Tensor | None:
        return attention_mask(n, causal, self.window, self.chunk, device)

    def _materialized(self, q, k, v, mask) -> torch.Tensor:
        """The seed's path: repeat K/V to H heads, keep the [B, H, n, t] scores and weights."""
        if self.groups > 1:
            k = k.repeat_interleave(self.groups, dim=1)  # [B, H, t, d], a copy
            v = v.repeat_interleave(self.groups, dim=1)
        scores = torch.matmul(q, k.transpose(-2, -1))  # [B, H, n, t]
        scores.mul_(1.0 / math.sqrt(self.head_dim))
        if mask is not None:
            scores.masked_fill_(~mask, float("-inf"))
        if hasattr(self, "sinks"):  # a sink column per head joins the softmax, then is dropped
            sink = self.sinks.to(scores.dtype).view(1, -1, 1, 1).expand(*scores.shape[:3], 1)
            weights = torch.softmax(torch.cat([scores, sink], dim=-1), dim=-1)[..., :-1]
            return torch.matmul(weights, v)
        weights = torch.softmax(scores, dim=-1)  # [B, H, n, t]: the second n x t tensor
        del scores
        return torch.matmul(weights, v)  # [B, H, n, d]
