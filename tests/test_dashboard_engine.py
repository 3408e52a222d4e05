"""The Capacity page's Engine section: vLLM / SGLang plans (calc.serving) on the page's GPUs.

The reference for every figure is calc.serving's own API (engine_plan, inverse), called here
with the settings the page's URL names; the arithmetic that is simple is written out too."""

from __future__ import annotations

from html import unescape

from dashboard_util import chart_data, errors, open_page, table

from calc.serving import inverse
from calc.serving.plan import engine_plan

BASE = {"model": "llama-3.1-8b", "gpu": "h100-sxm", "gpus": "1", "tp": "1"}
GIB = 2**30


def _tiles(at) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def test_vllm_tiles_stack_and_startup_lines_are_calc_serving_engine_plan():
    at = open_page("capacity", **BASE, engine="vllm", ever="0.11.0", elen="32768")
    assert errors(at) == ""
    p = engine_plan("llama-3.1-8b", "h100-sxm", "vllm", version="0.11.0", max_model_len=32768)
    t = _tiles(at)
    assert t["KV blocks"] == f"{p.num_gpu_blocks:,}"
    assert t["KV tokens"] == f"{p.gpu_kv_cache_tokens:,}"
    assert t["Max concurrency at 32,768 tokens"] == f"{p.max_concurrency:.2f}x"
    # written out: 32 layers x 8 KV heads x 128 x 2 (K, V) x 2 B = 128 KiB a token, 2 MiB a
    # 16-token block (all layers); tokens = blocks x 16; concurrency = tokens / 32768
    assert p.num_gpu_blocks == p.available_kv_cache_bytes // (16 * 32 * 8 * 128 * 2 * 2)
    assert t["KV tokens"] == f"{p.num_gpu_blocks * 16:,}"
    assert t["Max concurrency at 32,768 tokens"] == f"{p.num_gpu_blocks * 16 / 32768:.2f}x"
    stack = chart_data(at, "engine_memory").set_index("category")["bytes"]
    assert stack["weights"] == p.weights_bytes
    assert stack["activation peak"] == p.activation_bytes
    assert stack["non-torch"] == p.non_torch_bytes
    assert stack["KV cache"] == p.available_kv_cache_bytes
    assert "CUDA graphs" not in stack  # 0.11.0 does not subtract them
    assert stack.sum() == p.total_memory_bytes
    # what utilization 0.9 keeps back: 10 % of the total, to the byte vLLM's int() rounds
    assert abs(stack["free"] - p.total_memory_bytes * 0.1) <= 1
    assert at.code[0].value.splitlines() == p.log_lines
    assert f"GPU KV cache size: {p.gpu_kv_cache_tokens:,} tokens" in at.code[0].value


def test_vllm_0_20_subtracts_cuda_graphs_and_block_size_is_the_engines():
    at = open_page(
        "capacity", **BASE, engine="vllm", ever="0.20.0", elen="8192", eblock="32", eseqs="64"
    )
    assert errors(at) == ""
    p = engine_plan(
        "llama-3.1-8b",
        "h100-sxm",
        "vllm",
        version="0.20.0",
        max_model_len=8192,
        block_size=32,
        max_num_seqs=64,
    )
    t = _tiles(at)
    assert t["KV blocks"] == f"{p.num_gpu_blocks:,}"
    assert t["KV tokens"] == f"{p.num_gpu_blocks * 32:,}"
    stack = chart_data(at, "engine_memory").set_index("category")["bytes"]
    assert stack.sum() == p.total_memory_bytes
    assert stack["KV cache"] == p.available_kv_cache_bytes
    if p.cudagraph_bytes:
        assert stack["CUDA graphs"] == p.cudagraph_bytes


