"""SGLang's pools for hybrid models: linear-attention (Gated DeltaNet, Qwen3-Next) state and
Llama 4's chunked layers, per release where the rule changed.

Linear layers (Qwen3NextForCausalLM, sglang #10233, first in v0.5.2 b0d25e72c; read in the
kvcache-ai/sglang_awq fork's history to v0.5.6.post2 5c8bd8b51 and in the PyPI wheels 0.5.7 -
0.5.23). ModelRunner.profile_max_num_token counts only the full-attention layers in the token
pool's cell (mambaish_config.full_attention_layer_ids) and first takes the mamba state pool out of
the budget (handle_max_mamba_cache; from 0.5.16 KVCacheConfigurator._handle_max_mamba_cache):
- one request's state, mamba_cache_per_req (configs/mamba_utils.py Mamba2CacheParams): per
  linear layer a conv state of conv_dim / attn_tp x (kernel - 1) in bf16 (CONV_DTYPE) and a
  temporal state of value heads / attn_tp x dk x dv in --mamba-ssm-dtype (float32 by default);
- the number of states (max_mamba_cache_size), rules by release:
  A 0.5.2 - 0.5.3.post1: radix cache forced off for GDN models (model_runner.py @ b0d25e72c
    :308-324); --max-mamba-cache-size, else --max-running-requests, else 512;
  B 0.5.3.post2 - 0.5.6.post2 (#11214 a55cf5304, model_runner.py @ baf277a9b
    handle_max_mamba_cache): with --disable-radix-cache as A; else
    int(rest x r / (1 + r) // per_req), r = --mamba-full-memory-ratio (0.9): a given
    --max-mamba-cache-size is overwritten, so kvcalc refuses it there;
  C 0.5.7 - 0.5.8 (#14792 e61dabf5e; model_runner_kv_cache_mixin.py:145-199 in the 0.5.7
    wheel): a given size is kept with the radix cache on too;
  D 0.5.9 - 0.5.16 (mixin in the 0.5.9 wheel; kv_cache_configurator.py:1703-1813 in 0.5.16):
    given size; else max_running_requests with --disable-radix-cache; else the ratio;
  E 0.5.17 on (kv_cache_configurator.py in the 0.5.17 wheel, the same in 0.5.23 :3229-3409):
    the pool's padding slot is charged: ratio int((budget - per_req) // per_req), and
    (size + 1) x per_req leaves the budget.
  From 0.5.13 a size <= 0 raises "Not enough GPU memory for hybrid (mamba/linear-attention)
  state cache" (kv_cache_mixin in the 0.5.13 wheel).
- MambaPool allocates size + 1 slots a layer (mem_cache/memory_pool.py @ b0d25e72c :118-123,
  0.5.7 :186-196) and logs "Mamba Cache is allocated. [max_mamba_cache_size: N, (from
  0.5.3.post2)] conv_state size: X GB, ssm_state size: Y GB " (GiB, two decimals);
  HybridLinearKVPool's full-attention MHATokenToKVPool then logs "KV Cache is allocated" over
  the full layers only.
The cap the pool puts on max_running_requests (max_mamba_cache_size // the states a running
request may hold, by release and mamba scheduler strategy): calc/serving/sglang_requests.py.
Not modelled, refused: pipeline parallelism, DP attention, speculative decoding, a TP size that
does not divide the key heads (SGLang widens the shards).

Mamba-2 layers (NemotronHForCausalLM in every wheel read, 0.5.7 on; GraniteMoeHybridForCausalLM
from 0.5.9): the same pool and rules, the state from NemotronHConfig / GraniteMoeHybridConfig
.mamba2_cache_params (Mamba2StateShape.create: calc.layers_ssm.Mamba2.rank_state_elems), conv in
bf16, temporal in --mamba-ssm-dtype; the token pool over the attention layers only
(full_attention_layer_ids), MLP / MoE-only blocks in neither pool.
The temporal state's dtype by release: calc/serving/sglang_ssm.py. Qwen3.5 (configs/ and
models/qwen3_5.py) from 0.5.9, absent from the 0.5.8 wheel: refused before.

Sliding-window pools (Llama 4's chunked layers, gpt-oss): calc/serving/sglang_swa.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from pydantic import BaseModel, Field

from calc.layers import KINDS
from calc.plan_core import floor_int
from calc.serving.defaults_sglang import release_name, sglang_version
from calc.serving.sglang_ssm import SSM_BYTES, SSM_NAMES, sglang_ssm_dtype
from calc.serving.sglang_swa import check_gemma_swa, gpt_oss_swa, llama4_swa
from calc.serving.vllm_mamba import is_nemotron_h, is_qwen35

GIB = 2**30
GDN_FROM = (0, 5, 2, 0)  # Qwen3-Next (#10233)
NEMOTRON_H_FROM = (0, 5, 7, 0)  # the oldest wheel read (kvcalc reads no older one for it)
GRANITE_HYBRID_FROM = (0, 5, 9, 0)
RATIO_FROM = (0, 5, 3, 2)  # mamba_full_memory_ratio, radix cache on (#11214)
GIVEN_KEPT_FROM = (0, 5, 7, 0)  # a given --max-mamba-cache-size kept with the radix cache (#14792)
RADIX_OFF_NEEDS_MRR_FROM = (0, 5, 9, 0)
QWEN35_FROM = (0, 5, 9, 0)
PADDING_SLOT_FROM = (0, 5, 17, 0)
SIZE_CHECK_FROM = (0, 5, 13, 0)
DEFAULT_SLOTS = 512  # no --max-running-requests with the radix cache off
CONV_BYTES = 2  # CONV_DTYPE = torch.bfloat16


class SglangMambaArgs(BaseModel):
    """SGLang's server arguments for the mamba state pool (`--help` names)."""

    max_mamba_cache_size: int | None = Field(default=None, gt=0)
    mamba_full_memory_ratio: float = Field(default=0.9, gt=0)
    mamba_ssm_dtype: Literal["float32", "bfloat16", "float16"] | None = None  # None: not given
    disable_radix_cache: bool = False


