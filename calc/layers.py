"""Per attention-layer kind: what one layer caches and what it costs (one home per formula).

As vLLM's `kv_cache_interface.py` has one spec class per kind of attention layer, each kind here
answers the same questions for one layer of a given ModelSpec:
- `kv_elems_per_token`: cache elements one token adds (K and V; MLA's latent; 0 for linear);
- `cached_tokens(n)`: tokens one sequence keeps after n tokens;
- `state_elems`: a constant per-sequence state (Gated DeltaNet's conv + recurrent state;
  Mamba-2's conv + SSM state, calc/layers_ssm.py);
- `pairs(n, causal)`, `decode_keys(context)` and `flops_per_pair`: the attention products;
- `token_flops`: per-token work that is not pairwise (linear attention's state update);
- `index_flops_per_pair` x `index_pairs(n)` / `index_decode_keys`: an indexer's scoring (DeepSeek
  Sparse Attention: every earlier key; DeepSeek-V4's CSA: every earlier compressed entry), on top
  of the `pairs` the attention itself computes;
- `cache_bits(n)`: what one sequence's cache holds in one layer (tokens x elements + state;
  DeepSeek-V4's kinds add their compressed entries and, in transformers, the compressor's
  buffers: calc/layers_v4.py).

Two cache conventions (`Convention`):
- "engine": what the architecture needs, as vLLM and SGLang allocate it: a sliding layer keeps
  `window` tokens, a chunked layer its chunk, an MLA layer one latent of kv_lora_rank +
  qk_rope_head_dim per token, a linear layer a conv state of kernel - 1 columns plus its
  recurrent state;
- "transformers": what transformers 5.x's DynamicCache holds: sliding and chunked layers keep
  window - 1 / chunk - 1 tokens (`DynamicSlidingWindowLayer`), MLA layers the same latent,
  linear layers a conv state of `kernel` columns.
Counting conventions: 2 FLOPs per multiply-add; H is the *query* head count.

>>> from calc.spec import ModelSpec
>>> s = ModelSpec(name="t", num_hidden_layers=1, hidden_size=64, num_attention_heads=8,
...               num_key_value_heads=2, intermediate_size=128, vocab_size=100)
>>> KINDS["full_attention"].kv_elems_per_token(s, "engine")   # 2 * G * head_dim
32
"""

from __future__ import annotations

from typing import Literal

from calc.spec import ModelSpec

Convention = Literal["engine", "transformers"]


def causal_pairs(n, window=None, minimum=min):
    """Query-key pairs of a causal prefill of n tokens (query i sees keys 0..i, at most
    `window` of them). `minimum` lets numpy callers pass np.minimum."""
    if window is None:
        return n * (n + 1) // 2
    m = minimum(n, window)
    return m * (m + 1) // 2 + (n - m) * window  # later queries see w keys


