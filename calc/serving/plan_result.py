"""The record engine_plan returns (calc.serving.plan), and the fields that say what was planned,
shared by the vLLM, SGLang and DeepSeek-V4 paths."""

from __future__ import annotations

from calc.results import Result


class EnginePlan(Result):
    """The engine's start-up figures for one deployment; sizes per GPU (the limiting rank)."""

    engine: str
    version: str
    model: str
    gpu: str
    tensor_parallel_size: int
    pipeline_parallel_size: int
    max_model_len: int
    max_num_batched_tokens: int | None  # vLLM: the profile run's batch
    kv_cache_dtype: str
    # "derived", "given" (available_kv_gib), "calibrated" or "kv_cache_memory_bytes" (vLLM's flag)
    source: str
    total_memory_bytes: int
    # None: not modelled (DeepSeek-V4; a vLLM MTP drafter calc.serving.vllm_drafter cannot size)
    weights_bytes: int | None  # vLLM MTP: the drafter's included, as "Model loading took"
    weights_gib: float | None
    activation_bytes: int | None
    non_torch_bytes: int | None
    cudagraph_bytes: int | None
    available_kv_cache_bytes: int
    available_kv_cache_gib: float
    kv_groups: int
    page_bytes: int  # vLLM: one block of one layer; SGLang: one token of every layer (cell)
    num_gpu_blocks: int  # SGLang: max_total_num_tokens / page_size
    gpu_kv_cache_tokens: int  # SGLang: max_total_num_tokens
    max_concurrency: float
    refusal: str | None
    # vLLM 0.34.0's extensible KV cache (calc.serving.vllm_extensible): on, and the KV bytes the
    # post-warmup measurement leaves (kvcalc's model of it; None when given or off)
    extensible_kv_cache: bool = False
    measured_kv_cache_bytes: int | None = None
    # vLLM: the worker's init snapshot (its free memory) that --kv-cache-memory-bytes's line, the
    # suggestion and 0.34's measurement print or use: kvcalc's estimate (a calibration's when
    # given; calc.serving.vllm_extensible.init_free_bytes); None for SGLang
    initial_free_bytes: int | None = None
    # vLLM 0.26+: the "--kv-cache-memory=N ... to fit into requested memory" its worker suggests
    # after capture, from kvcalc's terms (calc.serving.vllm_suggestion); None where not logged
    suggested_kv_cache_memory_bytes: int | None = None
    # SGLang with a binding --max-total-tokens: the bytes its pools allocate (token pools' K + V,
    # the mamba states); the rest of the KV budget stays free (calc.serving.sglang_kv_lines)
    allocated_kv_cache_bytes: int | None = None
    k_size_gib: float | None = None  # SGLang
    max_mamba_cache_size: int | None = None  # SGLang, linear layers: the mamba states
    max_running_requests: int | None = None  # SGLang: the scheduler's (per DP worker)
    # vLLM --speculative-config (calc.serving.vllm_spec): the method, its tokens (MTP's default:
    # the model's MTP layers) and the drafter's layers in the KV-cache groups; SGLang
    # (calc.serving.sglang_spec): the algorithm as it runs, speculative_num_draft_tokens, and the
    # MTP draft pool's layers and "KV size" (None where kvcalc does not compute the draft's pool)
    speculative_method: str | None = None
    num_speculative_tokens: int | None = None
    draft_layers: int = 0
    draft_kv_size_gib: float | None = None
    # SGLang from 0.5.14: the draft worker's weights, resident when the target's pool is sized
    draft_weights_bytes: int | None = None
    # SGLang (calc.serving.sglang_pool_end): what init_memory_pool takes from the device (its
    # tensors in the caching allocator's segments) and, derived, the free memory its "Memory
    # pool end. avail mem" line prints; None where kvcalc does not model the pools' tensors
    pool_allocated_bytes: int | None = None
    pool_end_free_bytes: int | None = None
    log_lines: list[str]

    @property
    def fits(self) -> bool:
        return self.refusal is None


def identity(spec, hw, config, kd, source, total) -> dict:
    """The fields of an EnginePlan that say what was planned, alike for both engines."""
    return dict(
        engine=config.engine,
        version=config.version,
        model=spec.name,
        gpu=hw.name,
        tensor_parallel_size=config.tensor_parallel_size,
        pipeline_parallel_size=config.pipeline_parallel_size,
        max_model_len=config.max_model_len,
        kv_cache_dtype=kd,
        source=source,
        total_memory_bytes=total,
    )
