"""SGLang's speculative decoding (calc.serving.sglang_spec), the expected values written out from
the PyPI wheels' python/sglang/srt/server_args.py (ServerArgs.__post_init__ /
_handle_speculative_decoding, auto_choose_speculative_params, _handle_gpu_memory_settings) and
model_executor/model_runner.py (init_memory_pool's headroom, the draft worker's MLA pool; from
0.5.7 model_runner_kv_cache_mixin.py, from 0.5.11 pool_configurator.py) of 0.4.7.post1 - 0.5.23
(from 0.5.13 arg_groups/speculative_hook.py). gpu_mem: nvidia-smi's memory.total in MiB (the presets' driver totals:
H100 SXM 81,559; H200 143,771)."""

import json

import numpy as np
import pytest

from calc.cli import main
from calc.serving.engine import engine_config
from calc.serving.grid import engine_plan_grid
from calc.serving.plan import engine_plan, prepare

H100, H200 = 81559, 143771  # MiB
GIB = 2**30
# Llama-3.1-8B: 8 KV heads x 128 x (K and V) x 2 B (bf16) x 32 layers, one token of the pool
LLAMA_CELL = 8 * 128 * 2 * 2 * 32
# DeepSeek-V3: the MLA latent kv_lora_rank 512 + qk_rope_head_dim 64, 2 B, a layer
DSV3_LATENT = (512 + 64) * 2


def sg(mib=H100, **kw):
    return engine_config("sglang", gpu_memory_gib=mib / 1024, **kw)


def test_server_args_defaults_48_requests_and_the_llama_draft_numbers():
    # "if self.max_running_requests is None: self.max_running_requests = 48"; auto_choose_
    # speculative_params: LlamaForCausalLM and every other architecture (5, 4, 8)
    c = sg(version="0.5.2", speculative_algorithm="EAGLE")
    assert c.max_running_requests == 48
    assert (c.speculative_num_steps, c.speculative_eagle_topk) == (5, 4)
    assert c.speculative_num_draft_tokens == 8
    given = sg(version="0.5.2", speculative_algorithm="EAGLE3", max_running_requests=16)
    assert given.max_running_requests == 16
    # "speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 when
    # speculative_eagle_topk == 1", whatever was given
    one = sg(
        version="0.5.4", speculative_algorithm="EAGLE", speculative_num_steps=2,
        speculative_eagle_topk=1, speculative_num_draft_tokens=9,
    )  # fmt: skip
    assert one.speculative_num_draft_tokens == 3


def test_auto_params_by_architecture_and_release():
    def params(v, arch, algorithm="EAGLE"):
        c = sg(version=v, speculative_algorithm=algorithm, sglang_arch=arch)
        return c.speculative_num_steps, c.speculative_eagle_topk, c.speculative_num_draft_tokens

    # DeepseekV3 / V2ForCausalLM: (3, 1, 4) in every wheel read (0.4.7.post1 on)
    assert params("0.4.7.post1", "deepseek_v3") == (3, 1, 4)
    # GptOssForCausalLM joins the list in the 0.5.1 wheel (absent from 0.5.0rc2's)
    assert params("0.5.0rc2", "gpt_oss") == (5, 4, 8)
    assert params("0.5.1", "gpt_oss") == (3, 1, 4)
    # Glm4MoeForCausalLM: absent in 0.5.6, listed in 0.5.6.post1
    assert params("0.5.6", "glm4_moe") == (5, 4, 8)
    assert params("0.5.6.post1", "glm4_moe") == (3, 1, 4)
    # DeepseekV32ForCausalLM from 0.5.3rc2; "if self.speculative_algorithm == 'STANDALONE':
    # return (3, 1, 4)" first
    assert params("0.5.3rc2", "deepseek_v32") == (3, 1, 4)
    assert params("0.5.2", "other", "STANDALONE") == (3, 1, 4)
    with pytest.raises(ValueError, match="must be given for this MLA model"):
        params("0.5.4", "mla")


