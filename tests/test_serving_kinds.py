"""engine_plan for the layer-typed models: MLA, chunked, Gated DeltaNet, sinks, shared experts.

Every expected value is the engine's own arithmetic written out here from its source:
- vLLM vllm/v1/kv_cache_interface.py (page_size_bytes, max_memory_usage_bytes of
  MLAAttentionSpec / ChunkedLocalAttentionSpec / SlidingWindowSpec / MambaSpec),
  vllm/v1/core/kv_cache_utils.py (_get_kv_cache_groups_uniform_page_size: group size;
  get_kv_cache_config_from_groups / get_num_blocks: available // page // group_size;
  _report_kv_cache_config: num_blocks // groups x min block size),
  vllm/model_executor/models/config.py HybridAttentionMambaModelConfig (attention block
  16 x ceil(mamba page / (16 x attention bytes per token))),
  vllm/model_executor/layers/mamba/mamba_utils.py gated_delta_net_state_shape;
- vLLM's layer classes for weights (deepseek_v2.py DeepseekV2MLAAttention / DeepseekV2MoE);
- SGLang python/sglang/srt/model_executor/model_runner.py (profile_max_num_token's MLA cell,
  set_num_token_hybrid's sliding-window split).
"""

from __future__ import annotations

import pytest

from calc.presets import load_preset, resolve_model
from calc.serving.plan import engine_plan
from calc.serving.sglang_swa import hybrid_swa_memory
from calc.serving.shard_layers import layer_rank_params
from calc.serving.sharding import rank_weight_bytes

GIB = 2**30
AVAIL = 40 * GIB  # the "Available KV cache memory" every case below is given


