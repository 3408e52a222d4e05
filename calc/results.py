"""Typed results: pydantic models that dump to dicts and turn into DataFrames.

`to_frame()` imports pandas only when called, so `import calc` stays light.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Result(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    def to_frame(self):
        """One row per result (or per item of `rows`, where a result has them)."""
        import pandas as pd

        rows = getattr(self, "rows", None)
        if rows is not None:
            return pd.DataFrame([r.model_dump() for r in rows])
        return pd.DataFrame([self.model_dump()])


class ParamReport(Result):
    model: str
    breakdown: dict[str, int]  # component -> parameters (see calc.params.COMPONENTS)
    total: int
    active_per_token: int  # = total for dense models
    non_embedding: int
    published: str | None  # as the source publishes it

    def to_frame(self):
        import pandas as pd

        return pd.DataFrame(
            {"component": list(self.breakdown), "params": list(self.breakdown.values())}
        )


class KVCacheReport(Result):
    model: str
    seq_len: int
    batch: int
    dtype: str
    block_size: int | None
    window_tokens: str
    bytes_per_token: int  # one more token, all layers, before window caps
    bytes_per_token_per_layer: int
    layer_bytes: list[int]  # index = layer
    total_bytes: int

    def to_frame(self):
        import pandas as pd

        return pd.DataFrame({"layer": range(len(self.layer_bytes)), "bytes": self.layer_bytes})


class AttentionReport(Result):
    model: str
    seq_len: int
    batch: int
    dtype: str
    prefill_attention_flops_full: int  # n^2 pairs, all layers
    prefill_attention_flops_causal: int  # exact causal (and window) pairs
    decode_attention_flops: int  # one token at context seq_len
    score_matrix_bytes: int  # one layer, materialized: batch x H x n x n
    fused_attention_bytes: int  # one layer, fused kernel: output + fp32 row stats
    prefill_forward_flops: int  # causal
    prefill_forward_flops_per_token: float
    decode_forward_flops: int
    training_flops_per_token: float
    attention_share_prefill: float  # attention / forward, causal prefill
    attention_share_decode: float  # attention / forward, one decode step at context seq_len


class AttentionVariant(Result):
    variant: str  # MHA / GQA / MQA / MLA / sliding / linear / this model
    kv_heads: int | None  # None: MLA's latent, linear attention's state, a mixed model
    ratio: float | None  # G / H
    kv_bytes_per_token: int  # all layers, before windows cap them
    kv_cache_bytes: int  # at seq_len x batch: tokens kept and constant states
    kv_proj_params: int  # W_k + W_v (+ biases; MLA's kv_a/kv_b, linear's projections)
    prefill_attention_flops: int  # causal, at seq_len
    decode_attention_flops: int  # one token at seq_len of context
    savings: float  # 1 - cache / MHA's cache (= 1 - G / H for full attention)


class AttentionComparison(Result):
    model: str
    seq_len: int
    batch: int
    dtype: str
    query_heads: int
    rows: list[AttentionVariant]
