"""SGLang's DP attention and expert parallelism (calc/serving/sglang_parallel.py).

Expected values are SGLang's module shapes written out from its source, read in sglang's history
(kvcache-ai/sglang_awq fork) at the v0.4.6 bump 84022c0e5 and the v0.5.6.post2 bump 5c8bd8b51:
- layers/dp_attention.py compute_dp_attention_world_info: attn_tp_size = tp_size // dp_size;
- models/deepseek_v2.py DeepseekV2AttentionMLA: q_a_proj / kv_a_proj_with_mqa ReplicatedLinear,
  q_b_proj / kv_b_proj ColumnParallelLinear and o_proj RowParallelLinear with
  tp_size=attn_tp_size; DeepseekV2Model.embed_tokens VocabParallelEmbedding(enable_tp=not
  enable_dp_attention); DeepseekV2ForCausalLM.lm_head ParallelLMHead(use_attn_tp_group=
  enable_dp_lm_head) (5c8bd8b51); DeepseekV2MLP of a dense layer tp_size=1 with
  moe_dense_tp_size == 1;
- models/qwen3_moe.py Qwen3MoeAttention: QKVParallelLinear over attn_tp_size, num_kv_heads =
  max(1, total_num_kv_heads // attn_tp_size);
- server_args.py: enable_ep_moe -> ep_size = tp_size (84022c0e5); "Please enable dp attention
  when setting enable_dp_lm_head." (5c8bd8b51 _handle_data_parallelism).
"""

import pytest

from calc.presets import load_preset
from calc.serving.engine import engine_config
from calc.serving.hardware import load_hardware
from calc.serving.plan import engine_plan, prepare
from calc.serving.sglang_parallel import sglang_parallel
from calc.serving.shard_layers import Split, layer_rank_params

H200 = load_hardware("h200")
V3 = load_preset("deepseek-v3")  # hidden 7168, 128 heads, q_lora 1536, kv_lora 512, 256 experts
QWEN = load_preset("qwen3-235b-a22b")  # hidden 4096, 64 heads, 4 KV heads, head_dim 128


def _cfg(version="0.5.6", **kw):
    return engine_config("sglang", version=version, gpu_memory_gib=141.0, **kw)


def test_dp_attention_split_per_module():
    cfg = _cfg(tensor_parallel_size=8, data_parallel_size=2, enable_dp_attention=True)
    ep, split = sglang_parallel(V3, cfg, H200)
    # attn_tp_size = 8 // 2; embedding replicated; LM head over the TP group (no dp_lm_head)
    assert (ep, split) == (1, Split(attn=4, dense=8, shared=8, embed=1, head=8))
    lm = _cfg(tensor_parallel_size=8, data_parallel_size=8, enable_dp_attention=True,
              enable_dp_lm_head=True)  # fmt: skip
    assert sglang_parallel(V3, lm, H200)[1].head == 1  # attn_tp_size = 8 // 8


def test_mla_layer_under_dp_attention():
    cfg = _cfg(tensor_parallel_size=8, data_parallel_size=2, enable_dp_attention=True)
    _, split = sglang_parallel(V3, cfg, H200)
    p = layer_rank_params(V3, 3, 8, 1, split)  # layer 3: MLA + MoE
    a = 4  # attn_tp_size
    q_a = 7168 * 1536  # replicated
    q_b = 1536 * 128 * (128 + 64) // a  # heads x (qk_nope + qk_rope) rows, split
    kv_a = 7168 * (512 + 64)  # replicated
    kv_b = 512 * 128 * (128 + 128) // a  # heads x (qk_nope + v_head) rows, split
    o = 128 * 128 * 7168 // a  # row-parallel
    assert p["attn/q"] == q_a + q_b
    assert p["attn/kv"] == kv_a + kv_b
    assert p["attn/o"] == o
    # routed experts still split over the 8-GPU TP group: 256 x 3 x 7168 x 2048 / 8
    assert p["mlp"] == 256 * 3 * 7168 * 2048 // 8
    assert p["mlp/shared"] == 3 * 7168 * 2048 // 8