def test_sglang_plan_is_calc_serving_and_its_pool_is_pages_of_tokens():
    at = open_page(
        "capacity", **BASE, engine="sglang", ever="0.4.6", elen="16384", epage="16", efrac="0.8"
    )
    assert errors(at) == ""
    p = engine_plan(
        "llama-3.1-8b",
        "h100-sxm",
        "sglang",
        version="0.4.6",
        max_model_len=16384,
        page_size=16,
        mem_fraction_static=0.8,
    )
    t = _tiles(at)
    assert t["KV tokens"] == f"{p.gpu_kv_cache_tokens:,}"
    assert t["KV pages"] == f"{p.gpu_kv_cache_tokens // 16:,}"
    assert t["Max concurrency at 16,384 tokens"] == f"{p.gpu_kv_cache_tokens / 16384:.2f}x"
    assert at.code[0].value.splitlines() == p.log_lines
    assert f"max_total_num_tokens={p.gpu_kv_cache_tokens}" in at.code[0].value
    assert chart_data(at, "engine_memory")["bytes"].sum() == p.total_memory_bytes


def test_engine_refusals_show_the_engines_error_not_a_traceback():
    # 70B in bf16 (~128 GiB of weights) on one 80 GB GPU: no memory for the cache blocks
    at = open_page("capacity", model="llama-2-70b", gpu="h100-sxm", gpus="1", engine="vllm")
    assert not at.exception
    p = engine_plan("llama-2-70b", "h100-sxm", "vllm")
    assert p.refusal
    assert f"vLLM {p.version} refuses to start: {p.refusal}" in errors(at)  # the default release
    assert "KV tokens" not in _tiles(at)
    assert f"ValueError: {p.refusal}" in at.code[0].value
    # settings the engine's config refuses: its own wording
    bad = open_page("capacity", **BASE, engine="vllm", eblock="24")
    assert "'block_size' must be one of 1, 8, 16, 32, 64, 128, 256: got 24" in errors(bad)
    assert "KV tokens" not in _tiles(bad)
    long = open_page("capacity", **BASE, engine="vllm", elen="200000")
    assert "User-specified max_model_len (200000) is greater than the derived" in errors(long)
    vlm = {**BASE, "model": "gemma-3-4b"}  # a vision encoder: SGLang scales its default by it
    sg = open_page("capacity", **vlm, engine="sglang", ever="0.5.6.post2")
    assert errors(sg) == ""
    p = engine_plan("gemma-3-4b", "h100-sxm", "sglang", version="0.5.6.post2")
    assert _tiles(sg)["KV tokens"] == f"{p.gpu_kv_cache_tokens:,}"


def test_inverse_box_answers_with_calc_serving_inverse():
    at = open_page(
        "capacity", **BASE, engine="vllm", ever="0.11.0", elen="32768", ec="12", el="32768"
    )
    assert errors(at) == ""
    s = dict(version="0.11.0", tensor_parallel_size=1, pipeline_parallel_size=1)
    s.update(max_model_len=32768, kv_cache_dtype="auto", weight_dtype="bf16", block_size=16)
    u = inverse.utilization_for("llama-3.1-8b", "h100-sxm", "vllm", 12, **s)
    n = inverse.max_model_len_for("llama-3.1-8b", "h100-sxm", "vllm", 12, **s)
    tp = inverse.tp_for("llama-3.1-8b", "h100-sxm", "vllm", 12, **s)
    df = table(at).set_index("setting")["reaches 12 × 32,768 tokens"]
    assert df["gpu_memory_utilization"] == f"{u:.2f}"
    assert df["max_model_len"] == f"{n:,}"
    assert df["tensor_parallel_size"] == f"{tp:,}"
    # the answer is the smallest that reaches it: 12 x 32,768 tokens at u, not at u - 0.01
    at_u = engine_plan("llama-3.1-8b", "h100-sxm", "vllm", **{**s, "gpu_memory_utilization": u})
    below = engine_plan(
        "llama-3.1-8b", "h100-sxm", "vllm", **{**s, "gpu_memory_utilization": round(u - 0.01, 2)}
    )
    assert at_u.gpu_kv_cache_tokens >= 12 * 32768 > below.gpu_kv_cache_tokens
    # an unreachable target says so
    far = open_page("capacity", **BASE, engine="vllm", ec="100000", el="131072")
    far_df = table(far).set_index("setting")["reaches 100,000 × 131,072 tokens"]
    assert far_df["gpu_memory_utilization"] == "not reachable"


