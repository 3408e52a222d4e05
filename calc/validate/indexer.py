"""DeepSeek Sparse Attention (DeepSeek-V3.2): MLA whose queries see only the `index_topk` keys a
"lightning indexer" picks, what kvcalc's `indexed_attention` numbers are measured against.

Followed: transformers 5.x modeling_deepseek_v32.py, `DeepseekV32Indexer` and
`DeepseekV32Attention` (module names as there, so their state dicts load into these modules):
- the indexer's query from MLA's query latent: wq_b (q_lora_rank -> index_n_heads x
  index_head_dim); its key k_norm(wk(x)) (h -> index_head_dim, LayerNorm with bias, eps 1e-6),
  one per token, shared by the index heads; per head weights weights_proj(x) (h -> index_n_heads);
- scores: relu(q_h . k) x head_dim^-1/2, weighted by weights x index_n_heads^-1/2 and summed over
  the heads (two matmuls: 2 x index_n_heads x (index_head_dim + 1) FLOPs a query-key pair, over
  every earlier key), in float32 as transformers does; causal keys only, then the top
  `index_topk` per query;
- prefill: MLA's naive attention over all keys with the causal mask and the top-k mask (as
  transformers' eager / sdpa paths: a dense kernel, n x n pairs);
- decode: the new token's indexer key joins the cache, the indexer scores every cached key, and
  the absorbed MLA reads only the min(t, index_topk) latents it picked (a sparse kernel, as
  FlashMLA's; kvcalc's `Indexed.decode_keys`).
Cache: per token the MLA latent, the rope key and the indexer key (transformers'
DynamicIndexedLayer: keys, values and indexer_keys; kvcalc's "engine" convention counts the
same elements).
But: no RoPE on the indexer's first qk_rope_head_dim dims (values, not shapes), no Hadamard
rotation and no fp8 scoring (both in DeepSeek's own kernels; transformers skips them too). Ties
in the scores (exact zeros: every head's relu at 0) go to the earliest key, so that a decode and
the full forward pick the same keys; transformers' topk leaves ties to the kernel.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from calc.spec import ModelSpec
from calc.validate.attention import PATHS, LayerKVCache, attention_mask
from calc.validate.mla import MLAAttention


class LightningIndexer(nn.Module):
    """DeepseekV32Indexer's parameters and scoring (see the module docstring)."""

    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        self.n_heads, self.head_dim = spec.index_n_heads, spec.index_head_dim
        self.wq_b = nn.Linear(spec.q_lora_rank, self.n_heads * self.head_dim, bias=False)
        self.wk = nn.Linear(spec.hidden_size, self.head_dim, bias=False)
        self.k_norm = nn.LayerNorm(self.head_dim, eps=1e-6)
        self.weights_proj = nn.Linear(spec.hidden_size, self.n_heads, bias=False)

    def key(self, x: torch.Tensor) -> torch.Tensor:
        """The indexer key of each token, [B, n, index_head_dim]: what its cache holds."""
        return self.k_norm(self.wk(x))

    def scores(self, x: torch.Tensor, q_latent: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        """Index scores [B, n, t] of n queries (x, their query latent) against t keys."""
        B, n, _ = x.shape
        q = self.wq_b(q_latent).view(B, n, self.n_heads, self.head_dim)
        # [B, n, Hi, di] @ [B, 1, di, t]: 2 Hi di per pair
        s = torch.matmul(q.float(), keys.float().transpose(-1, -2).unsqueeze(1))
        s = F.relu(s * self.head_dim**-0.5)
        w = self.weights_proj(x).float() * self.n_heads**-0.5  # [B, n, Hi]
        # [B, n, 1, Hi] @ [B, n, Hi, t]: 2 Hi per pair. + 0.0 turns -0.0 into +0.0 (a zero
        # score times a negative weight), so equal scores compare equal in the sort
        return torch.matmul(w.unsqueeze(-2), s).squeeze(-2) + 0.0


def top_keys(scores: torch.Tensor, k: int) -> torch.Tensor:
    """Indices [..., min(k, t)] of the k highest scores along the last axis, ties to the
    earliest key (a stable sort; `torch.topk` leaves the order of ties to its kernel)."""
    k = min(k, scores.shape[-1])
    return torch.sort(scores, dim=-1, descending=True, stable=True).indices[..., :k]


class IndexedLayerKVCache(LayerKVCache):
    """MLA's latent c [B, 1, cap, rank] and rope key [B, 1, cap, rope], plus the indexer key
    [B, 1, cap, index_head_dim]; every token is kept (any of them may be picked later)."""

    def __init__(self, c: torch.Tensor, k_rope: torch.Tensor, index_k: torch.Tensor) -> None:
        super().__init__(c, k_rope, None)
        self.index_k = index_k

    def tensors(self) -> tuple[torch.Tensor, ...]:
        return self.k, self.v, self.index_k

    def prefill(self, c, k_rope, index_k=None) -> None:
        if index_k is None:
            raise ValueError("'index_k' must be given: an indexed layer caches its indexer key")
        super().prefill(c, k_rope)  # checks the capacity
        self.index_k[:, :, : index_k.shape[2]] = index_k

    def append(self, c, k_rope, index_k=None):
        """Add one token; return the latents, rope keys and indexer keys of every token."""
        if index_k is None:
            raise ValueError("'index_k' must be given: an indexed layer caches its indexer key")
        pos = self.length
        c_all, r_all = super().append(c, k_rope)
        self.index_k[:, :, pos] = index_k[:, :, 0]
        return c_all, r_all, self.index_k[:, :, : self.length]


class IndexedMLAAttention(MLAAttention):
    """MLA (latent cache, absorbed decode) with the lightning indexer's top-k selection."""

    def __init__(self, spec: ModelSpec, cache: str = "latent") -> None:
        if spec.index_head_dim is None or spec.q_lora_rank is None:
            raise ValueError(
                "'spec' must set index_head_dim and q_lora_rank for indexed attention: got "
                f"index_head_dim={spec.index_head_dim}, q_lora_rank={spec.q_lora_rank}"
            )
        if cache != "latent":
            raise ValueError(f"'cache' must be 'latent' for indexed attention: got {cache!r}")
        super().__init__(spec, window=None, cache=cache)
        self.topk = spec.index_topk
        self.indexer = LightningIndexer(spec)

    def new_cache(self, batch: int, max_tokens: int, dtype, device) -> IndexedLayerKVCache:
        z = dict(dtype=dtype, device=device)
        return IndexedLayerKVCache(
            torch.zeros(batch, 1, max_tokens, self.rank, **z),
            torch.zeros(batch, 1, max_tokens, self.rope, **z),
            torch.zeros(batch, 1, max_tokens, self.indexer.head_dim, **z),
        )

    def forward(
        self, x, cache: IndexedLayerKVCache | None = None, *, path="materialized", causal=True
    ):
        if path not in PATHS:
            raise ValueError(f"'path' must be one of {', '.join(PATHS)}: got {path!r}")
        B, n, _ = x.shape
        q_lat = self.q_latent(x)
        q = self.heads(self.q_b_proj(q_lat))  # [B, H, n, dqk]
        c, k_rope = self.latent(x)  # [B, n, rank], [B, 1, n, rope]
        index_k = self.indexer.key(x)  # [B, n, di]
        if cache is not None and cache.length:  # decode: one token, sparse over the cache
            if n != 1:
                raise ValueError(f"'x' must hold 1 token when the cache is filled: got {n}")
            c_all, r_all, i_all = cache.append(c[:, None], k_rope, index_k[:, None])
            # [B, 1, k]: the query axis (1 token) stands for the cache's single latent head
            picked = top_keys(self.indexer.scores(x, q_lat, i_all[:, 0]), self.topk)
            c_sel = c_all.gather(2, picked[..., None].expand(-1, -1, -1, self.rank))
            r_sel = r_all.gather(2, picked[..., None].expand(-1, -1, -1, self.rope))
            return self.o_proj(self._absorbed(q, c_sel, r_sel))  # [B, 1, k, .] latents
        if cache is not None:
            cache.prefill(c[:, None], k_rope, index_k[:, None])
        scores = self.indexer.scores(x, q_lat, index_k)  # [B, n, n]
        visible = attention_mask(n, causal, None, None, x.device)  # [n, n] or None
        if visible is not None:
            scores = scores.masked_fill(~visible, float("-inf"))
        picked = top_keys(scores, self.topk)  # [B, n, k]
        keep = torch.zeros(B, n, n, dtype=torch.bool, device=x.device).scatter(-1, picked, True)
        if visible is not None:  # fewer than topk visible keys: the picks include masked ones
            keep = keep & visible
        k, v = self.expand(c, k_rope)
        return self.o_proj(self.dense(q, k, v, keep[:, None], path))