def test_moe_dense_tp_size_1_replicates_dense_layers():
    cfg = _cfg(tensor_parallel_size=8, data_parallel_size=8, enable_dp_attention=True,
               moe_dense_tp_size=1)  # fmt: skip
    _, split = sglang_parallel(V3, cfg, H200)
    p = layer_rank_params(V3, 0, 8, 1, split)  # layer 0: dense MLP, intermediate 18432
    assert p["mlp"] == 3 * 7168 * 18432
    plain = layer_rank_params(V3, 0, 8, 1, None)
    assert plain["mlp"] == 3 * 7168 * 18432 // 8


def test_expert_parallel_is_tp_size_in_sglang():
    # SGLang: ep_size = tp_size (8), so 256 / 8 = 32 whole experts a GPU; vLLM's tp x dp = 64
    # would leave 4, which SGLang never does.
    cfg = _cfg(tensor_parallel_size=8, data_parallel_size=8, enable_dp_attention=True,
               enable_expert_parallel=True)  # fmt: skip
    ep, split = sglang_parallel(V3, cfg, H200)
    assert ep == 8
    p = layer_rank_params(V3, 3, 8, ep, split)
    assert p["mlp"] == 32 * 3 * 7168 * 2048
    s = dict(tensor_parallel_size=8, data_parallel_size=8, enable_dp_attention=True)
    with_ep = engine_plan("deepseek-v3", "h200", "sglang", version="0.5.6",
                          enable_expert_parallel=True, **s)  # fmt: skip
    without = engine_plan("deepseek-v3", "h200", "sglang", version="0.5.6", **s)
    assert with_ep.weights_bytes == without.weights_bytes  # 32 whole = 256 split 8 ways (fp8)


def test_vllm_expert_parallel_still_spans_tp_x_dp():
    _, _, cfg, _, weights, *_ = prepare(
        "qwen3-30b-a3b", "h100-sxm", "vllm", tensor_parallel_size=2, data_parallel_size=2,
        enable_expert_parallel=True,
    )  # fmt: skip
    tp2 = prepare("qwen3-30b-a3b", "h100-sxm", "vllm", tensor_parallel_size=2)[4]
    assert weights[0] < tp2[0]  # 128 / 4 whole experts beat 128 split 2 ways


def test_qwen3_moe_kv_pool_by_attention_group():
    # attn_tp_size 8 // 8 = 1: all 4 KV heads a GPU; K per token and layer 4 x 128 x 2 B
    s = dict(tensor_parallel_size=8, data_parallel_size=8, enable_dp_attention=True)
    lay = prepare("qwen3-235b-a22b", "h200", "sglang", version="0.5.6", **s)[3]
    assert lay.kv_heads == 4
    assert lay.token_bytes == 2 * 4 * 128 * 2
    plain = prepare("qwen3-235b-a22b", "h200", "sglang", version="0.5.6", tensor_parallel_size=8)
    assert plain[3].kv_heads == 1  # max(1, 4 // 8): one replicated head
    p = layer_rank_params(QWEN, 0, 8, 1, Split(attn=1, dense=8, shared=8, embed=1, head=8))
    # q (64 heads) + k, v (4 heads each) of head_dim 128, all on the GPU
    assert p["attn/q"] + p["attn/kv"] == 4096 * (64 + 2 * 4) * 128


def test_embedding_replicated_lm_head_split():
    s = dict(tensor_parallel_size=8, data_parallel_size=8, enable_dp_attention=True)
    # quantized checkpoint: the plain stored bytes; the embedding's rows are the padded vocab
    # (129,280 = 2020 x 64) on every GPU instead of 1 / 8 of them: 7 / 8 x 129,280 x 7168 x 2 B
    dpa = engine_plan("deepseek-v3", "h200", "sglang", version="0.5.6", **s)
    lm = engine_plan("deepseek-v3", "h200", "sglang", version="0.5.6",
                     enable_dp_lm_head=True, **s)  # fmt: skip
    assert lm.weights_bytes - dpa.weights_bytes == 129280 * 7168 * 2 * 7 // 8