def test_engine_inputs_live_in_the_url_and_out_of_range_hides_results():
    at = open_page("capacity", **BASE, engine="sglang", efrac="0.8", epage="4")
    assert at.number_input(key="capacity:efrac").value == 0.8
    qp = {k: v if isinstance(v, list) else [v] for k, v in at.query_params.items()}
    assert qp["engine"] == ["sglang"] and qp["efrac"] == ["0.8"] and qp["epage"] == ["4"]
    assert "elen" not in qp  # blank: the model's own context, left out of the link
    at.number_input(key="capacity:epage").set_value(10**6).run()
    assert "'page_size' must be from 1 to 65,536: got 1,000,000" in errors(at)
    assert "KV tokens" not in _tiles(at) and not at.code
    kv = open_page("capacity", **BASE, engine="kvcalc")
    assert errors(kv) == "" and not kv.code and "KV tokens" not in _tiles(kv)


def test_sglang_dp_attention_and_expert_parallel_are_the_engines_flags():
    """DeepSeek-V3 on 8 x H200 with SGLang's --enable-dp-attention --dp 8 --enable-ep-moe: the
    page's plan is calc.serving's with the same flags, and differs from plain TP 8 the way
    SGLang's sharding says: attention whole on each GPU (heads over tp / dp = 1), so more
    weights a GPU than TP 8 alone (sglang_parallel.py)."""
    v3 = {"model": "deepseek-v3", "gpu": "h200", "gpus": "8", "tp": "8"}
    common = dict(engine="sglang", ever="0.4.6", elen="32768", efrac="0.85")
    at = open_page("capacity", **v3, **common, eep="true", edpa="true", edp="8")
    assert errors(at) == ""
    kw = dict(version="0.4.6", tensor_parallel_size=8, max_model_len=32768)
    p = engine_plan(
        "deepseek-v3", "h200", "sglang", **kw, mem_fraction_static=0.85,
        enable_expert_parallel=True, enable_dp_attention=True, data_parallel_size=8,
    )  # fmt: skip
    plain_tp = engine_plan(
        "deepseek-v3", "h200", "sglang", **kw, mem_fraction_static=0.85,
        enable_expert_parallel=True,
    )  # fmt: skip
    assert p.weights_bytes > plain_tp.weights_bytes
    stack = chart_data(at, "engine_memory").set_index("category")["bytes"]
    assert stack["weights"] == p.weights_bytes
    assert stack["KV cache"] == p.available_kv_cache_bytes
    assert at.code[0].value.splitlines() == p.log_lines
    # dp_size must divide tp: the menu offers only 2, 4 and 8
    assert at.selectbox(key="capacity:edp").options == ["2", "4", "8"]


def test_dp_attention_is_refused_by_name_where_sglang_has_no_rule_and_off_at_tp_1():
    at = open_page(
        "capacity", model="llama-3.1-8b", gpu="h100-sxm", gpus="2", tp="2",
        engine="sglang", ever="0.4.6", edpa="true", edp="2",
    )  # fmt: skip
    assert "dp" in errors(at).lower() and "attention" in errors(at).lower()
    one = open_page("capacity", **BASE, engine="sglang", ever="0.4.6", edpa="true")
    assert errors(one) == ""
    assert one.checkbox(key="capacity:edpa").disabled


def test_vllm_expert_parallel_splits_experts_whole():
    q = {"model": "qwen3-30b-a3b", "gpu": "h100-sxm", "gpus": "2", "tp": "2"}
    at = open_page("capacity", **q, engine="vllm", ever="0.11.0", elen="32768", eep="true")
    assert errors(at) == ""
    p = engine_plan(
        "qwen3-30b-a3b", "h100-sxm", "vllm", version="0.11.0", tensor_parallel_size=2,
        max_model_len=32768, enable_expert_parallel=True,
    )  # fmt: skip
    stack = chart_data(at, "engine_memory").set_index("category")["bytes"]
    assert stack["weights"] == p.weights_bytes
    assert stack["KV cache"] == p.available_kv_cache_bytes


