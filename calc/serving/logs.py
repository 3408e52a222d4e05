"""Reading vLLM and SGLang start-up logs: the figures each line states, in kvcalc's names.

`parse_log(text)` returns a dict with the keys of a benchmarks/engine_logs case's [logged]
table: weights_gib, available_kv_cache_gib, gpu_kv_cache_tokens, num_gpu_blocks,
max_concurrency, max_model_len, peak_torch_gib, non_torch_gib, total_gpu_memory_gib,
max_total_num_tokens, swa_layer_tokens and swa_kv_pool_gib (SGLang's sliding-window pool: its
"full_layer_tokens=F, swa_layer_tokens=S" line sets max_total_num_tokens), kv_cache_capacity_tokens, activation_peak_gib, k_size_gib, v_size_gib,
kv_size_gib, sglang_avail_after_weights_gib, sglang_avail_before_weights_gib,
sglang_pool_end_gib (SGLang's "Memory pool end. avail mem"),
needed_kv_cache_gib, estimated_max_model_len, non_kv_total_gib, attention_block_size,
mamba_page_padding_pct (vLLM's hybrid config lines), padding_layers, warmup_free_gib,
warmup_committed_gib, warmup_transient_gib, warmup_peak_gib, warmup_growth_gib,
warmup_kv_blocks and warmup_kv_gib (vLLM 0.34.0's "Memory after warmup"
line: its blocks are the KV cache's when one worker or every worker prints the same),
init_free_gib, reserved_kv_gib and kv_cache_memory_bytes (--kv-cache-memory-bytes's line and
its non-default args), language_model_only (True where the non-default args set it) and
limit_mm_per_prompt (their counts by modality), skip_mm_profiling, mm_encoder_tp_mode,
enable_lora / max_loras / max_lora_rank,
cpu_offload_gb and
cpu_offloaded_gib (the offloader's "Total CPU offloaded parameters: X GiB"),
suggested_kv_cache_memory_bytes (0.26+'s suggestion after capture, whose
"Free memory on device (F/T GiB)" also gives init_free_gib and total_gpu_memory_gib),
speculative_method and
num_speculative_tokens (vLLM's engine line), max_running_requests and context_len (SGLang's
scheduler line), max_mamba_cache_size, kv_cache_dtype (vLLM's "Using fp8... data type to store
kv cache" line, SGLang's fp8 pool dtype), engine.
With TP / PP every worker prints its own lines: a line tagged as worker 0 ("rank=0",
"Worker_TP0", "Worker_PP0", "TP0 ") wins, else the first occurrence.
vLLM V1 from 0.9.2 (DEBUG, gpu_worker.py): "Memory profiling takes X seconds. Total non KV cache
memory: AGiB; torch peak memory increase: BGiB; non-torch forward increase memory: CGiB;
weights memory: DGiB." (0.19.0 sdist, vllm/v1/worker/gpu_worker.py:435 and utils/mem_utils.py
MemoryProfilingResult.__repr__).
llm-d-planner's parsed runs (accuracy/results/*/runs/*.json, "weight_memory_gib": X, ...) use
their own key names; they are read as the same figures (GiB to 2 decimals, as the log printed).
SGLang's "GB" is GiB (its code divides by 1 << 30); vLLM V0's "took X GB" is GiB too.
"""

from __future__ import annotations

import ast
import re