def test_refusals_name_the_setting():
    with pytest.raises(ValueError, match="Please enable dp attention"):
        engine_plan("deepseek-v3", "h200", "sglang", version="0.5.6", tensor_parallel_size=8,
                    enable_dp_lm_head=True)  # fmt: skip
    with pytest.raises(ValueError, match="'enable_dp_attention' is not modelled for 'llama"):
        engine_plan("llama-3.1-70b", "h200", "sglang", version="0.5.6", tensor_parallel_size=8,
                    data_parallel_size=2, enable_dp_attention=True)  # fmt: skip
    with pytest.raises(ValueError, match="'data_parallel_size' is set to tp_size"):
        engine_plan("deepseek-v3", "h200", "sglang", version="0.4.3", tensor_parallel_size=8,
                    data_parallel_size=2, enable_dp_attention=True)  # fmt: skip
    with pytest.raises(ValueError, match="moe_dense_tp_size only support 1 and None"):
        _cfg(tensor_parallel_size=8, moe_dense_tp_size=2)
    with pytest.raises(ValueError, match="'ep_size' must be 1 or tp_size=8"):
        _cfg(tensor_parallel_size=8, ep_size=4)
    with pytest.raises(ValueError, match="'enable_dp_lm_head' is not a setting of sglang 0.4.6"):
        engine_plan("deepseek-v3", "h200", "sglang", version="0.4.6", tensor_parallel_size=8,
                    data_parallel_size=8, enable_dp_attention=True, enable_dp_lm_head=True)  # fmt: skip


def test_chunked_prefill_divided_by_dp():
    # server_args: chunked_prefill_size // dp_size with DP attention (from 0.4.4.post1)
    cfg = _cfg(tensor_parallel_size=8, data_parallel_size=8, enable_dp_attention=True)
    assert cfg.chunked_prefill_size == 8192 // 8


def test_shared_expert_fused_tp_times_on_046_hopper():
    # 0.4.6 determine_n_share_experts_fusion: SM >= 9.0, 256 routed experts -> tp_size copies of
    # the shared expert among the routed ones: a whole shared expert (3 x 7168 x 2048) a GPU
    cfg = engine_config("sglang", version="0.4.6", gpu_memory_gib=141.0, tensor_parallel_size=8)
    _, split = sglang_parallel(V3, cfg, H200)
    assert split.shared == 1
    assert layer_rank_params(V3, 3, 8, 1, split)["mlp/shared"] == 3 * 7168 * 2048
    a100 = load_hardware("a100-80gb")  # SM 8.0: not fused
    assert sglang_parallel(V3, cfg, a100)[1] is None
    new = engine_config("sglang", version="0.4.7", gpu_memory_gib=141.0, tensor_parallel_size=8)
    assert sglang_parallel(V3, new, H200)[1] is None  # one fused copy, split like the others


def test_cli_flags(capsys):
    from calc.cli.main import main

    base = ["plan", "deepseek-v3", "--gpu", "h200", "--gpus", "8", "--tp", "8"]
    sg = [*base, "--engine", "sglang", "--engine-version", "0.5.6", "--dp", "8"]
    assert main([*sg, "--enable-dp-attention", "--json"]) == 0
    dpa = capsys.readouterr().out
    assert main([*sg, "--enable-dp-attention", "--enable-dp-lm-head", "--json"]) == 0
    lm = capsys.readouterr().out
    assert dpa != lm
    assert main([*sg, "--enable-dp-lm-head"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith("Please enable dp attention when setting enable_dp_lm_head.")
    assert "\n" not in err
    assert main([*base, "--engine", "vllm", "--enable-dp-attention"]) == 2
    assert "'--enable-dp-attention' is an SGLang setting" in capsys.readouterr().err