@dataclass(frozen=True)
class MambaState:
    """One request's linear-attention state on one rank, over all its linear layers."""

    layers: int
    conv_bytes: int  # a layer's conv state (bf16)
    ssm_elems: int  # a layer's temporal state, in elements (its dtype is a server argument)
    config_dtype: str | None = None  # config.json mamba_ssm_dtype, as SGLang reads it (docstring)
    text_qwen35: bool = False  # Qwen3_5(Moe)ForCausalLM: sglang_requests.mamba_ratio

    def per_req(self, ssm_dtype: str) -> int:
        return (self.conv_bytes + self.ssm_elems * SSM_BYTES[ssm_dtype]) * self.layers


def mamba_state(spec, attn_tp: int) -> MambaState:
    """Mamba2StateShape.create for Qwen3-Next: conv (conv_dim / tp, kernel - 1), temporal (value
    heads / tp, dv, dk); for Mamba-2 layers (NemotronHConfig / GraniteMoeHybridConfig
    .mamba2_cache_params): calc.layers_ssm.Mamba2.rank_state_elems."""
    if "mamba" in spec.attention_counts:
        conv, ssm = KINDS["mamba"].rank_state_elems(spec, attn_tp)
        return MambaState(spec.attention_counts["mamba"], conv * CONV_BYTES, ssm)
    if spec.linear_num_key_heads % attn_tp or spec.linear_num_value_heads % attn_tp:
        raise ValueError(
            f"'tensor_parallel_size' must divide linear_num_key_heads="
            f"{spec.linear_num_key_heads} and linear_num_value_heads="
            f"{spec.linear_num_value_heads} for SGLang's mamba pool (kvcalc does not model its "
            f"widened shards): got {attn_tp}"
        )
    conv = KINDS["linear_attention"].conv_dim(spec) // attn_tp * (spec.linear_conv_kernel_dim - 1)
    ssm = spec.linear_num_value_heads // attn_tp * spec.linear_key_head_dim
    ssm *= spec.linear_value_head_dim
    layers = spec.attention_counts["linear_attention"]
    config_dtype = SSM_NAMES.get(spec.mamba_ssm_cache_dtype) if spec.mamba_ssm_cache_dtype else None
    text_qwen35 = is_qwen35(spec) and spec.vision is None
    return MambaState(layers, conv * CONV_BYTES, ssm, config_dtype, text_qwen35)


def check_mamba2_version(spec, v: tuple[int, ...]) -> None:
    """NemotronHForCausalLM (configs/ and models/nemotron_h.py, MoE blocks included) is in every
    wheel read, 0.5.7 - 0.5.23; GraniteMoeHybridForCausalLM from 0.5.9 (absent from 0.5.8)."""
    since = NEMOTRON_H_FROM if is_nemotron_h(spec) else GRANITE_HYBRID_FROM
    if v < since:
        raise ValueError(
            f"'version' must be at least {release_name(since)} for {spec.name!r}'s Mamba-2 layers "
            f"in SGLang (older releases not read, or without the model): got {release_name(v)}"
        )