def test_the_planned_architecture_of_presets():
    def arch_of(model, v="0.5.6.post2"):
        return prepare(model, "h200", "sglang", version=v, speculative_algorithm="EAGLE")[2]

    assert arch_of("deepseek-v3").speculative_num_steps == 3  # DeepseekV3ForCausalLM
    assert arch_of("gpt-oss-120b").speculative_num_steps == 3  # GptOssForCausalLM
    assert arch_of("glm-4.5-air").speculative_num_steps == 3  # Glm4MoeForCausalLM
    assert arch_of("llama-3.1-8b").speculative_num_steps == 5
    # Kimi K2.5 (KimiK25ForConditionalGeneration, from 0.5.9) is on no list: from 0.5.8 "all
    # other models" take (3, 1, 4)
    assert arch_of("kimi-k2.5", "0.5.9").speculative_eagle_topk == 1
    with pytest.raises(
        ValueError, match="'version' must be at least 0.5.9 for 'kimi-k2.5' in SGLang"
    ):
        arch_of("kimi-k2.5")


def test_default_fraction_reserves_2_gib_more_and_6_for_standalone():
    # 0.4.7.post1 - 0.5.3rc0 on an H100 (gpu_mem < 90 * 1024): (9.5 + tp x pp / 2) GiB,
    # "draft model and larger cuda graph buffers": + 2 * 1024
    want = round((H100 - (9.5 + 1 / 2) * 1024 - 2 * 1024) / H100, 3)
    assert sg(version="0.4.9.post2", speculative_algorithm="EAGLE").mem_fraction_static == want
    # 0.5.2 adds STANDALONE: + 6 * 1024
    want = round((H100 - (9.5 + 1 / 2) * 1024 - 6 * 1024) / H100, 3)
    assert sg(version="0.5.2", speculative_algorithm="STANDALONE").mem_fraction_static == want
    # 0.5.3rc2 - 0.5.6.post2: 512 + max(8192, 2048) x 1.5 + 256 x 2 + 1 / 8 x 1024 = 13824 MiB,
    # then max(.., 10 * 1024) on a GPU over 60 GiB, then + 2 * 1024 for EAGLE (NEXTN too: the
    # rule runs before NEXTN becomes EAGLE and excludes only NGRAM)
    reserved = max(512 + 8192 * 1.5 + 256 * 2 + 1 / 8 * 1024, 10 * 1024) + 2 * 1024
    got = sg(version="0.5.6.post2", speculative_algorithm="NEXTN").mem_fraction_static
    assert got == round((H100 - reserved) / H100, 3)
    assert sg(version="0.5.6.post2", speculative_algorithm="EAGLE", mem_fraction_static=0.7)\
        .mem_fraction_static == 0.7  # fmt: skip


def test_target_pool_gets_the_draft_and_verify_headroom():
    # init_memory_pool: max_total_num_tokens = profiled + max_num_reqs x steps x topk
    # + max_num_reqs x draft_tokens + 100, then // page_size x page_size. From a given budget of
    # 20 GiB: profiled = 20 x 2^30 // 131072 = 163840 tokens
    profiled = 20 * GIB // LLAMA_CELL
    assert profiled == 163840
    base = dict(engine="sglang", version="0.5.2", available_kv_gib=20, max_model_len=8192)
    plain = engine_plan("llama-3.1-8b", "h100-sxm", **base)
    assert plain.gpu_kv_cache_tokens == profiled
    p = engine_plan("llama-3.1-8b", "h100-sxm", speculative_algorithm="EAGLE", **base)
    assert p.gpu_kv_cache_tokens == 163840 + 48 * 5 * 4 + 48 * 8 + 100 == 165284
    # K size: (tokens + page_size) rows of 8 heads x 128 x 32 layers x 2 B
    k = (165284 + 1) * 8 * 128 * 32 * 2
    assert p.k_size_gib == round(k / GIB, 2)
    assert f"#tokens: 165284, K size: {k / GIB:.2f} GB" in p.log_lines[1]
    assert "max_running_requests=48, context_len=8192" in p.log_lines[-1]
    assert (p.speculative_method, p.num_speculative_tokens) == ("EAGLE", 8)
    assert p.max_concurrency == min(165284 / 8192, 48)
    assert p.draft_kv_size_gib is None  # a separate draft checkpoint: its config is not read
    # given numbers and a page of 64: (163840 + 8 x 2 x 1 + 8 x 3 + 100) // 64 x 64
    q = engine_plan(
        "llama-3.1-8b", "h100-sxm", speculative_algorithm="EAGLE3", max_running_requests=8,
        speculative_num_steps=2, speculative_eagle_topk=1, page_size=64, **base,
    )  # fmt: skip
    assert q.gpu_kv_cache_tokens == (163840 + 8 * 2 * 1 + 8 * 3 + 100) // 64 * 64 == 163968
    assert q.max_running_requests == 8