def test_a_model_the_generic_plan_refuses_is_planned_by_the_engines_not_blocked():
    """DeepSeek-V3 (MLA) is not in kvcalc's generic planner (calc.sharding.unplannable): the
    page says so once, offers the TPs that split its 128 heads, and plans it as vLLM does."""
    v3 = {"model": "deepseek-v3", "gpu": "h200", "gpus": "8"}
    at = open_page("capacity", **v3, engine="vllm", ever="0.11.0", elen="16384")
    assert errors(at) == ""
    assert any("MLA attention" in unescape(i.value) for i in at.info)
    assert at.selectbox(key="capacity:tp").options == ["1", "2", "4", "8"]
    assert at.selectbox(key="capacity:tp").value == 8  # the most the GPUs allow
    p = engine_plan(
        "deepseek-v3", "h200", "vllm", version="0.11.0", tensor_parallel_size=8,
        max_model_len=16384,
    )  # fmt: skip
    assert _tiles(at)["KV tokens"] == f"{p.gpu_kv_cache_tokens:,}"
    # written out: MLA caches kv_lora_rank + rope dims = 512 + 64 values a token and layer,
    # 2 B each, on every rank (61 layers); vLLM 0.11.0 forces FlashMLA's 64-token block on an
    # H200 (platforms/cuda.py): a block of all layers is 64 x 61 x 576 x 2
    assert p.num_gpu_blocks == p.available_kv_cache_bytes // (64 * 61 * 576 * 2)


def test_the_version_menu_reaches_the_newest_releases_read():
    """SGLang 0.5.23 and vLLM 0.33.0 (the newest read) are offered and plan as calc.serving."""
    at = open_page("capacity", **BASE, engine="sglang", ever="0.5.23", elen="32768")
    assert errors(at) == ""
    p = engine_plan("llama-3.1-8b", "h100-sxm", "sglang", version="0.5.23", max_model_len=32768)
    assert _tiles(at)["KV tokens"] == f"{p.gpu_kv_cache_tokens:,}"
    v = open_page("capacity", **BASE, engine="vllm", ever="0.33.0", elen="32768")
    assert errors(v) == ""
    q = engine_plan("llama-3.1-8b", "h100-sxm", "vllm", version="0.33.0", max_model_len=32768)
    assert _tiles(v)["KV tokens"] == f"{q.gpu_kv_cache_tokens:,}"


def test_qwen3_next_on_sglang_shows_its_mamba_states_beside_the_token_pool():
    """Qwen3-Next (linear attention) plans on SGLang with its mamba state pool
    (calc.serving.sglang_hybrid): the page names the states and prints SGLang's two lines."""
    qn = {"model": "qwen3-next-80b-a3b", "gpu": "h100-sxm", "gpus": "4", "tp": "4"}
    at = open_page("capacity", **qn, engine="sglang", ever="0.5.23", elen="32768")
    assert errors(at) == ""
    p = engine_plan(
        "qwen3-next-80b-a3b", "h100-sxm", "sglang", version="0.5.23", tensor_parallel_size=4,
        max_model_len=32768,
    )  # fmt: skip
    assert p.max_mamba_cache_size is not None and p.max_mamba_cache_size > 0
    assert _tiles(at)["KV tokens"] == f"{p.gpu_kv_cache_tokens:,}"
    assert any(f"{p.max_mamba_cache_size:,} mamba states" in c.value for c in at.caption)
    lines = at.code[0].value.splitlines()
    assert any(x.startswith("Mamba Cache is allocated.") for x in lines)
    assert any(x.startswith("KV Cache is allocated. dtype: torch.bfloat16, #tok") for x in lines)