def whole_blocks(tokens, block_size):
    """Tokens rounded up to whole blocks of `block_size` (None: as they are)."""
    return tokens if block_size is None else -(-tokens // block_size) * block_size


class Softmax:
    """Full causal attention: every token is cached, every earlier key is scored."""

    name = "full_attention"

    @staticmethod
    def window(spec: ModelSpec) -> int | None:
        return None

    def kv_elems_per_token(self, spec: ModelSpec, convention: Convention) -> int:
        if spec.is_v4:  # DeepSeek-V4: K = V, one kv_proj head the engines cache once;
            # transformers' DynamicSlidingWindowLayer stores it as keys and as values (measured:
            # tests/test_deepseek_v4_reference.py)
            return spec.head_dim * (2 if convention == "transformers" else 1)
        if not spec.is_mla:
            return 2 * spec.n_kv_heads * spec.head_dim  # K and V, G heads each
        # the latent c_KV and the shared k_rope; transformers 5.x's DeepSeek attention caches
        # the same two tensors (measured: tests/test_reference_modern.py)
        return spec.kv_lora_rank + spec.qk_rope_head_dim

    def cached_tokens(self, spec: ModelSpec, n, convention: Convention, minimum=min):
        w = self.window(spec)
        if w is None:
            return n
        return minimum(n, w - 1 if convention == "transformers" else w)

    def state_elems(self, spec: ModelSpec, convention: Convention) -> int:
        return 0

    def state_bits(self, spec: ModelSpec, bits: int, convention: Convention) -> int:
        """The constant per-sequence state in bits, for a cache of `bits`-bit elements."""
        return self.state_elems(spec, convention) * bits

    def cache_bits(self, spec: ModelSpec, n, bits, convention: Convention, block_size=None,
                   minimum=min):  # fmt: skip
        """Bits one sequence's cache holds in one layer after n tokens: the tokens kept (in
        whole `block_size` blocks) x elements per token, plus the constant state. `n` and
        `bits` may be numpy arrays (pass minimum=np.minimum)."""
        t = whole_blocks(self.cached_tokens(spec, n, convention, minimum), block_size)
        per_token = self.kv_elems_per_token(spec, convention)
        return t * per_token * bits + self.state_bits(spec, bits, convention)

    def flops_per_pair(self, spec: ModelSpec, mla_absorbed: bool = False) -> int:
        """QK^T (2 * H * d_qk) + AV (2 * H * d_v) for one query-key pair in one layer."""
        H = spec.num_attention_heads
        if (
            spec.is_mla and mla_absorbed
        ):  # scores and values in the latent space (DeepSeek-V2 §2.1.2)
            return 2 * H * (spec.kv_lora_rank + spec.qk_rope_head_dim) + 2 * H * spec.kv_lora_rank
        return 2 * H * spec.qk_head_dim + 2 * H * spec.v_dim

    def pairs(self, spec: ModelSpec, n, causal: bool = True, minimum=min):
        """Pairs one sequence of n tokens scores in one head; without `causal`, what a dense
        kernel computes (n^2), whatever the window or chunk."""
        return causal_pairs(n, self.window(spec), minimum) if causal else n * n

    def decode_keys(self, spec: ModelSpec, context, minimum=min):
        """Keys a new token scores when `context` keys (itself included) are in reach."""
        w = self.window(spec)
        return context if w is None else minimum(context, w)

    def token_flops(self, spec: ModelSpec) -> int:
        return 0

    def index_flops_per_pair(self, spec: ModelSpec) -> int:
        """FLOPs per query-key pair an indexer scores (`index_pairs`), besides `pairs`."""
        return 0

    def index_pairs(self, spec: ModelSpec, n, causal: bool = True, minimum=min):
        """Query-key pairs an indexer scores in a prefill of n tokens: every earlier key."""
        return causal_pairs(n) if causal else n * n

    def index_decode_keys(self, spec: ModelSpec, context, minimum=min):
        """Keys an indexer scores for a new token with `context` keys in reach."""
        return context


class Sliding(Softmax):
    """Sliding-window attention: a query sees the last `sliding_window` keys (itself included)."""

    name = "sliding_attention"

    @staticmethod
    def window(spec: ModelSpec) -> int | None:
        return spec.sliding_window


class Chunked(Softmax):
    """Chunked local attention (Llama 4): queries see earlier keys of their own chunk only."""

    name = "chunked_attention"

    @staticmethod
    def window(spec: ModelSpec) -> int | None:
        return spec.attention_chunk_size

    def pairs(self, spec: ModelSpec, n, causal: bool = True, minimum=min):
        if not causal:
            return n * n
        C = spec.attention_chunk_size
        full, rest = n // C, n % C
        return full * (C * (C + 1) // 2) + rest * (rest + 1) // 2  # causal inside each chunk

    def decode_keys(self, spec: ModelSpec, context, minimum=min):
        C = spec.attention_chunk_size
        return (context - 1) % C + 1 if context > 0 else 0  # position context-1's chunk so far


class Linear(Softmax):
    """Gated DeltaNet (Qwen3-Next): no per-token cache, a constant state per sequence."""

    name = "linear_attention"

    def kv_elems_per_token(self, spec: ModelSpec, convention: Convention) -> int:
        return 0

    def cached_tokens(self, spec: ModelSpec, n, convention: Convention, minimum=min):
        return 0 * n

    @staticmethod
    def conv_dim(spec: ModelSpec) -> int:
        """Channels of the causal depthwise conv: q, k (key heads) and v (value heads)."""
        return 2 * spec.linear_num_key_heads * spec.linear_key_head_dim + (
            spec.linear_num_value_heads * spec.linear_value_head_dim
        )

    def state_elems(self, spec: ModelSpec, convention: Convention) -> int:
        k = spec.linear_conv_kernel_dim
        conv = self.conv_dim(spec) * (k if convention == "transformers" else k - 1)
        recurrent = (  # one dk x dv matrix per value head
            spec.linear_num_value_heads * spec.linear_key_head_dim * spec.linear_value_head_dim
        )
        return conv + recurrent

    def state_bits(self, spec: ModelSpec, bits: int, convention: Convention) -> int:
        """transformers keeps the recurrent state in float32 whatever the model's dtype
        (measured: a bf16 Qwen3-Next's cache, tests/test_presets_modern.py); engines keep both
        states in the cache dtype."""
        if convention != "transformers":
            return self.state_elems(spec, convention) * bits
        conv = self.conv_dim(spec) * spec.linear_conv_kernel_dim
        return conv * bits + (self.state_elems(spec, convention) - conv) * 32

    def flops_per_pair(self, spec: ModelSpec, mla_absorbed: bool = False) -> int:
        return 0

    def pairs(self, spec: ModelSpec, n, causal: bool = True, minimum=min):
        return 0 * n

    def decode_keys(self, spec: ModelSpec, context, minimum=min):
        return 0 * context

    def token_flops(self, spec: ModelSpec) -> int:
        """Recurrent form, per token and layer: k^T S, the rank-1 delta update and q^T S (a
        dk x dv product each, per value head), plus the depthwise conv over `kernel` taps."""
        nv, dk, dv = (
            spec.linear_num_value_heads,
            spec.linear_key_head_dim,
            spec.linear_value_head_dim,
        )
        return 3 * 2 * nv * dk * dv + 2 * self.conv_dim(spec) * spec.linear_conv_kernel_dim


class Indexed(Softmax):
    """DeepSeek Sparse Attention (DeepSeek-V3.2): MLA whose query attends only to the
    `index_topk` earlier keys its lightning indexer scores highest (itself included while
    fewer exist). The indexer caches one key of index_head_dim per token and layer.

    Cache: the MLA latent plus the indexer key (transformers 5.x DynamicIndexedLayer holds both
    in the model dtype; the engines store them in their own fp8 formats: calc.serving.layout).
    FLOPs: the MLA products over min(i + 1, index_topk) keys a query (`pairs`); the indexer's
    scores q_h . k over index_n_heads heads of index_head_dim, then their weighted sum over
    the heads (weights_proj), over every earlier key: 2 x H_i x (d_i + 1) a pair
    (DeepseekV32Indexer.forward; its ReLU is not counted)."""

    name = "indexed_attention"

    @staticmethod
    def window(spec: ModelSpec) -> int | None:
        return None  # every token is cached: any of them may be picked later

    def kv_elems_per_token(self, spec: ModelSpec, convention: Convention) -> int:
        return spec.kv_lora_rank + spec.qk_rope_head_dim + spec.index_head_dim

    def pairs(self, spec: ModelSpec, n, causal: bool = True, minimum=min):
        return causal_pairs(n, spec.index_topk, minimum) if causal else n * n

    def decode_keys(self, spec: ModelSpec, context, minimum=min):
        return minimum(context, spec.index_topk)

    def index_flops_per_pair(self, spec: ModelSpec) -> int:
        return 2 * spec.index_n_heads * (spec.index_head_dim + 1)


KINDS: dict[str, Softmax] = {
    "full_attention": Softmax(),
    "sliding_attention": Sliding(),
    "chunked_attention": Chunked(),
    "linear_attention": Linear(),
    "indexed_attention": Indexed(),
}
from calc.layers_ssm import SSM_KINDS  # noqa: E402  (they subclass Linear)
from calc.layers_v4 import V4_KINDS  # noqa: E402  (they subclass Sliding)

KINDS.update(V4_KINDS)
KINDS.update(SSM_KINDS)


def convention_of(window_tokens: str, convention: str | None) -> Convention:
    """The cache convention from the new `convention` or the older `window_tokens` argument."""
    if window_tokens not in ("window", "window-1"):
        raise ValueError(f"'window_tokens' must be 'window' or 'window-1': got {window_tokens!r}")
    implied = "transformers" if window_tokens == "window-1" else None
    if convention is None:
        return implied or "engine"
    if convention not in ("engine", "transformers"):
        raise ValueError(f"'convention' must be 'engine' or 'transformers': got {convention!r}")
    if implied and convention != implied:
        raise ValueError(
            f"'window_tokens' window-1 is the transformers convention: got convention={convention!r}"
        )
    return convention