def test_mtp_draft_pool_of_deepseek_v3_with_dp_attention():
    # TP 8 with DP attention 8: the headroom reads server_args.max_running_requests (48, not
    # divided); the scheduler runs 48 // dp_size = 6 a worker (tp_worker.py)
    base = dict(engine="sglang", version="0.5.4", available_kv_gib=40, tensor_parallel_size=8)
    kw = dict(data_parallel_size=8, enable_dp_attention=True, max_model_len=32768, page_size=1)
    p = engine_plan("deepseek-v3", "h200", speculative_algorithm="NEXTN", **base, **kw)
    tokens = 40 * GIB // (DSV3_LATENT * 61) + 48 * 3 * 1 + 48 * 4 + 100
    assert p.gpu_kv_cache_tokens == tokens
    assert p.max_running_requests == 6
    # the draft worker: draft_runner_cache_size tokens, num_nextn_predict_layers = 1 latent layer
    # (MLATokenToKVPool layer_num = num_effective_layers), printed as the second pool line
    draft = (tokens + 1) * DSV3_LATENT * 1
    assert p.draft_layers == 1 and p.draft_kv_size_gib == round(draft / GIB, 2)
    pools = [x for x in p.log_lines if x.startswith("KV Cache is allocated")]
    assert pools[1] == f"KV Cache is allocated. #tokens: {tokens}, KV size: {draft / GIB:.2f} GB"
    target = (tokens + 1) * DSV3_LATENT * 61
    assert pools[0].endswith(f"KV size: {target / GIB:.2f} GB")


def test_0_5_7_to_0_5_9_without_the_headroom():
    # model_runner_kv_cache_mixin.py (0.5.7): "self.server_args.draft_runner_cache_size =
    # self.max_total_num_tokens", nothing added; the scheduler still runs 48
    base = dict(engine="sglang", available_kv_gib=20, max_model_len=8192)
    for v in ("0.5.7", "0.5.8", "0.5.9"):
        p = engine_plan(
            "llama-3.1-8b", "h100-sxm", version=v, speculative_algorithm="EAGLE", **base
        )
        assert p.gpu_kv_cache_tokens == 20 * GIB // LLAMA_CELL == 163840
        assert p.max_running_requests == 48
    # 0.5.8: "The default value for all other models" (3, 1, 4); LlamaForCausalLM (5, 4, 8)
    qwen = prepare("qwen3-8b", "h100-sxm", "sglang", version="0.5.8", speculative_algorithm="EAGLE")
    assert qwen[2].speculative_num_steps == 3 and qwen[2].speculative_num_draft_tokens == 4
    old = prepare("qwen3-8b", "h100-sxm", "sglang", version="0.5.7", speculative_algorithm="EAGLE")
    assert old[2].speculative_num_steps == 5
    llama = prepare(
        "llama-3.1-8b", "h100-sxm", "sglang", version="0.5.9", speculative_algorithm="EAGLE"
    )
    assert llama[2].speculative_eagle_topk == 4
    # the MTP draft of DeepSeek-V3 takes the target's count: no headroom in either pool
    v3 = dict(engine="sglang", version="0.5.9", available_kv_gib=40, tensor_parallel_size=8)
    p = engine_plan("deepseek-v3", "h200", speculative_algorithm="NEXTN", page_size=1, **v3)
    tokens = 40 * GIB // (DSV3_LATENT * 61)
    assert p.gpu_kv_cache_tokens == tokens
    assert p.draft_kv_size_gib == round((tokens + 1) * DSV3_LATENT / GIB, 2)
    # the reserve: 0.5.7 - 0.5.9 _handle_gpu_memory_settings as 0.5.6.post2's, + 2 GiB after the
    # floor (the piecewise CUDA graph is off by default until 0.5.10)
    reserved = max(512 + 8192 * 1.5 + 256 * 2 + 1 / 8 * 1024, 10 * 1024) + 2 * 1024
    assert sg(version="0.5.9", speculative_algorithm="EAGLE3").mem_fraction_static == round(
        (H100 - reserved) / H100, 3
    )