def test_tp_for_answers_for_models_only_the_engines_plan():
    # gpt-oss-120b (attention sinks) is refused by the generic planner but planned by the engines;
    # the fewest TP GPUs is the first divisor of its 64 heads whose own plan reaches the target
    s = dict(max_model_len=131072)
    plans = {
        tp: engine_plan("gpt-oss-120b", "h100-sxm", "vllm", tensor_parallel_size=tp, **s)
        for tp in (1, 2, 4)
    }
    assert plans[2].max_concurrency < 16 <= plans[4].max_concurrency
    assert inverse.tp_for("gpt-oss-120b", "h100-sxm", "vllm", 16, **s) == 4
    assert inverse.tp_for("gpt-oss-120b", "h100-sxm", "vllm", 1, **s) == 1


def test_linear_state_settings_are_the_engines_flags():
    """A linear-layer model (Nemotron 3 Nano) offers vLLM's enable_prefix_caching and
    mamba_ssm_cache_dtype and SGLang's mamba_ssm_dtype; the page's plan is calc.serving's with
    the same flags, a release that lacks a choice shows vLLM's refusal, and a model without
    linear layers offers none of them."""
    nano = {"model": "nemotron-3-nano-30b-a3b", "gpu": "h100-sxm", "gpus": "1", "tp": "1"}
    kw = dict(version="0.30.0", max_model_len=65536)
    at = open_page("capacity", **nano, engine="vllm", ever="0.30.0", elen="65536", epc="off",
                   essm="float16")  # fmt: skip
    assert errors(at) == ""
    p = engine_plan("nemotron-3-nano-30b-a3b", "h100-sxm", "vllm", **kw,
                    enable_prefix_caching=False, mamba_ssm_cache_dtype="float16")  # fmt: skip
    default = engine_plan("nemotron-3-nano-30b-a3b", "h100-sxm", "vllm", **kw)
    assert p.max_concurrency > default.max_concurrency  # 1 state page a request, not 2
    assert _tiles(at)["Max concurrency at 65,536 tokens"] == f"{p.max_concurrency:.2f}x"
    bad = open_page("capacity", **nano, engine="vllm", ever="0.20.0", essm="bfloat16")
    assert "'mamba_ssm_cache_dtype' must be one of auto, float32, float16 in vLLM 0.20" in (
        errors(bad)
    )
    sg = open_page("capacity", **nano, engine="sglang", ever="0.5.23", esgssm="bfloat16")
    assert errors(sg) == ""
    q = engine_plan("nemotron-3-nano-30b-a3b", "h100-sxm", "sglang", version="0.5.23",
                    mamba_ssm_dtype="bfloat16")  # fmt: skip
    assert _tiles(sg)["KV tokens"] == f"{q.gpu_kv_cache_tokens:,}"
    dense = open_page("capacity", **BASE, engine="vllm")
    assert not [s for s in dense.selectbox if s.label == "enable_prefix_caching"]


def test_mamba_cache_mode_is_vllms_flag():
    """The Capacity page's mamba_cache_mode is vLLM's --mamba-cache-mode: "all" on 0.30 is the
    plan calc.serving makes with it (a state per block: fewer requests than "align", the
    default), and 0.32, whose MambaCacheMode lost "all", shows vLLM's refusal."""
    nano = {"model": "nemotron-3-nano-30b-a3b", "gpu": "h100-sxm", "gpus": "1", "tp": "1"}
    kw = dict(version="0.30.0", max_model_len=65536)
    at = open_page("capacity", **nano, engine="vllm", ever="0.30.0", elen="65536", emode="all")
    assert errors(at) == ""
    p = engine_plan("nemotron-3-nano-30b-a3b", "h100-sxm", "vllm", **kw, mamba_cache_mode="all")
    default = engine_plan("nemotron-3-nano-30b-a3b", "h100-sxm", "vllm", **kw)
    assert p.max_concurrency < default.max_concurrency
    assert _tiles(at)["Max concurrency at 65,536 tokens"] == f"{p.max_concurrency:.2f}x"
    bad = open_page("capacity", **nano, engine="vllm", ever="0.32.0", emode="all")
    assert "'mamba_cache_mode' must be one of align, none in vLLM 0.32.0" in errors(bad)