_NUM = r"(-?[0-9][0-9,]*\.?[0-9]*)"
PATTERNS: dict[str, re.Pattern] = {
    # the load's line (4 decimals until 0.11); else V0 0.7+'s profile sentence, "model weights
    # take X GiB" (2 decimals: vllm/worker/worker.py, 0.7.2 / 0.8.3 sdists)
    "weights_gib": re.compile(
        rf"(?:Model loading took|Loading model weights took) {_NUM} G(?:i)?B"
        rf"|model weights take {_NUM}GiB"
    ),
    "available_kv_cache_gib": re.compile(rf"Available KV cache memory: {_NUM} GiB"),
    "gpu_kv_cache_tokens": re.compile(rf"GPU KV cache size: {_NUM} tokens"),
    # V0's "# GPU blocks: N"; V1's DEBUG "cache_config_info with initialization after
    # num_gpu_blocks is: N" (v1/metrics/loggers.py; every KV-cache group's blocks together)
    "num_gpu_blocks": re.compile(rf"(?:# (?:GPU|CUDA) blocks:|num_gpu_blocks is:) {_NUM}"),
    "max_concurrency": re.compile(rf"Maximum concurrency for {_NUM} tokens per request: {_NUM}x"),
    "peak_torch_gib": re.compile(rf"peak_torch_memory={_NUM}GiB"),
    # 0.6.4's "Memory profiling results: k=v" line, and the 0.7+ sentences
    "non_torch_gib": re.compile(rf"non_torch_memory(?:=| takes ){_NUM}GiB"),
    "activation_peak_gib": re.compile(rf"PyTorch activation peak memory takes {_NUM}GiB"),
    "total_gpu_memory_gib": re.compile(rf"total_gpu_memory(?:=| \(){_NUM}GiB"),
    "v0_kv_cache_gib": re.compile(
        rf"(?:kv_cache_size=|the rest of the memory reserved for KV Cache is ){_NUM}GiB"
    ),
    "gpu_memory_utilization": re.compile(rf"gpu_memory_utilization(?:=| \(){_NUM}"),
    "needed_kv_cache_gib": re.compile(rf"\({_NUM} GiB KV cache is needed"),
    "refused_available_gib": re.compile(rf"available KV cache memory \({_NUM} GiB\)"),
    "estimated_max_model_len": re.compile(rf"estimated maximum model length is {_NUM}"),
    "kv_cache_capacity_tokens": re.compile(rf"can be stored in KV cache \({_NUM}\)"),
    # SGLang's pool line ("dtype: torch.bfloat16, " from 0.5.13); a sliding-window pool's own
    # line first (its full layers' tokens: calc.serving.sglang_kv_lines)
    "swa_full_layer_tokens": re.compile(rf"full_layer_tokens={_NUM}, swa_layer_tokens={_NUM}"),
    "max_total_num_tokens": re.compile(
        rf"(?<![A-Za-z] )KV Cache is allocated\. (?:dtype: [\w.]+, )?#tokens: {_NUM}"
    ),
    "swa_kv_pool_gib": re.compile(rf"SWAKVPool mem usage: {_NUM} GB"),
    "k_size_gib": re.compile(rf"K size: {_NUM} GB"),
    "v_size_gib": re.compile(rf"V size: {_NUM} GB"),
    "kv_size_gib": re.compile(rf"KV size: {_NUM} GB"),
    "non_kv_total_gib": re.compile(rf"Total non KV cache memory: {_NUM}GiB"),
    "torch_peak_increase_gib": re.compile(rf"torch peak memory increase: {_NUM}GiB"),
    "non_torch_increase_gib": re.compile(rf"non-torch forward increase memory: {_NUM}GiB"),
    "sglang_avail_before_weights_gib": re.compile(rf"Load weight begin\. avail mem={_NUM} GB"),
    # init_memory_pool's last line: the free memory after the pools (calc.serving.sglang_pool_end)
    "sglang_pool_end_gib": re.compile(rf"Memory pool end\. avail mem={_NUM} GB"),
    "sglang_avail_after_weights_gib": re.compile(
        rf"Load weight end\..*avail mem={_NUM} GB, mem usage={_NUM} GB"
    ),
    # SGLang 0.4.1: "KV Cache is allocated. K size: ..." has no #tokens, "Load weight end" no
    # mem usage; the count is the max_total_num_tokens= line's
    "sglang_max_total_line": re.compile(rf"max_total_num_tokens={_NUM}"),
    # vLLM's hybrid config check (calc.serving.vllm_mamba.page_lines)
    "attention_block_size": re.compile(rf"Setting attention block size to {_NUM} tokens to ensure"),
    "mamba_page_padding_pct": re.compile(rf"Padding mamba page size by {_NUM}%"),
    # SGLang's MambaPool (0.5.3.post2 on; calc.serving.sglang_hybrid)
    "max_mamba_cache_size": re.compile(rf"Mamba Cache is allocated\. max_mamba_cache_size: {_NUM}"),
    # the scheduler's line (server_args' "max_running_requests=None, max_queued_requests" is
    # not: the scheduler's follows max_prefill_tokens) and its context_len
    "max_running_requests": re.compile(
        rf"max_prefill_tokens=[0-9]+, max_running_requests={_NUM}, context_len={_NUM}"
    ),
    # vLLM's engine line: SpeculativeConfig(method='mtp', model=..., num_spec_tokens=3)
    # (calc.serving.vllm_spec; the config's __repr__, 0.11.0 - 0.33.0)
    "speculative": re.compile(
        r"SpeculativeConfig\(method='([a-z0-9_]+)'.*?num_spec_tokens=([0-9]+)"
    ),
    # vLLM 0.34.0's extensible KV cache, per worker (extensible_kv_cache.measure_kv_cache_blocks):
    # "Memory after warmup: F GiB free, C GiB committed to the KV cache, T GiB kept for
    # transient activations (...); N KV cache blocks (X GiB) fit within the requested R GiB."
    "warmup_free_gib": re.compile(rf"Memory after warmup: {_NUM} GiB free"),
    "warmup_transient_gib": re.compile(rf"{_NUM} GiB kept for transient activations"),
    "warmup_committed_gib": re.compile(rf"GiB free, {_NUM} GiB committed to the KV cache"),
    "warmup_peak_gib": re.compile(
        rf"\({_NUM} GiB allocated at peak, {_NUM} GiB of torch reservation growth\)"
    ),
    "warmup_kv_blocks": re.compile(rf"; {_NUM} KV cache blocks \({_NUM} GiB\) fit within"),
    # vLLM's group padding warning (calc.serving.vllm_spec.padding_lines): the first kind's
    # --kv-cache-memory-bytes (calc.serving.vllm_kv_memory): "Initial free memory F GiB, reserved
    # X GiB memory for KV Cache as specified by kv_cache_memory_bytes" ("X.XXGiB" up to 0.11.0)
    "init_free_gib": re.compile(rf"Initial free memory {_NUM} GiB, reserved"),
    "reserved_kv_gib": re.compile(rf"reserved {_NUM} ?GiB memory for KV Cache as specified"),
    # 0.26+ after capture (calc.serving.vllm_suggestion): "Free memory on device (F/T GiB) on
    # startup. ... `--kv-cache-memory=N` (X GiB) to fit into requested memory"
    "startup_free_gib": re.compile(rf"Free memory on device \({_NUM}/{_NUM} GiB\) on startup"),
    "suggested_kv_cache_memory_bytes": re.compile(
        rf"`--kv-cache-memory={_NUM}` \([^)]*\) to fit into requested memory"
    ),
    # the API server's "non-default args: {..., 'kv_cache_memory_bytes': N, ...}" (the bytes)
    "kv_cache_memory_bytes": re.compile(rf"'kv_cache_memory_bytes': {_NUM}"),
    "cpu_offload_gb": re.compile(rf"'cpu_offload_gb': {_NUM}"),
    "mm_encoder_tp_mode": re.compile(r"'mm_encoder_tp_mode': '(data|weights)'"),
    "enable_lora": re.compile(r"'enable_lora': (True)"),
    "max_loras": re.compile(rf"'max_loras': {_NUM}"),
    "max_lora_rank": re.compile(rf"'max_lora_rank': {_NUM}"),
    "cpu_offloaded_gib": re.compile(rf"Total CPU offloaded parameters: {_NUM} GiB"),
    # and its 'language_model_only': True, 'limit_mm_per_prompt': {...} (calc.serving.vllm_towers)
    "language_model_only": re.compile(r"'language_model_only': (True)"),
    "skip_mm_profiling": re.compile(r"'skip_mm_profiling': (True)"),
    "limit_mm_per_prompt": re.compile(r"'limit_mm_per_prompt': (\{[^{}]*\})"),
    "padding_layers": re.compile(rf"Add {_NUM} padding layers, may waste"),
    # vLLM's CacheConfig line for an fp8 cache (calc.serving.vllm_lines.fp8_cache_line)
    "kv_cache_dtype": re.compile(r"Using (fp8\w*) data type to store kv cache"),
    # SGLang's pool dtype: "Using KV cache dtype: torch.X" (0.5.3 - 0.5.12), "KV Cache is
    # allocated. dtype: torch.X" (0.5.13 on): fp8 names read as its --kv-cache-dtype
    "sglang_kv_torch_dtype": re.compile(
        r"(?:Using KV cache dtype: |KV Cache is allocated\. dtype: )torch\.(float8_e[45]m[23])"
    ),
    "sglang_avail_after_no_usage": re.compile(rf"Load weight end\..*avail mem={_NUM} GB\s*$", re.M),
}
# llm-d-planner runs/*.json (https://github.com/llm-d-incubation/llm-d-planner, accuracy/)
LLMD_JSON = {
    "weight_memory_gib": "weights_gib",
    "kv_cache_memory_gib": "available_kv_cache_gib",
    "kv_cache_tokens": "gpu_kv_cache_tokens",
    "max_concurrency": "max_concurrency",
    "activation_memory_gib": "activation_peak_gib",
    "non_torch_forward_memory_gib": "non_torch_gib",
    "total_non_kv_memory_gib": "non_kv_total_gib",
}
for _json_key, _key in LLMD_JSON.items():
    PATTERNS.setdefault(f"llmd:{_json_key}", re.compile(rf'"{_json_key}": {_NUM}'))