def test_0_5_10_reserves_4_gib_with_the_prefill_graph_off():
    # 0.5.10: _handle_piecewise_cuda_graph ("if self.speculative_algorithm is not None:
    # self.disable_piecewise_cuda_graph = True") runs before _handle_gpu_memory_settings, so the
    # reserve has no prefill-graph term: 512 + 8192 x 1.5 + 256 x 2 + 1 / 8 x 1024 = 13824 MiB,
    # max(.., 10 * 1024), then "eagle draft models and cuda graphs": + 4 * 1024
    c = sg(version="0.5.10", speculative_algorithm="EAGLE", mla=False)
    assert c.disable_piecewise_cuda_graph is True
    reserved = max(512 + 8192 * 1.5 + 256 * 2 + 1 / 8 * 1024, 10 * 1024) + 4 * 1024
    assert c.mem_fraction_static == round((H100 - reserved) / H100, 3)
    p = engine_plan("llama-3.1-8b", "h100-sxm", "sglang", version="0.5.10", available_kv_gib=20,
                    speculative_algorithm="EAGLE", max_model_len=8192)  # fmt: skip
    # no headroom; _resolve_max_num_reqs: min(48 // dp_size, clamp(int(T / 8192 x 512), 2048,
    # 4096)) = 48
    assert p.gpu_kv_cache_tokens == 163840 and p.max_running_requests == 48


def test_0_5_11_to_0_5_13_keep_the_prefill_graph_and_the_4_gib():
    # 0.5.11's _handle_piecewise_cuda_graph no longer lists speculative decoding; the reserve's
    # "eagle draft models and cuda graphs" + 4 * 1024 stays (0.5.13: arg_groups/
    # speculative_hook.py, still after _handle_gpu_memory_settings)
    for v in ("0.5.11", "0.5.12", "0.5.13"):
        c = sg(version=v, speculative_algorithm="EAGLE", mla=False)
        assert c.disable_piecewise_cuda_graph is not True and c.max_running_requests == 48
        off = sg(version=v, speculative_algorithm="EAGLE", disable_piecewise_cuda_graph=True)
        reserved = max(512 + 8192 * 1.5 + 256 * 2 + 1 / 8 * 1024, 10 * 1024) + 4 * 1024
        assert off.mem_fraction_static == round((H100 - reserved) / H100, 3)
        # DefaultPoolConfigurator: the cell is the target's alone (only DFLASH scales it)
        p = engine_plan("llama-3.1-8b", "h100-sxm", "sglang", version=v, available_kv_gib=20,
                        speculative_algorithm="EAGLE3", max_model_len=8192)  # fmt: skip
        assert p.gpu_kv_cache_tokens == 163840 and p.max_running_requests == 48