def test_vllm_decode_context_parallel_menu_plans_as_the_engine():
    """DeepSeek-V3 on 8 x H200, vLLM 0.11.0 with --decode-context-parallel-size 8: the page's
    lines are calc.serving's (the token line multiplied by 8); the menu offers tp's divisors;
    a GQA model whose KV heads fill tp shows vLLM's refusal as an error."""
    v3 = {"model": "deepseek-v3", "gpu": "h200", "gpus": "8", "tp": "8"}
    at = open_page("capacity", **v3, engine="vllm", ever="0.11.0", elen="32768", edcp="8")
    assert errors(at) == ""
    p = engine_plan("deepseek-v3", "h200", "vllm", version="0.11.0", tensor_parallel_size=8,
                    max_model_len=32768, decode_context_parallel_size=8)  # fmt: skip
    assert at.code[0].value.splitlines() == p.log_lines
    assert any(x.startswith("Multiplying the GPU KV cache size") for x in p.log_lines)
    assert at.selectbox(key="capacity:edcp").options == ["1", "2", "4", "8"]
    llama = {"model": "llama-3.1-70b", "gpu": "h200", "gpus": "8", "tp": "8"}
    bad = open_page("capacity", **llama, engine="vllm", ever="0.18.0", edcp="2")
    assert "must be greater than total num kv heads 8" in errors(bad)


def test_blank_block_size_is_the_engines_choice():
    """block_size left blank: the plan is vLLM's without --block-size (DeepSeek-V3 on 8 x B200,
    0.18.0: FlashInfer MLA's 32-token block, vllm_mla_block); typed in: as --block-size."""
    v3 = {"model": "deepseek-v3", "gpu": "b200", "gpus": "8", "tp": "8"}
    kw = dict(version="0.18.0", tensor_parallel_size=8, max_model_len=32768)
    at = open_page("capacity", **v3, engine="vllm", ever="0.18.0", elen="32768")
    assert errors(at) == ""
    p = engine_plan("deepseek-v3", "b200", "vllm", **kw)
    assert at.code[0].value.splitlines() == p.log_lines
    assert p.log_lines[0] == "Setting kv cache block size to 32 for FLASHINFER_MLA backend."
    given = open_page("capacity", **v3, engine="vllm", ever="0.18.0", elen="32768", eblock="64")
    q = engine_plan("deepseek-v3", "b200", "vllm", block_size=64, **kw)
    assert given.code[0].value.splitlines() == q.log_lines
    assert not q.log_lines[0].startswith("Setting kv cache block size")


def test_blank_page_size_is_the_default_backends():
    """page_size left blank: SGLang's default backend decides (DeepSeek-V3 on 8 x B200, 0.5.23:
    trtllm_mla's 64, sglang_page); the plan equals calc.serving's without --page-size."""
    v3 = {"model": "deepseek-v3", "gpu": "b200", "gpus": "8", "tp": "8"}
    at = open_page("capacity", **v3, engine="sglang", ever="0.5.23", elen="32768", efrac="0.85")
    assert errors(at) == ""
    p = engine_plan("deepseek-v3", "b200", "sglang", version="0.5.23", tensor_parallel_size=8,
                    max_model_len=32768, mem_fraction_static=0.85)  # fmt: skip
    assert at.code[0].value.splitlines() == p.log_lines
    assert p.log_lines[0].startswith("TensorRT-LLM MLA only supports page_size of 32 or 64")
    assert p.gpu_kv_cache_tokens % 64 == 0


