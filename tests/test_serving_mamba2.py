"""Engine plans of the Mamba-2 hybrids (Nemotron 3 Nano 30B-A3B, Granite 4.0-H Small), every
expected value written out here from the engines' sources:

vLLM (PyPI sdists; default release 0.33.0):
- vllm/model_executor/layers/mamba/mamba_utils.py MambaStateShapeCalculator.mamba2_state_shape:
  n_groups += extra_groups_for_head_shards (tp - n_groups when tp does not divide it), conv state
  (intermediate + 2 x n_groups x state) / tp x (conv_kernel - 1), temporal state (heads / tp,
  head_dim, state); intermediate = mamba_num_heads x mamba_head_dim (nemotron_h.py) or
  mamba_expand x hidden_size (granitemoehybrid.py);
- MambaStateDtypeCalculator._mamba_state_dtype: the conv state in mamba_cache_dtype "auto" = the
  model dtype, the temporal state in mamba_ssm_cache_dtype ("auto" = the conv state's), which
  model_executor/models/config.py NemotronHForCausalLMConfig replaces for NemotronH by the
  config.json's mamba_ssm_cache_dtype, else "float16" (0.13.0 - 0.19.x) / "float32" (0.20.0 on);
  the class is absent from the 0.12.0 sdist;
- vllm/v1/kv_cache_interface.py MambaSpec.page_size_bytes (sum of the states' bytes, padded to
  mamba_page_size_padded) and max_memory_usage_bytes: one page in mamba_cache_mode "none", 2 +
  num_prefill_checkpoint_blocks in "align", the mode MambaModelConfig picks when prefix caching
  is on, which config/model.py is_prefix_caching_supported makes the default for hybrid models
  from 0.26.0 (0.25.0: off); MambaMixer2.get_kv_cache_spec declares one checkpoint block from
  0.32.0 (absent in 0.31.0); in align mode mamba_block_size = block_size;
- vllm/platforms/interface.py Platform._align_hybrid_block_size: attention block =
  16 x cdiv(mamba page, 16 x attention page of one token) when above --block-size 16;
- vllm/v1/core/kv_cache_utils.py: group size = the smallest layer count of the kinds (the
  largest when under 1.5 x it), blocks = available // page // group size, "GPU KV cache size" =
  blocks // groups x the smallest block size (a MambaSpec's is max_model_len).
SGLang (PyPI wheels 0.5.7 - 0.5.23): configs/mamba_utils.py Mamba2StateShape.create (the same
shapes as vLLM's), Mamba2CacheParams.mamba_cache_per_req (conv in bfloat16, CONV_DTYPE / the
SGLANG_MAMBA_CONV_DTYPE default; temporal in --mamba-ssm-dtype, float32 by default);
configs/nemotron_h.py / granitemoehybrid.py mamba2_cache_params (the mamba layers only) and
full_attention_layer_ids (the token pool's cell); the pool rules as for Qwen3-Next
(tests/test_serving_sglang_hybrid.py). Model configs: tests/fixtures/hf/modern/
nemotron-3-nano-30b-a3b.json and granite-4.0-h-small.json (their sources cited there).
"""

from __future__ import annotations

import pytest

from calc.layers import KINDS
from calc.presets import load_preset
from calc.serving.plan import engine_plan

GIB = 2**30
AVAIL = 40  # GiB, "Available KV cache memory" given to every vLLM case
NANO, SMALL = "nemotron-3-nano-30b-a3b", "granite-4.0-h-small"