_INT_KEYS = {
    "max_loras",
    "max_lora_rank",
    "suggested_kv_cache_memory_bytes",
    "kv_cache_memory_bytes",
    "kv_cache_capacity_tokens",
    "gpu_kv_cache_tokens",
    "num_gpu_blocks",
    "estimated_max_model_len",
    "max_total_num_tokens",
    "sglang_max_total_line",
    "max_running_requests",
    "max_mamba_cache_size",
    "attention_block_size",
    "padding_layers",
    "warmup_kv_blocks",
}


def _num(text: str, key: str):
    t = text.replace(",", "")
    return int(float(t)) if key in _INT_KEYS else float(t)


_RANK0 = re.compile(r"rank=0\b|Worker_TP0\b|Worker_PP0\b|\bTP0 ")


def _rank0_first(text: str, pat: re.Pattern):
    """The match on a worker-0 line when the lines name their worker, else the first one."""
    matches = list(pat.finditer(text))
    for m in matches:
        start = text.rfind("\n", 0, m.start()) + 1
        if _RANK0.search(text[start : m.start()]):
            return m
    return matches[0] if matches else None


_SGLANG_RANK = re.compile(r"\bTP([0-9]+)\]")
_SAME_RANK_AS = {  # a figure read on the rank whose line gives the one it is compared with
    "sglang_pool_end_gib": (
        "sglang_avail_after_weights_gib",
        "sglang_avail_after_no_usage",
        "sglang_avail_before_weights_gib",
    ),
}


