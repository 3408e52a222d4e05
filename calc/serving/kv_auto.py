"""The KV cache dtype an engine picks for --kv-cache-dtype auto on a checkpoint that declares an
fp8 KV cache, by release (read in the vLLM sdists 0.10.2 - 0.34.0 and the pypi.org SGLang wheels
0.4.4 - 0.5.23; kvcalc's spec keeps where the config declares it: calc.quant.config.KVCacheScheme).

vLLM (EngineArgs.create_engine_config -> utils/torch_utils.py resolve_kv_cache_dtype_string):
- up to 0.13.0: no resolution; "auto" is the model dtype (the checkpoint's k/v scales set to 1.0).
- from 0.14.0 (0.14.0 torch_utils.py:239-291, the same to 0.34.0 but for nvfp4 from 0.20.0): a
  quant_method starting "modelopt", its kv_cache_scheme first (a dict with "dynamic": false,
  num_bits 8, type float -> fp8_e4m3; any other dict: a warning and "auto"), else its
  kv_cache_quant_algo ("FP8" -> fp8_e4m3), the nested hf_quant_config.json key included; from
  0.20.0 "NVFP4" or a {float, 4} scheme -> nvfp4 (calc.serving.vllm_nvfp4; before: a warning and
  "auto").
- compressed-tensors' kv_cache_scheme (8-bit float, tensor or attn_head, symmetric, else vLLM's
  NotImplementedError, check_vllm_ct_scheme), in Attention.__init__ (model_executor/layers/attention/
  attention.py): 0.16.0 - 0.21.0 the cache is "fp8" whatever --kv-cache-dtype says (0.16.0
  :231-237); from 0.22.0 only when it is "auto" (0.22.0 :238-242). Before 0.16.0: the model dtype.
SGLang (ModelRunner.configure_kv_cache_dtype, mem_cache/kv_cache_dtype.py from 0.5.16): from
0.5.3rc2 "auto" is fp8_e4m3 when the quant config's kv_cache_quant_algo is "FP8", which each
config class sets from the checkpoint by release (layers/quantization/):
- ModelOpt fp8 weights (ModelOptFp8Config): from 0.5.4 (0.5.3 keeps it as kv_cache_quant_method,
  which the runner does not read); a flat config.json only through a {float, 8} kv_cache_scheme
  up to 0.5.14, also its kv_cache_quant_algo from 0.5.15; the nested key from 0.5.4.
- ModelOpt NVFP4 weights (ModelOptFp4Config): from 0.5.3rc2; flat kv_cache_quant_algo, else the
  scheme, except 0.5.9 - 0.5.14, which read the scheme only; the nested key in every release.
- compressed-tensors: from 0.5.19, a static, symmetric, per-tensor 8-bit float kv_cache_scheme.
An NVFP4 declaration never gives SGLang an fp4 cache (the runner reads "FP8" only).
SGLang's own rc tags read as their release here (0.5.3rc2 as 0.5.3).
"""

from __future__ import annotations

VLLM_MODELOPT_FROM = (0, 14, 0, 0)
VLLM_NVFP4_FROM = (0, 20, 0, 0)  # MODELOPT_TO_VLLM_KV_CACHE_DTYPE_MAP's "nvfp4"
VLLM_CT_FORCED = ((0, 16, 0, 0), (0, 22, 0, 0))  # fp8 over any given dtype
SGLANG_RUNNER_FROM = (0, 5, 3, 0)  # 0.5.3rc2
SGLANG_FP8_CONFIG_FROM = (0, 5, 4, 0)  # ModelOptFp8Config.kv_cache_quant_algo
SGLANG_FLAT_ALGO_FROM = (0, 5, 15, 0)  # ModelOptFp8Config reads a flat kv_cache_quant_algo
SGLANG_FP4_SCHEME_ONLY = ((0, 5, 9, 0), (0, 5, 15, 0))  # ModelOptFp4Config: no flat algo
SGLANG_CT_FROM = (0, 5, 19, 0)