def cdiv(a, b):
    return -(-a // b)


def vllm(model, avail=AVAIL, **kw):
    kw.setdefault("tensor_parallel_size", 1)
    kw.setdefault("version", "0.33.0")  # the cases below: 0.33.0's 16-token block
    return engine_plan(model, "h100-sxm", available_kv_gib=avail, **kw)


# --- vLLM ---------------------------------------------------------------------------------------


def test_vllm_nemotron_nano_tp1():
    # Nemotron 3 Nano: 64 heads x 64, n_groups 8, state 128, conv kernel 4; config.json
    # mamba_ssm_cache_dtype "float32" (NemotronHForCausalLMConfig reads it)
    conv = (64 * 64 + 2 * 8 * 128) * (4 - 1) * 2  # bf16
    ssm = 64 * 64 * 128 * 4  # float32
    state = conv + ssm
    assert state == 2134016
    per_token = 2 * 2 * 128 * 2  # K and V, 2 KV heads, head 128, bf16
    block = 16 * cdiv(state, 16 * per_token)
    assert block == 2096
    page = block * per_token  # the mamba page padded to the attention page
    # 23 mamba + 6 attention layers (the 23 MoE-only blocks hold no cache): group size 6
    # (23 >= 1.5 x 6), cdiv(23, 6) = 4 mamba groups + 1 attention group
    L = 262144
    p = vllm(NANO, max_model_len=L)
    blocks = AVAIL * GIB // page // 6
    assert (p.page_bytes, p.kv_groups, p.num_gpu_blocks) == (page, 5, blocks)
    # align mode (0.33.0): 2 + 1 checkpoint pages per mamba group
    assert p.max_concurrency == pytest.approx(blocks / (4 * 3 + cdiv(L, block)))
    # the token line from 0.21.0: int(concurrency x max_model_len) (_report_kv_cache_config)
    tokens = int(blocks / (4 * 3 + cdiv(L, block)) * L)
    assert p.gpu_kv_cache_tokens == tokens
    # after the hybrid config lines (vllm_mamba.page_lines): the block raised to 2,096 tokens,
    # the state padded to its page
    pad = 100 * (page - state) / state
    assert p.log_lines[:2] == [
        "Setting attention block size to 2096 tokens to ensure that attention page size is >= "
        "mamba page size.",
        f"Padding mamba page size by {pad:.2f}% to ensure that mamba page size and attention "
        "page size are exactly equal.",
    ]
    # the 23 mamba layers padded to 4 groups of 6: one padding layer, 1 / 23 of their memory
    # (kv_cache_utils' warning, printed after "Available KV cache memory")
    assert p.log_lines[4] == "Add 1 padding layers, may waste at most 4.35% KV cache memory"
    # one line from 0.28.0 (kv_cache_utils.update_kv_cache_capacity)
    assert p.log_lines[5] == (
        f"GPU KV cache size: {tokens:,} tokens, Maximum concurrency for {L:,} tokens per "
        f"request: {blocks / (4 * 3 + cdiv(L, block)):.2f}x"
    )


def test_vllm_granite_h_small_tp1_and_tp2():
    # Granite 4.0-H Small: 128 heads x 64 (mamba_expand 2 x hidden 4096), n_groups 1, state 128,
    # kernel 4; no NemotronH config class: the SSM state in the model dtype (bf16)
    L = 131072
    for tp, groups, kv_heads in ((1, 1, 8), (2, 2, 4)):  # n_groups 1 widened to tp
        conv = (128 * 64 + 2 * groups * 128) // tp * (4 - 1)
        ssm = 128 // tp * 64 * 128
        state = (conv + ssm) * 2
        per_token = 2 * kv_heads * 128 * 2
        block = 16 * cdiv(state, 16 * per_token)
        page = block * per_token
        # 36 mamba + 4 attention layers: group size 4, 9 mamba groups + 1 attention group
        p = vllm(SMALL, max_model_len=L, tensor_parallel_size=tp)
        blocks = AVAIL * GIB // page // 4
        assert (p.page_bytes, p.kv_groups, p.num_gpu_blocks) == (page, 10, blocks), tp
        assert p.max_concurrency == pytest.approx(blocks / (9 * 3 + cdiv(L, block)))
        assert p.gpu_kv_cache_tokens == int(blocks / (9 * 3 + cdiv(L, block)) * L)
    assert (state, block) == (1074688, 528)  # tp 2: (4352 x 3 + 64 x 64 x 128) x 2 B


def test_vllm_nemotron_ssm_dtype_by_release():
    no_field = load_preset(NANO).replace(mamba_ssm_cache_dtype=None)
    conv = (64 * 64 + 2 * 8 * 128) * 3
    ssm = 64 * 64 * 128
    per_token = 2 * 2 * 128 * 2
    for model, version, ssm_bytes in (
        (NANO, "0.12.0", 2),  # no NemotronHForCausalLMConfig: "auto" = bf16, the field unread
        (NANO, "0.13.0", 4),  # the config's float32
        (no_field, "0.13.0", 2),  # default "float16"
        (no_field, "0.20.0", 4),  # default "float32"
    ):
        state = conv * 2 + ssm * ssm_bytes
        p = vllm(model, version=version, max_model_len=65536)
        assert p.page_bytes == 16 * cdiv(state, 16 * per_token) * per_token, version


def test_vllm_mamba_pages_a_request_by_release():
    L, block = 65536, 2096  # Nemotron 3 Nano at tp 1 (test_vllm_nemotron_nano_tp1)
    # 0.25.0 "none": 1 page; 0.26.x - 0.27.x "all" (models/config.py: `"all" if
    # model_config.supports_mamba_prefix_caching else "align"`; nemotron_h.py declares
    # SupportsMambaPrefixCaching): a state per block, cdiv(L, block) pages; 0.28.0 on "align"
    # alone: 2 pages, + MambaMixer2's checkpoint block from 0.32.0
    # "all" mode also aligns the attention block to the Mamba-2 chunk (platforms/interface.py
    # 0.26.0 / 0.27.0: chunk_size = lcm(get_mamba_chunk_size() = config chunk_size 128, 16);
    # attn_block_size = chunk_size x cdiv(cdiv(state 2,134,016 B, 1,024 B a token), chunk_size)
    # = 128 x cdiv(2,084, 128) = 2,176), and mamba_block_size is that block
    all_block = 128 * cdiv(2134016 // 1024, 128)
    assert all_block == 2176
    for version, pages, b in (
        ("0.25.0", 1, block),
        ("0.26.0", cdiv(L, all_block), all_block),
        ("0.27.0", cdiv(L, all_block), all_block),
        ("0.28.0", 2, block),
        ("0.31.0", 2, block),
        ("0.32.0", 3, block),
    ):
        p = vllm(NANO, version=version, max_model_len=L)
        assert p.page_bytes == b * 1024, version
        assert p.max_concurrency == pytest.approx(p.num_gpu_blocks / (4 * pages + cdiv(L, b))), (
            version
        )
    # the token line up to 0.20.x, blocks // groups x the smallest group block: in "none" mode
    # the MambaSpec block is max_model_len, the smallest when under the attention block; from
    # 0.21.0 int(concurrency x L): a request takes 4 state pages + 1 attention block either way
    short = 1024
    p = vllm(NANO, version="0.20.0", max_model_len=short)
    assert p.gpu_kv_cache_tokens == p.num_gpu_blocks // 5 * short
    p = vllm(NANO, version="0.25.0", max_model_len=short)
    assert p.gpu_kv_cache_tokens == int(p.num_gpu_blocks / 5 * short)
    p = vllm(NANO, version="0.26.0", max_model_len=short, max_num_batched_tokens=2048)
    assert p.page_bytes == all_block * 1024
    assert p.gpu_kv_cache_tokens == int(p.num_gpu_blocks / (4 * 1 + 1) * short)
    # 0.26.0's align-mode assertion (block_size <= max_num_batched_tokens, config/vllm.py; gone
    # from 0.27.0) does not apply to "all" mode; Qwen3-Next's Gated DeltaNet runs "align" there
    # (its state at tp 4: conv (2 x 16 x 128 + 32 x 128) / 4 x 3 + 32 / 4 x 128 x 128 values,
    # bf16 = 274,432 B; 2 KV heads / 4 -> 1 x 256 x 2 x 2 B = 1,024 B a token: block 16 x
    # cdiv(274,432, 16 x 1,024) = 272)
    with pytest.raises(ValueError, match="'max_num_batched_tokens' must be at least .* 272"):
        engine_plan(
            "qwen3-next-80b-a3b", "h100-sxm", "vllm", version="0.26.0", max_model_len=short,
            tensor_parallel_size=4, max_num_batched_tokens=256,
        )  # fmt: skip
    assert vllm(NANO, version="0.27.0", max_model_len=short, max_num_batched_tokens=2048).fits


def test_vllm_gated_deltanet_pages_by_release_and_gpu():
    # Qwen3-Next at tp 4 (state 274,432 B, 1,024 B a token: above): "align" from 0.26.0 (no
    # SupportsMambaPrefixCaching in qwen3_next.py), 2 pages a request per linear group; 0.33.0's
    # QwenGatedDeltaNetAttention exports a checkpoint block when its prefill backend is
    # FlashInfer (_resolve_gdn_prefill_backend: sm90, or sm10x / sm12x with linear_key_head_dim
    # 128 on CUDA 13) and folds FLASHINFER_GDN_CHECKPOINT_ALIGNMENT 64 into the attention block
    # (platforms/interface.py: lcm(16, 64)); Triton elsewhere (an A100)
    L, state, per_token = 65536, 274432, 1024
    # 48 layers: 36 linear + 12 full -> group size 12, 3 linear groups + 1 full group
    for version, gpu, pages, align in (
        ("0.25.0", "h100-sxm", 1, 16),
        ("0.26.0", "h100-sxm", 2, 16),
        ("0.32.0", "h100-sxm", 2, 16),
        ("0.33.0", "a100-80gb", 2, 16),
        ("0.33.0", "h100-sxm", 3, 64),
        ("0.33.0", "b200", 3, 64),
    ):
        block = align * cdiv(state, align * per_token)
        p = engine_plan(
            "qwen3-next-80b-a3b", gpu, "vllm", version=version, max_model_len=L,
            tensor_parallel_size=4,
        )  # fmt: skip
        assert p.page_bytes == block * per_token, (version, gpu)
        assert p.max_concurrency == pytest.approx(
            p.num_gpu_blocks / (3 * pages + cdiv(L, block))
        ), (version, gpu)


def test_vllm_refusals():
    # NemotronHMoE absent from 0.11.0's nemotron_h.py; vLLM's Nemotron-3-Nano recipe
    # (docs.vllm.ai/projects/recipes/en/stable/NVIDIA/Nemotron-3-Nano-30B-A3B.html): "vLLM
    # 0.11.2 also supports the model"
    with pytest.raises(ValueError, match="'version' must be at least 0.11.2 .* got 0.11.0"):
        vllm(NANO, version="0.11.0")
    with pytest.raises(ValueError, match="'version' must be at least 0.10.2 .* got 0.10.1"):
        vllm(SMALL, version="0.10.1")
    with pytest.raises(ValueError, match="Hybrid KV cache manager is disabled"):
        vllm(SMALL, disable_hybrid_kv_cache_manager=True)
    with pytest.raises(ValueError, match="must divide mamba_num_heads=128 .* got 3"):
        KINDS["mamba"].rank_state_elems(load_preset(SMALL), 3)
    # MambaMixer2: a tp that does not divide n_groups only when n_groups is 1
    with pytest.raises(ValueError, match="must divide n_groups=8 unless n_groups is 1.* got 16"):
        KINDS["mamba"].rank_state_elems(load_preset(NANO), 16)


# --- SGLang -------------------------------------------------------------------------------------


def sg(model, version, avail_gib, **kw):
    kw.setdefault("tensor_parallel_size", 1)
    return engine_plan(
        model, "h100-sxm", "sglang", version=version, available_kv_gib=avail_gib, **kw
    )


def test_sglang_nemotron_nano_pool():
    conv = (64 * 64 + 2 * 8 * 128) * (4 - 1) * 2  # bf16
    ssm = 64 * 64 * 128 * 4  # --mamba-ssm-dtype float32
    per_req = (conv + ssm) * 23
    assert per_req == 49082368
    rest = 20 * GIB
    slots = int((rest * 0.9 / 1.9 - per_req) // per_req)  # 0.5.17 on: the padding slot
    cell = 2 * 2 * 128 * 2 * 6  # K and V, 2 heads x 128, bf16, the 6 attention layers
    tokens = (rest - (slots + 1) * per_req) // cell
    p = sg(NANO, "0.5.23", 20.0, max_model_len=131072)
    assert (p.max_mamba_cache_size, p.gpu_kv_cache_tokens, p.page_bytes) == (slots, tokens, cell)
    gb_conv, gb_ssm = (slots + 1) * 23 * conv / GIB, (slots + 1) * 23 * ssm / GIB
    assert p.log_lines[1] == (
        f"Mamba Cache is allocated. max_mamba_cache_size: {slots}, conv_state size: "
        f"{gb_conv:.2f}GB, ssm_state size: {gb_ssm:.2f}GB "
    )
    assert p.max_concurrency == pytest.approx(min(tokens / 131072, slots))
    # 0.5.7 - 0.5.16: no padding slot
    slots = int(rest * 0.9 / 1.9 // per_req)
    p = sg(NANO, "0.5.7", 20.0)
    assert p.gpu_kv_cache_tokens == (rest - slots * per_req) // cell


def test_sglang_granite_tp2_widens_the_group():
    conv = (128 * 64 + 2 * 2 * 128) // 2 * 3 * 2  # n_groups 1 widened to 2, then / tp
    ssm = 128 // 2 * 64 * 128 * 4
    per_req = (conv + ssm) * 36
    rest = 30 * GIB
    slots = int((rest * 0.9 / 1.9 - per_req) // per_req)
    cell = 2 * (8 // 2) * 128 * 2 * 4  # 4 KV heads a rank, the 4 attention layers
    p = sg(SMALL, "0.5.23", 30.0, tensor_parallel_size=2)
    assert p.max_mamba_cache_size == slots
    assert p.gpu_kv_cache_tokens == (rest - (slots + 1) * per_req) // cell


def test_sglang_releases_and_refusals():
    with pytest.raises(ValueError, match="'version' must be at least 0.5.9 .* got 0.5.8"):
        sg(SMALL, "0.5.8", 20.0)  # GraniteMoeHybrid absent from the 0.5.8 wheel
    with pytest.raises(ValueError, match="'version' must be at least 0.5.7 .* got 0.5.6.post2"):
        sg(NANO, "0.5.6.post2", 20.0)
    with pytest.raises(ValueError, match="SGLang's mamba pool"):
        sg(NANO, "0.5.23", 20.0, pipeline_parallel_size=2)


def test_sglang_0_5_17_turns_the_breakable_graph_off_for_nemotron_h():
    # 0.5.17 server_args.py _disable_breakable_cudagraph_if_incompatible: "NemotronH (hybrid
    # Mamba2 prefill)"; gone from 0.5.18. The default mem_fraction_static then reserves no graph
    # memory: the same as --disable-piecewise-cuda-graph given.
    def frac(model, version, **kw):
        return engine_plan(
            model, "h100-sxm", "sglang", version=version, **kw
        ).available_kv_cache_bytes

    off = frac(NANO, "0.5.17", disable_piecewise_cuda_graph=True)
    assert frac(NANO, "0.5.17") == off
    assert frac(NANO, "0.5.18") != frac(NANO, "0.5.18", disable_piecewise_cuda_graph=True)
    assert frac(SMALL, "0.5.17") != frac(SMALL, "0.5.17", disable_piecewise_cuda_graph=True)