def test_vllm_mtp_from_a_given_memory_is_calc_serving_and_needs_the_memory():
    # the niushuai1991 deployment (benchmarks/engine_logs/vllm-niushuai-*): 947,541 tokens
    page = dict(model="qwen3.5-27b", gpu="rtx-pro-6000", gpus="1", tp="1", engine="vllm")
    at = open_page("capacity", **page, ever="0.25.1", elen="32768", ekv="fp8_e4m3",
                   espec="mtp", espk="3", egiven="54.05", epc="on")  # fmt: skip
    assert errors(at) == ""
    p = engine_plan("qwen3.5-27b", "rtx-pro-6000", "vllm", version="0.25.1",
                    max_model_len=32768, kv_cache_dtype="fp8_e4m3", enable_prefix_caching=True,
                    speculative_method="mtp", num_speculative_tokens=3,
                    available_kv_gib=54.05)  # fmt: skip
    assert _tiles(at)["KV tokens"] == f"{p.gpu_kv_cache_tokens:,}"
    assert at.code[0].value.splitlines() == p.log_lines
    assert "Add 3 padding layers" in at.code[0].value
    stack = chart_data(at, "engine_memory").set_index("category")["bytes"]
    # the drafter's weights are in the target's (calc.serving.vllm_drafter)
    assert stack["weights"] == p.weights_bytes and stack["KV cache"] == p.available_kv_cache_bytes
    # derived, MTP is refused in one line naming the setting
    at = open_page("capacity", **page, ever="0.25.1", espec="mtp")
    assert "'speculative_method' 'mtp'" in errors(at) and "available_kv_gib" in errors(at)


def test_the_attention_backend_input_reaches_the_mtp_plan():
    # AIwork4me's ROCm log (benchmarks/engine_logs/vllm-aiwork4me-qwen38-27b-rocm-mtp1.toml):
    # TRITON_ATTN forced on AMD, the drafter in groups of its own: 278,230 tokens
    page = dict(model="qwen3.5-27b", gpu="mi300x", gpus="1", tp="1", engine="vllm")
    at = open_page("capacity", **page, ever="0.28.0", elen="262144", espec="mtp", espk="1",
                   egiven="18.53", eab="TRITON_ATTN")  # fmt: skip
    assert errors(at) == ""
    assert _tiles(at)["KV tokens"] == "278,230"
    at = open_page("capacity", **page, ever="0.28.0", espec="none", eab="TRITON_ATTN")
    assert errors(at) == ""  # the input is only there for mtp: a stale URL key is not used


def test_the_enable_multimodal_input_reaches_the_sglang_plan():
    page = dict(model="gemma-3-12b", gpu="h100-sxm", gpus="1", tp="1", engine="sglang")
    at = open_page("capacity", **page, ever="0.5.23", elen="8192", emm="on")
    assert errors(at) == ""
    p = engine_plan("gemma-3-12b", "h100-sxm", "sglang", version="0.5.23", max_model_len=8192,
                    enable_multimodal=True)  # fmt: skip
    off = engine_plan("gemma-3-12b", "h100-sxm", "sglang", version="0.5.23", max_model_len=8192)
    assert p.gpu_kv_cache_tokens < off.gpu_kv_cache_tokens  # the VLM factor and cache
    assert _tiles(at)["KV tokens"] == f"{p.gpu_kv_cache_tokens:,}"


def test_sglang_from_a_given_memory_is_calc_serving():
    at = open_page("capacity", **BASE, engine="sglang", ever="0.5.23", egiven="40")
    assert errors(at) == ""
    p = engine_plan("llama-3.1-8b", "h100-sxm", "sglang", version="0.5.23", available_kv_gib=40)
    # 40 GiB over 32 layers x 8 KV heads x 128 x 2 (K, V) x 2 B = 128 KiB a token
    assert p.gpu_kv_cache_tokens == 40 * GIB // (32 * 8 * 128 * 2 * 2)
    assert _tiles(at)["KV tokens"] == f"{p.gpu_kv_cache_tokens:,}"


