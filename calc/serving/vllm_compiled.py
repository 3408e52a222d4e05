"""The live set of vLLM's torch.compile'd forward in the profile run, for a dense GQA decoder
(0.22.0 - 0.33.0, Model Runner V2), in place of calc.activation's generic estimate.

Read in the PyPI sdists (0.27.1 line numbers; the same code in 0.22.0 - 0.33.0):
- vllm/v1/worker/gpu/model_runner.py profile_run (lines 702-741): `_dummy_run(max_num_tokens,
  skip_attn=True, is_profile=True)`, which runs `execute_model(dummy_run=True)`: the compiled
  model (`need_eager=is_profile` only turns CUDA graphs off, line 1257), so the profile's peak is
  the Inductor-compiled forward's, not the eager one's.
- vllm/model_executor/models/qwen2.py (lines 110-114 MLP, 206-233 attention, 289-309 decoder
  layer; llama.py and qwen3.py have the same shape): per layer, `hidden_states, residual =
  input_layernorm(hidden_states, residual)`, qkv_proj, split, rotary, `attn(q, k, v)`, o_proj,
  post_attention_layernorm, gate_up_proj, act_fn, down_proj.
- vllm/model_executor/layers/attention/attention.py line 531: the attention output is a new
  `torch.empty((num_tokens, num_heads x head_size))` passed to the splitting op
  unified_attention_with_output (the piecewise graph's split point; with skip_attn the op
  writes nothing, the buffer is still allocated).
- vllm/model_executor/layers/activation.py lines 101-113: SiluAndMul makes a new
  (T, intermediate) output whether it runs natively (fused by Inductor) or as vLLM's kernel.
Inductor frees each buffer after its last use, so at any point only the tensors still needed
later are alive (torch/_inductor's generated wrapper `del`s them); vLLM's default VLLM_COMPILE
mode runs the native custom ops (custom_ops ['none'], as printed in the start-up config of
vllm PR #37522's log, https://github.com/vllm-project/vllm/pull/37522).

At the MLP's activation kernel the residual (T x h), gate_up (T x 2f) and its output (T x f) are
alive, f = intermediate / tp; the normed input died at the gate_up matmul. At the attention op
the residual, the qkv output (kept by v, a view of it), the rotated q and k (new tensors) and
the output buffer are alive: T x (h + (q + 2kv) + q + kv + q), q = heads / tp x d, kv =
kv heads per rank x d. The peak is the larger of the two. Not included (not derived): buffers
Inductor's first-run autotuning allocates (an L2-sized flush buffer and clones of mutated
arguments, torch/_inductor/runtime/benchmarking.py) when the compile cache misses.
"""

from __future__ import annotations

from math import ceil

from calc.sharding import kv_heads_per_gpu


def compiled_forward_applies(spec) -> bool:
    """A dense, gated-MLP, non-MLA model without linear-attention layers or a gated attention
    output: the decoder layer read above. Other models keep the generic estimate."""
    return (
        not spec.is_moe
        and not spec.is_mla
        and spec.mlp_kind == "gated"
        and spec.linear_num_value_heads is None
        and not spec.attn_output_gate
    )


def compiled_mlp_live_bytes(h: int, f: int, T: int, a: int) -> int:
    """Residual + gate_up output + activation output at the activation kernel, T rows."""
    return T * a * (h + 2 * f + f)


def compiled_attention_live_bytes(h: int, q: int, kv: int, T: int, a: int) -> int:
    """Residual + qkv output + rotated q and k + the attention output buffer, T rows."""
    return T * a * (h + (q + 2 * kv) + q + kv + q)


def compiled_forward_bytes(spec, tp: int, T: int, a: int) -> int:
    """The compiled forward's peak live set per rank at T = max_num_batched_tokens tokens, a
    bytes per activation element (see the module docstring)."""
    if not compiled_forward_applies(spec):
        raise ValueError(
            "compiled_forward_bytes: the model must be dense with a gated MLP and standard "
            f"attention (is_moe={spec.is_moe}, is_mla={spec.is_mla}, "
            f"mlp_kind={spec.mlp_kind!r}, linear_num_value_heads={spec.linear_num_value_heads}, "
            f"attn_output_gate={spec.attn_output_gate})"
        )
    h, d = spec.hidden_size, spec.head_dim
    q = spec.num_attention_heads // tp * d
    kv = kv_heads_per_gpu(spec, tp) * d
    f = ceil(spec.intermediate_size / tp)
    return max(compiled_mlp_live_bytes(h, f, T, a), compiled_attention_live_bytes(h, q, kv, T, a))
