"""SGLang's --kv-cache-dtype fp4_e2m1 (a choice from 0.5.4.post3, deprecated from 0.5.16, gone
from the choices in 0.5.21; read in the PyPI wheels 0.5.4.post3 - 0.5.23: model_executor/
model_runner.py, model_runner_kv_cache_mixin.py and pool_configurator.py's cell, mem_cache/
memory_pool.py MHATokenToKVPoolFP4 / MLATokenToKVPoolFP4, server_args.py
_handle_kv4_compatibility, mem_cache/kv_cache_dtype.py).

The pool (dtype torch.float4_e2m1fn_x2, one byte two values): fp4 values and one uint8 scale a
16 of them, per token (calc.serving.vllm_nvfp4.full_dim's D // 2 + D // 16):
- MLA (from 0.5.4.post3): kv_buffer (size + page, 1, (kv_lora_rank + rope) // 2) and
  kv_scale_buffer (size + page, (kv_lora_rank + rope) // 16) a layer; the cell counts both
  (DeepSeek-V3: 288 + 36 = 324 B a layer), "KV size" only kv_buffer.
- MHA (from 0.5.5.post3; before, no fp4 path: the pool is an fp8-sized one that cannot be
  written, not modelled): K / V (size + page, heads, head_dim // 2) and their scales
  (size + page, heads x head_dim // 16); the cell counts both, "K size" / "V size" the values
  only.
Lines: "FP4 (E2M1) KV Cache might lead to a accuracy drop!" (sic), "Using KV cache dtype:
torch.float4_e2m1fn_x2" to 0.5.12, the pool line's dtype from 0.5.13.
Backends: from 0.5.7 _handle_kv4_compatibility asserts an MLA backend among cutlass_mla,
flashinfer, trtllm_mla, flashmla and an MHA one among triton, torch_native, flex_attention,
trtllm_mha. kvcalc plans the SM100 family (B200 / B300), whose defaults pass: trtllm_mla for
DeepSeek-V3 / R1 and Kimi K2 (0.5.3.post2 on), FlashInfer MLA for the other MLA models,
trtllm_mha for the other attention models (0.5.6.post1 on; before, MHA fp4 is not modelled).
Refused: 0.5.16 - 0.5.20 in SGLang's words ("--kv-cache-dtype=fp4_e2m1 is deprecated. Use
--kv-cache-dtype=fp4_mx_block16."); not modelled, by name: other GPUs (their default backends
against the KV4 check were not read), DeepSeek-V3.2's DSA pool, sliding / hybrid pools,
speculative decoding.
"""

from __future__ import annotations

from calc.serving.sglang_nvfp4 import plain_pool_gap

FP4_E2M1 = "fp4_e2m1"
MLA_FROM = (0, 5, 4, 3)
MHA_FROM = (0, 5, 6, 1)  # the MHA pool from 0.5.5.post3, planned where trtllm_mha is the default
DEPRECATED = ((0, 5, 16, 0), (0, 5, 21, 0))


def check_sglang_fp4_e2m1(spec, config, major: int | None) -> None:
    """SGLang's refusal and kvcalc's limits of an fp4_e2m1 pool (module docstring)."""
    v = config.version_tuple
    if DEPRECATED[0] <= v < DEPRECATED[1]:
        raise ValueError(
            "--kv-cache-dtype=fp4_e2m1 is deprecated. Use --kv-cache-dtype=fp4_mx_block16."
        )
    what = None
    if major != 10:
        what = (
            "a GPU outside the SM100 family (its default attention backend against the KV4 check)"
        )
    elif "indexed_attention" in spec.attention_counts:
        what = "DeepSeek-V3.2's DSA pool"
    else:
        what = plain_pool_gap(spec, config)
    if what is None and not spec.is_mla and v < MHA_FROM:
        what = "a standard attention model before 0.5.6.post1 (no fp4 MHA pool before 0.5.5.post3)"
    if what:
        raise ValueError(f"SGLang's 'kv_cache_dtype' fp4_e2m1 with {what} is not modelled")


def fp4_lines() -> list[str]:
    """configure_kv_cache_dtype's warning (module docstring)."""
    return ["FP4 (E2M1) KV Cache might lead to a accuracy drop!"]