def test_from_0_5_14_the_target_cell_counts_the_draft_layers():
    # DefaultPoolConfigurator (0.5.14 - 0.5.21): "self._cell_size = int(self._cell_size * (1 +
    # int(eagle_draft_num_layers) / int(num_layers)))"; 0.5.22 on: cell + int(cell x D / L).
    # Llama-3.1-8B with a 1-layer EAGLE3 draft: 131072 x (1 + 1 / 32) = 135168 B a token
    base = dict(available_kv_gib=20, max_model_len=8192, speculative_algorithm="EAGLE3")
    for v in ("0.5.14", "0.5.18", "0.5.22", "0.5.23"):
        p = engine_plan("llama-3.1-8b", "h100-sxm", "sglang", version=v,
                        speculative_draft_num_layers=1, **base)  # fmt: skip
        assert p.gpu_kv_cache_tokens == 20 * GIB // (131072 + 131072 // 32) == 158875
        assert p.max_running_requests == 48 and p.draft_layers == 1
        # the K size line is the target's pool alone: (T + 1) rows of 32 layers
        k = (158875 + 1) * 8 * 128 * 32 * 2
        assert f"K size: {k / GIB:.2f} GB" in p.log_lines[1]
    with pytest.raises(ValueError, match="'speculative_draft_num_layers' .* must be given"):
        engine_plan("llama-3.1-8b", "h100-sxm", "sglang", version="0.5.14", **base)
    # DeepSeek-V3: the draft is its own MTP layer (D = num_nextn_predict_layers = 1, the path
    # ServerArgs sets to the model): 70272 + 70272 // 61 = 71424 B; DP attention 8 runs 48 // 8
    v3 = dict(
        version="0.5.23",
        tensor_parallel_size=8,
        data_parallel_size=8,
        max_model_len=32768,
        enable_dp_attention=True,
        available_kv_gib=40,
        speculative_algorithm="NEXTN",
    )
    p = engine_plan("deepseek-v3", "h200", "sglang", **v3)  # fmt: skip
    tokens = 40 * GIB // (DSV3_LATENT * 61 + DSV3_LATENT)
    page = p.gpu_kv_cache_tokens // p.num_gpu_blocks  # the backend's page (sglang_page)
    assert p.gpu_kv_cache_tokens == tokens // page * page and p.max_running_requests == 6
    pools = [x for x in p.log_lines if x.startswith("KV Cache is allocated")]
    assert len(pools) == 2 and p.draft_layers == 1
    # 0.5.14 dropped the reserve's speculative term: the default fraction is the plain one
    plain = sg(version="0.5.16", mla=False).mem_fraction_static
    assert (
        sg(version="0.5.16", speculative_algorithm="EAGLE", mla=False).mem_fraction_static == plain
    )


def test_from_0_5_14_sliding_and_dsa_pools_are_refused():
    kw = dict(speculative_algorithm="EAGLE3", speculative_draft_num_layers=1, max_model_len=8192)
    with pytest.raises(ValueError, match="share of the sliding-window pools is not modelled"):
        engine_plan("gpt-oss-120b", "h100-sxm", "sglang", version="0.5.14", **kw)
    assert engine_plan("gpt-oss-120b", "h100-sxm", "sglang", version="0.5.13", **kw).fits
    with pytest.raises(ValueError, match="share of the DSA indexer pools is not modelled"):
        engine_plan("deepseek-v3.2", "h200", "sglang", version="0.5.14", tensor_parallel_size=8,
                    speculative_algorithm="NEXTN", max_model_len=8192)  # fmt: skip


def test_grid_and_plan_agree_with_speculation():
    kw = dict(version="0.5.2", speculative_algorithm="EAGLE", max_model_len=8192)
    rows = engine_plan_grid("llama-3.1-8b", "h100-sxm", "sglang", available_kv_gib=[10, 20], **kw)
    one = [
        engine_plan("llama-3.1-8b", "h100-sxm", "sglang", available_kv_gib=g, **kw)
        for g in (10, 20)
    ]
    got = np.asarray(rows["gpu_kv_cache_tokens"])
    assert got.tolist() == [p.gpu_kv_cache_tokens for p in one]
    assert got[1] == 165284


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (dict(speculative_algorithm="NGRAM"), "'speculative_algorithm' NGRAM is not modelled"),
        (dict(speculative_algorithm="medusa"), "must be one of EAGLE, EAGLE3, NEXTN, STANDALONE"),
        (dict(speculative_num_steps=3), "'speculative_num_steps' needs a 'speculative_algorithm'"),
        (
            dict(speculative_algorithm="EAGLE", speculative_eagle_topk=2),
            "'speculative_num_steps' is required",
        ),
        (
            dict(speculative_algorithm="EAGLE", speculative_num_steps=3),
            "'speculative_eagle_topk' is required",
        ),
        (
            dict(speculative_algorithm="EAGLE", speculative_num_steps=3, speculative_eagle_topk=4),
            "'speculative_num_draft_tokens' is required",
        ),
        (
            dict(speculative_algorithm="EAGLE", version="0.4.7"),
            "speculative decoding in 0.4.7.post1 - 0.5.23",
        ),
        (dict(speculative_draft_num_layers=1), "'speculative_draft_num_layers' needs a"),
        (dict(speculative_algorithm="STANDALONE", version="0.5.1"), "STANDALONE is in SGLang"),
        (
            dict(speculative_algorithm="EAGLE", pipeline_parallel_size=2),
            "Pipeline parallelism is not compatible with overlap schedule, speculative decoding",
        ),
        (
            dict(
                speculative_algorithm="STANDALONE",
                tensor_parallel_size=2,
                data_parallel_size=2,
                enable_dp_attention=True,
            ),
            "standalone speculative decoding does not support dp attention",
        ),
    ],
)
def test_refusals_name_the_setting(settings, message):
    with pytest.raises(ValueError, match=message):
        sg(**({"version": "0.5.2"} | settings))