def resolved_kv_cache_dtype(spec, engine: str, version: tuple[int, ...], kv_cache_dtype: str):
    """The cache dtype the engine runs with (module docstring): `kv_cache_dtype` unless the
    checkpoint's declared fp8 cache replaces it."""
    q = spec.quantization
    kv = None if q is None else q.kv_cache
    if kv is None:
        return kv_cache_dtype
    if q.method not in ("modelopt", "compressed-tensors"):
        return kv_cache_dtype
    if engine == "vllm":
        if q.method == "compressed-tensors":  # any kv_cache_scheme it keeps (Attention.__init__)
            check_vllm_ct_scheme(kv)
            forced = VLLM_CT_FORCED[0] <= version < VLLM_CT_FORCED[1]
            if forced or (version >= VLLM_CT_FORCED[1] and kv_cache_dtype == "auto"):
                return "fp8"
            return kv_cache_dtype
        if kv_cache_dtype != "auto" or version < VLLM_MODELOPT_FROM:
            return kv_cache_dtype
        if kv.bits == 4:  # "NVFP4" or a {float, 4} scheme: a warning and auto before 0.20.0
            return "nvfp4" if version >= VLLM_NVFP4_FROM else "auto"
        if kv.declared == "kv_cache_scheme" and kv.dynamic is not False:
            return "auto"  # get_kv_cache_quant_algo_string's warning: the model dtype
        return "fp8_e4m3"
    if kv_cache_dtype != "auto" or not _sglang_reads(q, kv, version):
        return kv_cache_dtype
    return "fp8_e4m3"


def _sglang_reads(q, kv, v: tuple[int, ...]) -> bool:
    """Whether SGLang `v`'s quant config exposes kv_cache_quant_algo "FP8" (module docstring)."""
    if v < SGLANG_RUNNER_FROM or kv.bits != 8:  # "NVFP4": the model dtype in every release
        return False
    if q.method == "compressed-tensors":  # a kv_cache_scheme dict (calc.quant.parse_ct)
        if kv.layout != "compressed-tensors":
            return False
        static_tensor = kv.strategy == "tensor" and kv.symmetric and kv.type == "float"
        return v >= SGLANG_CT_FROM and kv.bits == 8 and static_tensor
    if q.scheme.layout == "modelopt-nvfp4":
        flat_algo_skipped = SGLANG_FP4_SCHEME_ONLY[0] <= v < SGLANG_FP4_SCHEME_ONLY[1]
        return not (kv.declared == "kv_cache_quant_algo" and flat_algo_skipped)
    if v < SGLANG_FP8_CONFIG_FROM:
        return False
    return kv.declared != "kv_cache_quant_algo" or v >= SGLANG_FLAT_ALGO_FROM


def check_vllm_ct_scheme(kv) -> None:
    """CompressedTensorsKVCacheMethod.validate_kv_cache_scheme's refusals (compressed_tensors.py
    in the 0.10.2, 0.13.0, 0.14.1, 0.16.0 and 0.34.0 sdists): 8-bit float, tensor or attn_head
    strategy, symmetric."""
    if kv.layout != "compressed-tensors":
        return  # a string kv_cache_scheme (calc.quant.parse_ct): not a dict vLLM validates
    if (kv.type, kv.bits) != ("float", 8):
        raise ValueError(
            "'kv_cache_scheme': vLLM's NotImplementedError: Currently supported kv cache "
            f"quantization is num_bits=8, type=float, however received num_bits={kv.bits}, "
            f"type={kv.type}"
        )
    if kv.strategy not in ("tensor", "attn_head"):
        raise ValueError(
            "'kv_cache_scheme.strategy': vLLM's NotImplementedError: Invalid strategy for "
            f"compressed-tensors KV cache (tensor or attn_head): got {kv.strategy!r}"
        )
    if not kv.symmetric:
        raise ValueError(
            "'kv_cache_scheme.symmetric': vLLM's NotImplementedError: Only support symmetric "
            "scaling factor for compressed-tensors KV cache: got False"
        )