def check_mamba_args(version: str, config) -> tuple[int, ...]:
    """The release as a tuple; refuses what the release does not do or kvcalc does not model."""
    v = sglang_version(version)
    if v < GDN_FROM:
        raise ValueError(
            f"'version' {version}: SGLang serves Qwen3-Next's linear layers from 0.5.2 (#10233)"
        )
    given = config.max_mamba_cache_size
    if given is not None and RATIO_FROM <= v < GIVEN_KEPT_FROM and not config.disable_radix_cache:
        raise ValueError(
            f"'max_mamba_cache_size' is overwritten by the mamba_full_memory_ratio split in "
            f"SGLang {release_name(v)} unless 'disable_radix_cache' is set: got {given}"
        )
    if config.enable_dp_attention:
        raise ValueError("'enable_dp_attention' with linear-attention layers is not modelled yet")
    return v


def mamba_slots(v: tuple[int, ...], config, rest, per_req: int):
    """max_mamba_cache_size for `rest` bytes (profile_max_num_token's budget, int or array)."""
    given, mrr = config.max_mamba_cache_size, config.max_running_requests
    radix_off = config.disable_radix_cache or v < RATIO_FROM
    if v >= RADIX_OFF_NEEDS_MRR_FROM:
        if given is not None:
            return given
        if radix_off and mrr is not None:
            return mrr
    elif radix_off or (given is not None and v >= GIVEN_KEPT_FROM):
        return given or mrr or DEFAULT_SLOTS
    r = config.mamba_full_memory_ratio
    budget = rest * r / (1 + r)
    if v >= PADDING_SLOT_FROM:
        budget = budget - per_req
    return floor_int(budget // per_req)


def sglang_mamba_pool(state: MambaState, config, rest) -> dict:
    """The mamba pool and what it leaves of `rest` for the full layers' token pool."""
    v = check_mamba_args(config.version, config)
    ssm_dtype = sglang_ssm_dtype(state.config_dtype, config.mamba_ssm_dtype, v)
    per_req = state.per_req(ssm_dtype)
    slots = mamba_slots(v, config, rest, per_req)
    charged = slots + 1 if v >= PADDING_SLOT_FROM else slots
    rows = (slots + 1) * state.layers  # MambaPool: size + 1 slots a layer
    return {
        "slots": slots,
        "rest": rest - charged * per_req,
        "conv_bytes": rows * state.conv_bytes,
        "ssm_bytes": rows * state.ssm_elems * SSM_BYTES[ssm_dtype],
        "refusal": _refusal(v, slots),
    }


def _refusal(v, slots):
    if v >= SIZE_CHECK_FROM and np.any(np.asarray(slots) <= 0):
        return "Not enough GPU memory for hybrid (mamba/linear-attention) state cache."
    return None


def mamba_log_line(version: str, pool: dict) -> str:
    """MambaPool's start-up line (a trailing space, as SGLang prints it)."""
    sizes = (
        f"conv_state size: {pool['conv_bytes'] / GIB:.2f}GB, "
        f"ssm_state size: {pool['ssm_bytes'] / GIB:.2f}GB "
    )
    if sglang_version(version) < RATIO_FROM:
        return "Mamba Cache is allocated. " + sizes
    return f"Mamba Cache is allocated. max_mamba_cache_size: {pool['slots']}, " + sizes


def sglang_hybrid_fields(spec, tp: int, pp: int, version, split, swa: bool = True):
    """(KVLayout fields, layers each rank's token pool holds) for SGLang's hybrid pools; `swa`:
    its hybrid SWA memory on (calc.serving.sglang_swa.hybrid_swa_memory)."""
    counts = spec.attention_counts
    check_gemma_swa(spec, version)
    if "mamba" in counts:
        check_mamba2_version(spec, version)
    if is_qwen35(spec) and version < QWEN35_FROM:
        raise ValueError(
            f"'version' must be at least {release_name(QWEN35_FROM)} for Qwen3.5 in SGLang "
            f"(configs/qwen3_5.py, models/qwen3_5.py; absent from the 0.5.8 wheel): got "
            f"{release_name(version)}"
        )
    if "linear_attention" in counts or "mamba" in counts:
        if set(counts) - {"linear_attention", "mamba", "none", "full_attention"}:
            raise ValueError(f"'model' {spec.name!r}: linear layers with {sorted(counts)}")
        if pp > 1:
            raise ValueError(
                "'pipeline_parallel_size' > 1 with SGLang's mamba pool is not modelled yet"
            )
        return {"sglang_mamba": mamba_state(spec, tp)}, (counts.get("full_attention", 0),)
    if spec.family == "gpt-oss":
        return gpt_oss_swa(spec, version, pp, swa), split
    if "chunked_attention" in counts:
        swa = llama4_swa(spec, version)
        if swa and pp > 1:
            raise ValueError(
                "'pipeline_parallel_size' > 1 with SGLang's sliding-window pool is not modelled"
            )
        return ({"sglang_swa": swa} if swa else {}), split
    return {}, split
