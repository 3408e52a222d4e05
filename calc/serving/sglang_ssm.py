"""The dtype SGLang keeps a linear layer's temporal (SSM / recurrent) state in, by release.

Read in the PyPI wheels 0.5.7 - 0.5.23 (server_args.py, configs/mamba_utils.py, configs/
qwen3_next.py, configs/qwen3_5.py, model_executor/model_runner.py):
- 0.5.7 - 0.5.8: --mamba-ssm-dtype (choices float32 | bfloat16, default "float32") is always put
  in SGLANG_MAMBA_SSM_DTYPE, and mamba2_state_dtype() reads only that: the flag's, else float32.
- 0.5.9 on: float16 among the choices, the default None (the environment left unset);
  mamba2_state_dtype(config) takes the environment's, else the config's `mamba_ssm_dtype`
  (text_config's for a VL wrapper; another value logs "Invalid mamba_ssm_dtype" and keeps
  float32), else float32. Qwen3NextConfig.mamba2_cache_params passes its config, and
  Qwen3_5TextConfig subclasses Qwen3NextConfig (ModelRunner.hybrid_gdn_config is
  hf_config.get_text_config()), so Qwen3-Next and Qwen3.5 read the config.json's mamba_ssm_dtype
  (calc.hf.modern imports it as spec.mamba_ssm_cache_dtype; Qwen/Qwen3.5-*'s say "float32").
  NemotronHConfig passes its config too, but its config.json names vLLM's field,
  mamba_ssm_cache_dtype, which SGLang does not read (calc.hf.hybrid_ssm imports that one for
  vLLM): float32 unless given, as for GraniteMoeHybrid.
The conv state stays bf16 (CONV_DTYPE; SGLANG_MAMBA_CONV_DTYPE, later, defaults to it).
"""

from __future__ import annotations

from calc.serving.defaults_sglang import release_name

SSM_CONFIG_FROM = (0, 5, 9, 0)  # mamba2_state_dtype(config); --mamba-ssm-dtype float16
SSM_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
SSM_NAMES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}  # the spec's -> SGLang's


def sglang_ssm_dtype(config_dtype: str | None, given: str | None, v: tuple[int, ...]) -> str:
    """--mamba-ssm-dtype `given` (None: not given), else from 0.5.9 the config.json's
    `config_dtype` (SGLang's name; None for a model whose config SGLang reads nothing from)."""
    if given == "float16" and v < SSM_CONFIG_FROM:
        raise ValueError(
            f"'mamba_ssm_dtype' float16 is a --mamba-ssm-dtype choice from SGLang "
            f"{release_name(SSM_CONFIG_FROM)} (float32 | bfloat16 in {release_name(v)}): got "
            "'float16'"
        )
    if given is not None:
        return given
    if v >= SSM_CONFIG_FROM and config_dtype is not None:
        return config_dtype
    return "float32"