def test_vllm_kv_cache_memory_bytes_sets_the_cache_and_its_inverse():
    # 7 GiB of --kv-cache-memory-bytes at 0.33.0: 7 GiB / 2 MiB = 3584 blocks of 16 tokens
    at = open_page("capacity", **BASE, engine="vllm", ever="0.33.0", elen="8192", ekvmem="7",
                   ec="10", el="8192")  # fmt: skip
    assert errors(at) == ""
    t = _tiles(at)
    assert t["KV blocks"] == "3,584"
    assert t["KV tokens"] == "57,344"
    assert t["Max concurrency at 8,192 tokens"] == "7.00x"
    stack = chart_data(at, "engine_memory").set_index("category")["bytes"]
    assert stack["KV cache"] == 7 * GIB
    assert "activation peak" not in stack  # nothing profiled
    assert "Initial free memory" in at.code[0].value
    assert "Available KV cache memory" not in at.code[0].value
    # the inverse: 10 requests of 8192 tokens need 10 x 512 blocks of 2 MiB = 10,240 MiB
    inv = table(at).set_index("setting")["reaches 10 × 8,192 tokens"]
    assert inv["kv_cache_memory_bytes"] == f"{10240 * 2**20:,} (10.00 GiB)"


def test_vllm_kv_cache_memory_with_a_logged_memory_is_one_error():
    at = open_page("capacity", **BASE, engine="vllm", ever="0.33.0", ekvmem="7", egiven="7")
    assert "'available_kv_gib' replaces a profiled available memory" in errors(at)


def test_sglang_max_total_tokens_caps_the_pool():
    # 20 GiB over 128 KiB a token (32 layers x 8 KV heads x 128 x K, V x 2 B) = 163,840 tokens;
    # --max-total-tokens 100000 keeps min(163840, 100000) (SGLang's _apply_token_constraints)
    at = open_page("capacity", **BASE, engine="sglang", ever="0.5.23", egiven="20", emtt="100000")
    assert errors(at) == ""
    assert _tiles(at)["KV tokens"] == "100,000"
    # the stack's KV cache is what the pool allocates: (100000 + 1) rows x 128 KiB (K and V)
    stack = chart_data(at, "engine_memory").set_index("category")["bytes"]
    assert stack["KV cache"] == (100000 + 1) * 32 * 8 * 128 * 2 * 2
    # above the profiled count: SGLang's warning, and the profiled count kept
    at = open_page("capacity", **BASE, engine="sglang", ever="0.5.23", egiven="20", emtt="200000")
    assert errors(at) == ""
    assert _tiles(at)["KV tokens"] == "163,840"
    assert (
        "max_total_tokens=200000 is larger than the profiled value 163840. Use the profiled "
        "value instead." in at.code[0].value
    )


def test_vllm_nvfp4_cache_is_a_choice_where_the_release_has_it():
    # vLLM 0.34.0 on H100 (SM90, FlashInfer's FA2 path): 72 B a head for K and for V
    # (calc.serving.vllm_nvfp4), so 20 GiB hold 20 GiB // (32 x 8 x 144 B) tokens, in blocks
    b = {**BASE, "engine": "vllm", "ever": "0.34.0", "egiven": "20", "elen": "8192"}
    at = open_page("capacity", **b, ekv="nvfp4")
    assert errors(at) == ""
    p = engine_plan(
        "llama-3.1-8b", "h100-sxm", "vllm", version="0.34.0", kv_cache_dtype="nvfp4",
        available_kv_gib=20, max_model_len=8192,
    )  # fmt: skip
    block, rest = divmod(p.page_bytes, 8 * 144)  # a layer's block: block x 8 heads x 144 B
    assert rest == 0 and p.gpu_kv_cache_tokens == 20 * GIB // (32 * p.page_bytes) * block
    assert _tiles(at)["KV tokens"] == f"{p.gpu_kv_cache_tokens:,}"
    # 0.31.0 runs it on the SM100 family only: vLLM's refusal, as an error on the page
    at = open_page("capacity", **{**b, "ever": "0.31.0"}, ekv="nvfp4")
    assert "No valid attention backend found" in errors(at)
