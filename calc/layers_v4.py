"""DeepSeek-V4's compressed attention kinds: CSA and HCA (one home for their formulas).

Every V4 layer is shared-KV MQA over a sliding window of `sliding_window` tokens: one kv_proj
head of head_dim is both K and V (calc.layers.Sliding with `spec.is_v4`). A compressed layer
adds one entry of head_dim per `rate` tokens (a softmax-gated pool of the window's kv_proj
outputs, transformers 5.x DeepseekV4HCACompressor / DeepseekV4CSACompressor):
- HCA (heavily_compressed_attention, rate compress_rate_hca): a query attends densely to every
  entry whose window has closed (query i sees entries j < (i + 1) // rate) plus its window;
- CSA (compressed_sparse_attention, rate compress_rate_csa): the lightning indexer keeps its own
  compressed key of index_head_dim per entry, scores every visible entry (index_n_heads heads:
  2 x H_i x (d_i + 1) FLOPs an entry, DeepseekV4IndexerScorer, ReLU not counted) and the query
  attends to the index_topk best plus its window.
Per pair, the attention costs 4 x H x head_dim (QK^T and AV, K = V = head_dim wide).

Cache conventions:
- "engine": the window's tokens (head_dim each, K = V stored once) + n // rate compressed
  entries of head_dim (+ index_head_dim for CSA's indexer key); each stream in whole blocks
  with `block_size`;
- "transformers": what DeepseekV4HCACache / DeepseekV4CSACache hold after n tokens: window - 1
  tokens of head_dim (keys; values are the same tensor), the compressed entries, the
  compressor's buffer of n % rate tokens (kv_proj and gate_proj outputs: 2 x head_dim for HCA,
  2 x 2 x head_dim + 2 x 2 x index_head_dim for CSA), and for CSA, once a window has closed,
  the overlap state: the last window's first-half kv (rate x head_dim, rate x index_head_dim)
  in the model dtype and its gate in float32 (gate + the fp32 position_bias).
  Measured: tests/test_deepseek_v4_reference.py.
"""

from __future__ import annotations

from calc.layers import Convention, Sliding, causal_pairs, whole_blocks
from calc.spec import ModelSpec


def closed_entry_pairs(n, rate, cap=None, minimum=min):
    """sum over queries i < n of min((i + 1) // rate, cap): the compressed entries the queries
    of a causal prefill see (at most `cap` of them each; None: all)."""

    def upto(x):  # sum_{t=1..x} t // rate, in closed form
        q, r = x // rate, x % rate
        return rate * (q * (q - 1) // 2) + q * (r + 1)

    if cap is None:
        return upto(n)
    x = minimum(n, cap * rate)  # from t = cap x rate on, every query sees cap entries
    return upto(x) + (n - x) * cap


class Compressed(Sliding):
    """A V4 layer with a compressor: its window plus n // rate compressed entries."""

    name = ""
    rate_field = ""

    def rate(self, spec: ModelSpec) -> int:
        return getattr(spec, self.rate_field)

    def topk(self, spec: ModelSpec) -> int | None:
        return None  # HCA: every closed entry is attended

    def entry_elems(self, spec: ModelSpec) -> int:
        """Cache elements of one compressed entry (and its indexer key)."""
        return spec.head_dim

    def buffer_elems(self, spec: ModelSpec) -> int:
        """transformers: elements one buffered (not yet compressed) token holds: kv + gate."""
        return 2 * spec.head_dim

    def overlap_elems(self, spec: ModelSpec) -> int:
        """transformers: elements of the carried half-window, kv and gate each (CSA only)."""
        return 0

    def kv_elems_per_token(self, spec: ModelSpec, convention: Convention) -> int:
        return spec.head_dim  # the window's K = V; transformers aliases values to keys

    def cache_bits(self, spec: ModelSpec, n, bits, convention: Convention, block_size=None,
                   minimum=min):  # fmt: skip
        m = self.rate(spec)
        window = whole_blocks(self.cached_tokens(spec, n, convention, minimum), block_size)
        entries = whole_blocks(n // m, block_size)
        total = (window * spec.head_dim + entries * self.entry_elems(spec)) * bits
        if convention != "transformers":
            return total
        total = total + (n % m) * self.buffer_elems(spec) * bits
        closed = minimum(n // m, 1)  # the overlap state appears with the first closed window
        return total + closed * m * self.overlap_elems(spec) * (bits + max(bits, 32))

    def pairs(self, spec: ModelSpec, n, causal: bool = True, minimum=min):
        m = self.rate(spec)
        if not causal:  # the dense kernel: every query x (all n keys + all n // m entries)
            return n * n + n * (n // m)
        window = causal_pairs(n, spec.sliding_window, minimum)
        return window + closed_entry_pairs(n, m, self.topk(spec), minimum)

    def decode_keys(self, spec: ModelSpec, context, minimum=min):
        visible = context // self.rate(spec)
        k = self.topk(spec)
        return minimum(context, spec.sliding_window) + (
            visible if k is None else minimum(visible, k)
        )


class HeavilyCompressed(Compressed):
    """HCA: dense attention over every closed entry of compress_rate_hca tokens."""

    name = "heavily_compressed_attention"
    rate_field = "compress_rate_hca"


class CompressedSparse(Compressed):
    """CSA: entries of compress_rate_csa tokens (two overlapping series: kv_proj / gate_proj emit
    2 x head_dim), the index_topk of them the lightning indexer scores highest."""

    name = "compressed_sparse_attention"
    rate_field = "compress_rate_csa"

    def topk(self, spec: ModelSpec) -> int | None:
        return spec.index_topk

    def entry_elems(self, spec: ModelSpec) -> int:
        return spec.head_dim + spec.index_head_dim  # the entry and the indexer's key

    def buffer_elems(self, spec: ModelSpec) -> int:
        return 2 * 2 * spec.head_dim + 2 * 2 * spec.index_head_dim

    def overlap_elems(self, spec: ModelSpec) -> int:
        return spec.head_dim + spec.index_head_dim

    def index_flops_per_pair(self, spec: ModelSpec) -> int:
        return 2 * spec.index_n_heads * (spec.index_head_dim + 1)

    def index_pairs(self, spec: ModelSpec, n, causal: bool = True, minimum=min):
        m = self.rate(spec)
        return closed_entry_pairs(n, m, None, minimum) if causal else n * (n // m)

    def index_decode_keys(self, spec: ModelSpec, context, minimum=min):
        return context // self.rate(spec)


V4_KINDS = {
    "compressed_sparse_attention": CompressedSparse(),
    "heavily_compressed_attention": HeavilyCompressed(),
}