def _line_rank(text: str, m: re.Match | None) -> str | None:
    """The SGLang rank tag ("TP3]") of the line holding `m`, None for an untagged line."""
    if m is None:
        return None
    start = text.rfind("\n", 0, m.start()) + 1
    tag = _SGLANG_RANK.search(text[start : m.start()])
    return tag.group(1) if tag else None


def _match(text: str, key: str, pat: re.Pattern):
    """_rank0_first, except for a figure of _SAME_RANK_AS: its line on the rank of the first of
    its partners the text holds (SGLang's "Memory pool end" beside the same rank's "Load weight"
    line: sglang#22537 quotes TP0's load and every rank's pool end)."""
    for partner in _SAME_RANK_AS.get(key, ()):
        rank = _line_rank(text, _rank0_first(text, PATTERNS[partner]))
        if rank is not None:
            same = [m for m in pat.finditer(text) if _line_rank(text, m) == rank]
            if same:
                return same[0]
    return _rank0_first(text, pat)


def parse_log(text: str) -> dict:
    """The figures of one start-up log (see the module docstring); {} for no known line."""
    out: dict = {}
    for key, pat in PATTERNS.items():
        match = _match(text, key, pat)
        if not match:
            continue
        if key.startswith("llmd:"):
            name = LLMD_JSON[key[5:]]
            out.setdefault(name, _num(match.group(1), name))
        elif key == "max_concurrency":
            out["max_model_len"] = _num(match.group(1), "estimated_max_model_len")
            out[key] = _num(match.group(2), key)
        elif key == "speculative":
            out["speculative_method"] = match.group(1)
            out["num_speculative_tokens"] = int(match.group(2))
        elif key == "max_running_requests":
            out[key] = _num(match.group(1), key)
            out["context_len"] = _num(match.group(2), key)
        elif key in ("language_model_only", "skip_mm_profiling", "enable_lora"):  # flags
            out[key] = True
        elif key == "mm_encoder_tp_mode":  # a name
            out[key] = match.group(1)
        elif key == "limit_mm_per_prompt":  # counts by modality (a Python dict's repr)
            out[key] = ast.literal_eval(match.group(1))
        elif key == "kv_cache_dtype":  # a name, not a figure
            out[key] = match.group(1)
        elif key == "sglang_kv_torch_dtype":  # fnuz on ROCm: the same choice
            out.setdefault("kv_cache_dtype", "fp8_e4m3" if "e4m3" in match.group(1) else "fp8_e5m2")
        elif key == "swa_full_layer_tokens":  # the full layers' pool is max_total_num_tokens
            out["max_total_num_tokens"] = _num(match.group(1), "max_total_num_tokens")
            out["swa_layer_tokens"] = _num(match.group(2), "max_total_num_tokens")
        elif key == "warmup_peak_gib":
            out[key] = _num(match.group(1), key)
            out["warmup_growth_gib"] = _num(match.group(2), key)
        elif key == "warmup_kv_blocks":  # the measured blocks (the worker's; before the min)
            out[key] = _num(match.group(1), key)
            out["warmup_kv_gib"] = _num(match.group(2), "warmup_kv_gib")
        elif key == "startup_free_gib":  # the init snapshot: free / total
            out.setdefault("init_free_gib", _num(match.group(1), key))
            out.setdefault("total_gpu_memory_gib", _num(match.group(2), key))
        elif key == "sglang_avail_after_weights_gib":
            out[key] = _num(match.group(1), key)
            out["weights_gib"] = _num(match.group(2), key)
        else:  # the first group that matched (a pattern may offer alternatives)
            out.setdefault(key, _num(next(g for g in match.groups() if g is not None), key))
    if "refused_available_gib" in out:
        out.setdefault("available_kv_cache_gib", out.pop("refused_available_gib"))
    for key, name in (("torch_peak_increase_gib", "activation_peak_gib"),
                      ("non_torch_increase_gib", "non_torch_gib")):  # fmt: skip
        if key in out:
            out.setdefault(name, out.pop(key))
    for key, name in (("sglang_max_total_line", "max_total_num_tokens"),
                      ("sglang_avail_after_no_usage", "sglang_avail_after_weights_gib")):  # fmt: skip
        if key in out:
            out.setdefault(name, out.pop(key))
    if "v0_kv_cache_gib" in out:
        out.setdefault("available_kv_cache_gib", out.pop("v0_kv_cache_gib"))
    if out:
        sglang = "max_total_num_tokens" in out or "sglang_avail_after_weights_gib" in out
        out["engine"] = "sglang" if sglang else "vllm"
    return out
