"""Upper bounds on every size kvcalc takes: one table, enforced alike by the API (ModelSpec and
calc.errors.check_count), the CLI (its integer arguments) and the dashboard (its inputs).

The bounds are far above any published model or deployment, so no real input meets them; they
exist so that a typo or a hostile file (10^12 layers) gets a clear error instead of numbers
nobody can read, int64 overflows, or a page that cannot be drawn. Each carries its reason.

>>> check_limit("hidden_size", 8192)
8192
>>> check_limit("hidden_size", 10**9)
Traceback (most recent call last):
...
ValueError: 'hidden_size' must be <= 1,048,576: got 1,000,000,000
"""

from __future__ import annotations

import math

# --- model shape (ModelSpec fields, Hugging Face config.json names) ----------------------------
# the deepest published decoders have 126 layers (Llama 3.1 405B): 80x headroom
MAX_LAYERS = 10_000
# widest published hidden size 18,432 (PaLM 540B): 2^20 is 57x that
MAX_HIDDEN = 2**20
# most heads published: 128 query heads (Falcon 40B, Llama 3.1 405B); KV heads <= query heads
MAX_HEADS = 2**14
# largest published head_dim: 256 (Gemma, PaLM)
MAX_HEAD_DIM = 2**14
# widest published MLP: 73,728 (PaLM 540B, 4 x 18,432): 2^22 is 57x that
MAX_INTERMEDIATE = 2**22
# largest published vocabularies: 256,000 (PaLM, Gemma): 2^24 is 65x that
MAX_VOCAB = 2**24
# longest published context: 10M tokens (Llama 4 Scout): 2^26 = 67,108,864 is 6.7x that
MAX_CONTEXT = 2**26
# most experts published: 256 routed experts (DeepSeek-V3): 2^14 is 64x that
MAX_EXPERTS = 2**14

# --- workloads and deployments -----------------------------------------------------------------
# tokens per sequence: serving engines index positions and block tables with int32
MAX_SEQ_LEN = 2**31
# concurrent sequences: vLLM's max_num_seqs defaults to 256-1024; 2^24 is 16,384x that
MAX_BATCH = 2**24
# GPUs in one deployment: 512 nodes of 8
MAX_GPUS = 4096
# KV block (page) size: vLLM uses 16-256 tokens
MAX_BLOCK_SIZE = 2**16
# int4 quantization group: GPTQ / AWQ use 32-128 weights; a whole row of the widest MLP at most
MAX_GROUP_SIZE = MAX_INTERMEDIATE

LIMITS: dict[str, int] = {
    # ModelSpec (its `head_dim_` field is named by its alias, `head_dim`)
    "num_hidden_layers": MAX_LAYERS,
    "hidden_size": MAX_HIDDEN,
    "num_attention_heads": MAX_HEADS,
    "num_key_value_heads": MAX_HEADS,
    "head_dim": MAX_HEAD_DIM,
    "intermediate_size": MAX_INTERMEDIATE,
    "vocab_size": MAX_VOCAB,
    "max_position_embeddings": MAX_CONTEXT,
    "sliding_window": MAX_CONTEXT,
    "sliding_window_pattern": MAX_LAYERS,  # every N-th layer is global: N <= layers
    "num_local_experts": MAX_EXPERTS,
    "num_experts_per_tok": MAX_EXPERTS,
    "attention_chunk_size": MAX_CONTEXT,
    "moe_intermediate_size": MAX_INTERMEDIATE,
    "shared_expert_intermediate_size": MAX_INTERMEDIATE,
    "q_lora_rank": MAX_HIDDEN,  # MLA's latent ranks are at most the hidden width in practice
    "kv_lora_rank": MAX_HIDDEN,
    "qk_nope_head_dim": MAX_HEAD_DIM,
    "qk_rope_head_dim": MAX_HEAD_DIM,
    "v_head_dim": MAX_HEAD_DIM,
    "linear_num_key_heads": MAX_HEADS,
    "linear_num_value_heads": MAX_HEADS,
    "linear_key_head_dim": MAX_HEAD_DIM,
    "linear_value_head_dim": MAX_HEAD_DIM,
    "linear_conv_kernel_dim": MAX_HEAD_DIM,  # a few taps (4) in every published model
    "num_nextn_predict_layers": MAX_LAYERS,
    "mamba_num_heads": MAX_HEADS,
    "mamba_head_dim": MAX_HEAD_DIM,
    "ssm_state_size": MAX_HEAD_DIM,  # 128 / 256 in every published Mamba-2
    "n_groups": MAX_HEADS,
    "conv_kernel": MAX_HEAD_DIM,  # 4 taps in every published Mamba-2
    "mamba_chunk_size": MAX_CONTEXT,
    # the API's counts (calc.errors.check_count names) and the CLI / dashboard inputs
    "seq_len": MAX_SEQ_LEN,
    "context": MAX_SEQ_LEN,
    "prompt_tokens": MAX_SEQ_LEN,
    "output_tokens": MAX_SEQ_LEN,
    "max_num_batched_tokens": MAX_SEQ_LEN,
    "window": MAX_CONTEXT,
    "batch": MAX_BATCH,
    "max_num_seqs": MAX_BATCH,
    "gpus": MAX_GPUS,
    "max_gpus": MAX_GPUS,
    "tp": MAX_GPUS,
    "pp": MAX_GPUS,
    "block_size": MAX_BLOCK_SIZE,
    "group_size": MAX_GROUP_SIZE,
}
_ALIASES = {"head_dim_": "head_dim"}  # ModelSpec's field name -> the name people use


def limit(field: str) -> int | None:
    """The upper bound of `field`, or None when it has none."""
    return LIMITS.get(_ALIASES.get(field, field))


def fmt_int(value: int) -> str:
    """1000000000 -> '1,000,000,000'; a number too long to read -> '1.00e+40'."""
    if abs(value) < 10**21:
        return f"{value:,}"
    if value.bit_length() > 1000:  # past float range (and str() refuses > 4300 digits)
        return f"a number of about {int(value.bit_length() * math.log10(2)):,} digits"
    return f"{float(value):.2e}"


def _as_int(value: object) -> int | None:
    """`value` read as an integer the way pydantic's lax mode would (int, 1e12, "12"), else
    None (pydantic then names the type error)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if math.isfinite(value) and value.is_integer() else None
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            return None
    try:
        import operator

        return operator.index(value)  # numpy integers
    except TypeError:
        return None


def check_limit(field: str, value):
    """`value` unchanged when it is within `field`'s bound (or not a number, or `field` has no
    bound), else a ValueError naming the field, the bound and the value."""
    bound = limit(field)
    n = _as_int(value) if bound is not None else None
    if n is not None and n > bound:
        name = _ALIASES.get(field, field)
        raise ValueError(f"'{name}' must be <= {bound:,}: got {fmt_int(n)}")
    return value