def cdiv(a, b):
    return -(-a // b)


def plan(model, gpu="h100-sxm", engine="vllm", **kw):  # the releases these rules were read in
    kw.setdefault("version", "0.11.0" if engine == "vllm" else "0.4.6")
    return engine_plan(model, gpu, engine, available_kv_gib=AVAIL / GIB, **kw)


# --- weights ---------------------------------------------------------------------------------


def test_deepseek_v3_moe_layer_on_a_tp8_rank():
    # DeepseekV2MLAAttention: q_a_proj / kv_a_proj_with_mqa ReplicatedLinear, q_b_proj and
    # kv_b_proj ColumnParallelLinear, o_proj RowParallelLinear; q_a/kv_a layernorms replicated.
    h, H, tp = 7168, 128, 8
    attn = (
        h * 1536  # q_a_proj, replicated
        + 1536 * H * (128 + 64) // tp  # q_b_proj
        + h * (512 + 64)  # kv_a_proj_with_mqa, replicated
        + 512 * H * (128 + 128) // tp  # kv_b_proj
        + H * 128 * h // tp  # o_proj
    )
    # DeepseekV2MoE: gate ReplicatedLinear(h, 256); FusedMoE splits each expert's 2048 tp-ways;
    # shared_experts DeepseekV2MLP(intermediate 2048 x 1) with the TP group.
    moe = h * 256 + 256 * 3 * h * 2048 // tp + 3 * h * 2048 // tp
    norms = 2 * h + 1536 + 512
    got = layer_rank_params(load_preset("deepseek-v3"), 3, tp)
    assert sum(got.values()) == attn + moe + norms
    assert got["router"] == h * 256 and got["mlp/shared"] == 3 * h * 2048 // tp
    dense = layer_rank_params(load_preset("deepseek-v3"), 0, tp)  # first_k_dense_replace = 3
    assert dense["mlp"] == 3 * h * 18432 // tp


def test_deepseek_v3_expert_parallel_holds_whole_experts():
    h, ep = 7168, 8
    got = layer_rank_params(load_preset("deepseek-v3"), 3, 8, ep)
    assert got["mlp"] == 256 // ep * 3 * h * 2048  # 32 whole experts


def test_deepseek_v3_rank_bytes_tp8_bf16():
    # the sum of the layers, the vocab-parallel embedding and head (129280 rows, a multiple of 64,
    # / 8), the final norm and the rotary cache over qk_rope_head_dim (get_rope(64, ...)).
    s = load_preset("deepseek-v3")
    layers = sum(sum(layer_rank_params(s, i, 8).values()) for i in range(61))
    rows = 129280 // 8
    want = 2 * (layers + 2 * rows * 7168 + 7168) + 163840 * 64 * 2
    assert rank_weight_bytes(s, 8, 1, "bf16") == (want,)


def test_gpt_oss_sinks_and_router_on_a_tp8_rank():
    # OAIAttention: sinks of H / tp heads; MLPBlock: router ReplicatedLinear(h, E, bias=True)
    got = layer_rank_params(load_preset("gpt-oss-120b"), 0, 8)
    assert got["attn/sinks:vectors"] == 64 // 8
    assert got["router"] == 2880 * 128 + 128


# --- vLLM KV cache ---------------------------------------------------------------------------


def test_deepseek_v3_tp8_mla_latent_pages():
    # MLAAttentionSpec.real_page_size_bytes: block x num_kv_heads (1) x head_size (512 + 64) x
    # 2 B, on every rank; one group of 61 layers. On an H200, vLLM 0.11.0 forces the block to 64
    # for FlashMLA (platforms/cuda.py check_and_update_config: "Forcing kv cache block size to 64
    # for FlashMLA backend."), so FullAttentionSpec needs ceil(L / 64) blocks.
    p = plan("deepseek-v3", "h200", tensor_parallel_size=8, max_model_len=163840)
    page = 64 * 1 * (512 + 64) * 2
    blocks = AVAIL // page // 61
    assert (p.page_bytes, p.num_gpu_blocks) == (page, blocks) == (73728, 9549)
    assert p.gpu_kv_cache_tokens == blocks * 64
    assert p.max_concurrency == pytest.approx(blocks / cdiv(163840, 64))
    assert p.log_lines[0] == "Forcing kv cache block size to 64 for FlashMLA backend."
    # an A100 (sm80) has no FlashMLA: the 16-token block stays
    a = plan("deepseek-v3", "a100-80gb", tensor_parallel_size=8, max_model_len=163840)
    assert (a.page_bytes, a.num_gpu_blocks) == (18432, AVAIL // 18432 // 61)


def test_deepseek_v3_fp8_kv_halves_the_page():
    p = plan("deepseek-v3", "h200", tensor_parallel_size=8, kv_cache_dtype="fp8")
    assert p.page_bytes == 64 * 576 * 1


def test_qwen3_next_tp4_mamba_page_raises_the_attention_block():
    # gated_delta_net_state_shape at tp 4: conv (128*16*2 + 128*32) / 4 x (4 - 1),
    # recurrent 32 / 4 x 128 x 128, both bf16 (mamba_cache_dtype auto = the model dtype).
    mamba = ((128 * 16 * 2 + 128 * 32) // 4 * 3 + 32 // 4 * 128 * 128) * 2
    per_token = 2 * 1 * 256 * 2  # K and V, 2 KV heads / 4 ranks -> 1 (replicated), head 256
    block = 16 * cdiv(mamba, 16 * per_token)  # HybridAttentionMambaModelConfig
    assert (mamba, block) == (274432, 272)
    page = block * per_token  # the mamba page is padded to it
    # 36 linear + 12 full layers: group size 12 (36 >= 1.5 x 12): 3 linear groups + 1 full
    blocks = AVAIL // page // 12
    L = 262144
    p = plan("qwen3-next-80b-a3b", tensor_parallel_size=4, max_model_len=L)
    assert (p.page_bytes, p.kv_groups, p.num_gpu_blocks) == (page, 4, blocks)
    # _report_kv_cache_config: // 4 groups x the smallest block size (MambaSpec's is L)
    assert p.gpu_kv_cache_tokens == blocks // 4 * 272
    # MambaSpec.max_memory_usage_bytes ("none" mode): one page per linear group
    assert p.max_concurrency == pytest.approx(blocks / (3 * 1 + cdiv(L, 272)))


def test_qwen3_next_refusals():
    with pytest.raises(ValueError, match="Hybrid KV cache manager is disabled"):
        plan("qwen3-next-80b-a3b", tensor_parallel_size=4, disable_hybrid_kv_cache_manager=True)
    with pytest.raises(ValueError, match="before vLLM 0.10.2"):
        plan("qwen3-next-80b-a3b", tensor_parallel_size=4, version="0.10.1")
    odd = load_preset("qwen3-next-80b-a3b").replace(linear_num_key_heads=2)
    with pytest.raises(ValueError, match="'tp' must divide linear_num_key_heads=2"):
        plan(odd, tensor_parallel_size=4)
    # SGLang's pools for them: tests/test_serving_sglang_hybrid.py
    with pytest.raises(ValueError, match="SGLang's mamba pool"):
        plan(
            "qwen3-next-80b-a3b", engine="sglang", tensor_parallel_size=2, pipeline_parallel_size=2
        )


def test_llama4_scout_chunked_layers():
    page = 16 * 2 * (8 // 4) * 128 * 2  # tp 4: 2 KV heads a rank
    L, mbt = 131072, 8192  # max_num_batched_tokens: V1 default on an 80 GiB H100
    # default: VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE off -> all 48 layers full
    p = plan("llama-4-scout", tensor_parallel_size=4, max_model_len=L)
    blocks = AVAIL // page // 48
    assert (p.kv_groups, p.num_gpu_blocks) == (1, blocks)
    assert p.max_concurrency == pytest.approx(blocks / cdiv(L, 16))
    # with it: 36 chunked + 12 full -> groups of 12; ChunkedLocalAttentionSpec needs
    # ceil(min(chunk + max_num_batched_tokens, L) / block) blocks
    p = plan("llama-4-scout", tensor_parallel_size=4, max_model_len=L,
             allow_chunked_local_attn_hybrid=True)  # fmt: skip
    blocks = AVAIL // page // 12
    assert (p.kv_groups, p.num_gpu_blocks) == (4, blocks)
    assert p.gpu_kv_cache_tokens == blocks // 4 * 16
    per_req = 3 * cdiv(min(8192 + mbt, L), 16) + cdiv(L, 16)
    assert p.max_concurrency == pytest.approx(blocks / per_req)


def test_gpt_oss_120b_sliding_groups():
    # 18 sliding + 18 full layers: one group each of 18; SlidingWindowSpec needs
    # ceil(min(128 - 1 + 8192, L) / 16) + 1 blocks
    page = 16 * 2 * 8 * 64 * 2
    p = plan("gpt-oss-120b", max_model_len=131072)
    blocks = AVAIL // page // 18
    assert (p.kv_groups, p.num_gpu_blocks) == (2, blocks)
    assert p.gpu_kv_cache_tokens == blocks // 2 * 16
    per_req = cdiv(131072, 16) + cdiv(127 + 8192, 16) + 1
    assert p.max_concurrency == pytest.approx(blocks / per_req)


# --- SGLang ----------------------------------------------------------------------------------


def test_sglang_mla_token_pool():
    # profile_max_num_token: cell = (kv_lora_rank + qk_rope_head_dim) x layers x 2 B;
    # MLATokenToKVPool holds tokens + page_size rows of that cell ("KV size")
    # (the memory is given; sglang 0.4.6 has no tp-table default on a GPU of > 96 GB: #5604)
    p = plan("deepseek-v3", "h200", "sglang", tensor_parallel_size=8, mem_fraction_static=0.81)
    cell = (512 + 64) * 61 * 2
    tokens = AVAIL // cell
    assert (p.page_bytes, p.gpu_kv_cache_tokens) == (cell, tokens) == (70272, 611191)
    assert f"KV size: {(tokens + 1) * cell / GIB:.2f} GB" in p.log_lines[1]


def test_sglang_gpt_oss_sliding_pool():
    # from 0.5.10 (server_args no longer sets disable_hybrid_swa_memory for gpt-oss):
    # set_num_token_hybrid: total = tokens x 36 layers; full = int(total / (0.8 x 18 + 18));
    # swa = int(full x 0.8); max_total_num_tokens = full
    cell = 2 * 8 * 64 * 2 * 36
    tokens = AVAIL // cell
    full = int(tokens * 36 / (0.8 * 18 + 18))
    p = plan("gpt-oss-120b", engine="sglang", version="0.5.10")
    assert p.gpu_kv_cache_tokens == full == 647268
    # configure_kv_cache_dtype's line first (model_runner.py, 0.5.3rc2 - 0.5.12 wheels)
    assert p.log_lines[1] == "Using KV cache dtype: torch.bfloat16"
    assert f"swa_layer_tokens={int(full * 0.8)}" in p.log_lines[2]
    p = plan("gpt-oss-120b", engine="sglang", version="0.5.10", swa_full_tokens_ratio=0.5)
    assert p.gpu_kv_cache_tokens == int(tokens * 36 / (0.5 * 18 + 18))
    # 0.5.8 - 0.5.9: configs/model_config.py is_hybrid_swa_model lists GptOssForCausalLM, and
    # the server_args branch sets disable_hybrid_swa_memory only with trtllm_mha (its default on
    # SM100; fa3 on an H100) and, in 0.5.8.x, speculative decoding (server_args.py, 0.5.8 /
    # 0.5.8.post1 / 0.5.9 wheels): the same split as 0.5.10 on an H100
    for v in ("0.5.8", "0.5.9"):
        assert plan("gpt-oss-120b", engine="sglang", version=v).gpu_kv_cache_tokens == full
    # one token pool of all 36 layers: on a B200 (trtllm_mha, its 64-token pages) up to 0.5.9,
    # with speculative decoding in 0.5.8, and everywhere in 0.5.1 - 0.5.7 (disabled for gpt-oss
    # up to 0.5.6.post2; 0.5.7 builds the hybrid pool for MiMo-V2 and Llama 4 only)
    p = plan("gpt-oss-120b", "b200", engine="sglang", version="0.5.9")
    assert p.gpu_kv_cache_tokens == tokens // 64 * 64
    assert not any("sliding window" in line for line in p.log_lines)
    p = plan("gpt-oss-120b", "b200", engine="sglang", version="0.5.10")  # no longer disabled
    assert any("Use sliding window memory pool" in line for line in p.log_lines)
    spec = resolve_model("gpt-oss-120b")
    assert hybrid_swa_memory(spec, (0, 5, 8, 0), 9, speculative=False)
    assert not hybrid_swa_memory(spec, (0, 5, 8, 1), 9, speculative=True)
    assert hybrid_swa_memory(spec, (0, 5, 9, 0), 9, speculative=True)
    assert not hybrid_swa_memory(spec, (0, 5, 9, 0), 10, speculative=False)
    assert hybrid_swa_memory(spec, (0, 5, 10, 0), 10, speculative=True)
    assert hybrid_swa_memory(spec, (0, 5, 8, 0), None, speculative=False)  # AMD: triton
    p = plan("gpt-oss-120b", engine="sglang", version="0.5.7")
    assert p.gpu_kv_cache_tokens == tokens == 582542
    assert p.log_lines[2].startswith(f"KV Cache is allocated. #tokens: {tokens},")
    # not in SGLang before 0.5.1 (models/gpt_oss.py)
    with pytest.raises(ValueError, match="GptOssForCausalLM is in SGLang from 0.5.1"):
        plan("gpt-oss-120b", engine="sglang", version="0.4.10.post2")


def test_sglang_gemma3_keeps_one_pool():
    # is_hybrid_swa_model lists Llama4 / GptOss / MiMo / Step3p5 only: Gemma 3 sizes every
    # layer as full attention
    cell = 2 * 16 * 128 * 62 * 2
    p = plan("gemma-3-27b", engine="sglang")
    assert p.gpu_kv_cache_tokens == AVAIL // cell
    # 0.4.9.post3 - 0.4.10.x: ModelRunner.initialize turned the hybrid pool on for the models
    # with get_attention_sliding_window_size (Gemma 2 until 0.4.10.post2's check_server_args
    # disabled it, Gemma 3 until 0.5.1's model_specific_adjustments): refused, not modelled
    for model, version in (("gemma-2-9b", "0.4.9.post3"), ("gemma-3-27b", "0.4.10.post2")):
        with pytest.raises(ValueError, match="hybrid sliding-window pool .* not model"):
            plan(model, engine="sglang", version=version)
    assert plan("gemma-2-9b", engine="sglang", version="0.4.10.post2").gpu_kv_cache_tokens
    assert plan("gemma-2-9b", engine="sglang", version="0.4.9.post2").gpu_kv_cache_tokens


# --- the releases that changed vLLM's grouping (read in each release's PyPI sdist) -----------


def _ten_sliding_fourteen_full():
    from calc.spec import ModelSpec

    return ModelSpec(
        name="sw10-full14",
        num_hidden_layers=24,
        hidden_size=4096,
        num_attention_heads=32,
        num_key_value_heads=8,
        head_dim=128,
        intermediate_size=14336,
        vocab_size=32000,
        max_position_embeddings=32768,
        sliding_window=1024,
        layer_types=(("sliding_attention", 10), ("full_attention", 14)),
    )


@pytest.mark.parametrize(
    "version, groups, group_size",
    [
        # 0.9.0: get_kv_cache_config always calls unify_hybrid_kv_cache_specs -> one full group
        ("0.9.0", 1, 24),
        # 0.9.1 - 0.11.x: _get_kv_cache_config_uniform_page_size, group_size = min(10, 14) = 10
        # -> 1 sliding group + ceil(14 / 10) = 2 full groups
        ("0.9.1", 3, 10),
        ("0.11.0", 3, 10),
        # 0.12.0: `if max_num_layers < min_num_layers * 1.25` -> 14 < 12.5 is false: still 10
        ("0.12.0", 3, 10),
        # 0.18.0: `* 1.5` -> 14 < 15: group_size 14, one group of each kind
        ("0.18.0", 2, 14),
    ],
)
def test_vllm_hybrid_groups_by_release(version, groups, group_size):
    page = 16 * 2 * 8 * 128 * 2
    p = plan(_ten_sliding_fourteen_full(), version=version, max_model_len=8192)
    assert (p.kv_groups, p.num_gpu_blocks) == (groups, AVAIL // page // group_size)


def test_llama4_chunked_layers_by_release():
    # 0.9.2: no ChunkedLocalAttentionSpec (gpu_model_runner gives chunked layers a
    # FullAttentionSpec) -> one group of 48 even with the variable set; 0.10.0: the spec exists
    # and VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE does not (envs.py), so the hybrid
    # manager groups 36 chunked + 12 full by default; 0.10.1: the variable, False by default
    page = 16 * 2 * (8 // 4) * 128 * 2
    kw = dict(tensor_parallel_size=4, max_model_len=131072)
    old = plan("llama-4-scout", version="0.9.2", allow_chunked_local_attn_hybrid=True, **kw)
    assert (old.kv_groups, old.num_gpu_blocks) == (1, AVAIL // page // 48)
    mid = plan("llama-4-scout", version="0.10.0", **kw)
    assert (mid.kv_groups, mid.num_gpu_blocks) == (4, AVAIL // page // 12)
    new = plan("llama-4-scout", version="0.10.1", **kw)
    assert (new.kv_groups, new.num_gpu_blocks) == (1, AVAIL // page // 48)