def test_model_refusals():
    kw = dict(engine="sglang", version="0.5.4", max_model_len=8192)
    with pytest.raises(ValueError, match="NEXTN drafts with the model's own MTP layers"):
        engine_plan("llama-3.1-8b", "h100-sxm", speculative_algorithm="NEXTN", **kw)
    with pytest.raises(ValueError, match="mamba state pool with speculative decoding"):
        engine_plan(
            "qwen3-next-80b-a3b", "h200", speculative_algorithm="NEXTN", tensor_parallel_size=2,
            **kw,
        )  # fmt: skip


def test_cli_prints_both_pools_and_refuses_the_other_engines_flags(capsys):
    argv = ["plan", "deepseek-v3", "--gpu", "h200", "--gpus", "8", "--engine", "sglang"]
    argv += ["--engine-version", "0.5.2", "--speculative-algorithm", "NEXTN", "--seq", "32768"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert out.count("KV Cache is allocated") == 2
    assert "max_running_requests=48" in out and "speculative EAGLE: 4 draft tokens" in out
    assert main([*argv, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["speculative_method"] == "EAGLE" and data["draft_layers"] == 1
    vllm = ["plan", "llama-3.1-8b", "--gpu", "h100-sxm", "--engine", "vllm"]
    assert main([*vllm, "--speculative-algorithm", "EAGLE"]) == 2
    err = capsys.readouterr().err
    assert "'--speculative-algorithm' is an SGLang setting: vLLM takes --speculative-config" in err
    sglang = ["plan", "llama-3.1-8b", "--gpu", "h100-sxm", "--engine", "sglang"]
    assert main([*sglang, "--speculative-config", '{"method": "mtp"}']) == 2
    assert "SGLang takes --speculative-algorithm" in capsys.readouterr().err
    assert main([*sglang, "--engine-version", "0.5.2", "--speculative-algorithm", "NGRAM"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "NGRAM is not modelled" in err


def test_the_draft_worker_logs_its_own_kv_dtype_up_to_0_5_12():
    # each ModelRunner runs configure_kv_cache_dtype ("Using KV cache dtype: ...",
    # model_runner.py in the 0.5.3rc2 - 0.5.12 wheels): the target's, then the draft worker's
    # just before its MLATokenToKVPool line; from 0.5.13 the pool lines name the dtype instead
    kw = dict(tensor_parallel_size=8, speculative_algorithm="NEXTN", available_kv_gib=40)
    p = engine_plan("deepseek-v3", "h200", "sglang", version="0.5.10", **kw)
    i = [n for n, x in enumerate(p.log_lines) if x == "Using KV cache dtype: torch.bfloat16"]
    assert len(i) == 2 and p.log_lines[i[1] + 1].startswith("KV Cache is allocated. #tokens: ")
    p = engine_plan("deepseek-v3", "h200", "sglang", version="0.5.13", **kw)
    assert not any(x.startswith("Using KV cache dtype") for x in p.log_lines)
    assert (
        sum(x.startswith("KV Cache is allocated. dtype: torch.bfloat16") for x in p.log_lines) == 2
    )
