"""vLLM's DeepSeek-V4 KV cache (calc.serving.v4_cache) against a real vLLM 0.22 refusal.

Evidence: benchmarks/engine_logs/vllm-44376-deepseek-v4-flash-refused.toml, from
https://github.com/vllm-project/vllm/issues/44376 (comment of 2026-06-03): DeepSeek-V4-Flash,
2 x GH200 96 GB, LLM(tensor_parallel_size=2, enable_expert_parallel=True, max_model_len=30_000,
kv_cache_dtype="fp8", block_size=256, gpu_memory_utilization=0.95, enable_prefix_caching=True):
"6.66 GiB KV cache is needed ... available KV cache memory (5.44 GiB) ... the estimated maximum
model length is 13528".

The model: DeepSeek-V4-Flash's config.json, as copied "as published on HF" in alibaba/rtp-llm's
DeepSeek-V4 unit test (FLASH_BASE_CONFIG): num_hidden_layers 43, compress_ratios [0, 0, then 4,
128 alternating, ..., 4, 0 (the MTP entry)], head_dim 512, qk_rope_head_dim 64, index_head_dim
128, sliding_window 128. max_num_batched_tokens: the LLM class on a >= 70 GiB non-A100 GPU
defaults to 16384 (vllm 0.22.0 engine/arg_utils.py:2311-2315, get_batch_defaults).

The arithmetic below is written out from the vllm 0.22.0 sdist (file:line there).
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from calc.serving.v4_cache import V4Attention, v4_layout

GIB = 2**30
LOG = Path(__file__).parents[1] / "benchmarks" / "engine_logs"
LOG = LOG / "vllm-44376-deepseek-v4-flash-refused.toml"
FLASH_RATIOS = (0, 0) + (4, 128) * 20 + (4,)  # the 43 decoder layers (the 44th entry is MTP's)
FLASH = V4Attention(compress_ratios=FLASH_RATIOS)
MNBT = 16384


def cdiv(a, b):
    return -(-a // b)


def pad576(n):  # kv_cache_interface.py:301-308, alignment=576
    return cdiv(n, 576) * 576


@pytest.fixture(scope="module")
def logged():
    return tomllib.loads(LOG.read_text())["logged"]


def written_out_request_bytes(L: int) -> int:
    """vllm 0.22.0, one request of L tokens, DeepSeek-V4-Flash, block 256, fp8_ds_mla."""
    c4, c128 = 21, 20  # ratios 4 at layers 2, 4, ..., 42; 128 at 3, 5, ..., 41
    # full-MLA pages (attention.py:709-718, :754-762; kv_cache_interface.py:350-359)
    c4_latent = pad576(256 // 4 * 584)  # 37440
    c4_index = pad576(256 // 4 * (128 + 128 // 128 * 4))  # 8640
    c128_latent = pad576(256 // 128 * 584)  # 1728
    tuple_bytes = c4_latent + c4_index + c128_latent  # one layer tuple, 47808
    # sliding groups (_get_kv_cache_groups_uniform_groups, kv_cache_utils.py:1493-1591):
    # SWA caches (43, block 64), C4 states (21 + 21, block 4), C128 states (20, block 8);
    # most-common counts 21 (full), 43, 21, 20 -> _approximate_gcd(lower bound 21) = 22
    # (padding 1 + 1 + 1 + 2 = 5, vs 21 at d = 21); SWA split in cdiv(43, 22) = 2 groups
    # (22 + 21), the others in one each; the largest tuple count after that is 22.
    tuples = 22
    assert (c4, c128, c4_latent, c4_index, c128_latent) == (21, 20, 37440, 8640, 1728)
    full = cdiv(L, 256)  # FullAttentionSpec.max_memory_usage_bytes (:210-219)
    # SlidingWindowSpec.max_admission_blocks_per_request (:463-483): window - 1 + mnbt tokens
    swa = cdiv(min(128 - 1 + MNBT, L), 64) + 1
    c4_state = cdiv(min(8 - 1 + MNBT, L), 4) + 1
    c128_state = cdiv(min(128 - 1 + MNBT, L), 8) + 1
    pages = full + 2 * swa + c4_state + c128_state  # two SWA groups
    return tuples * pages * tuple_bytes  # _max_memory_usage_bytes_from_groups (:1762-1789)


def test_groups_of_flash():
    lay = v4_layout(FLASH, (0, 22, 0), "fp8", 256)
    shape = [(g.kind, g.block_size, g.window, len(g.pages)) for g in lay.groups]
    assert shape == [
        ("full", 256, None, 62),
        ("sliding", 64, 128, 22),
        ("sliding", 64, 128, 21),
        ("sliding", 4, 8, 42),
        ("sliding", 8, 128, 20),
    ]
    assert lay.tuple_bytes == 37440 + 8640 + 1728
    assert lay.num_tuples == 22


def test_needed_bytes_reproduce_the_log(logged):
    lay = v4_layout(FLASH, (0, 22, 0), "fp8", 256)
    needed = lay.request_bytes(30000, MNBT)
    assert needed == written_out_request_bytes(30000)
    assert f"{needed / GIB:.2f}" == f"{logged['needed_kv_cache_gib']:.2f}"  # format_gib


def test_estimated_max_model_len_reproduces_the_log(logged):
    """The log prints 5.44 GiB rounded: every available size that prints 5.44 and holds
    13528 tokens (and not 13529) gives the logged estimate; just below, the estimate drops."""
    lay = v4_layout(FLASH, (0, 22, 0), "fp8", 256)
    want = logged["estimated_max_model_len"]
    low = written_out_request_bytes(want)
    high = written_out_request_bytes(want + 1) - 1
    assert low < high
    for available in (low, (low + high) // 2, high):
        assert f"{available / GIB:.2f}" == f"{logged['available_kv_cache_gib']:.2f}"
        assert lay.longest_fitting_len(available, 30000, MNBT) == want
        message = lay.refusal(available, 30000, MNBT)
        assert f"estimated maximum model length is {want}." in message
        assert f"({logged['needed_kv_cache_gib']:.2f} GiB KV cache is needed" in message
    assert lay.longest_fitting_len(low - 1, 30000, MNBT) < want


def test_mtp_layer_adds_no_group_and_no_bytes():
    """The MTP layer (layer index 43 >= num_hidden_layers: compress ratio 1, nvidia/model.py:
    701-704) brings one more SWA cache: 44 SWA layers split in cdiv(44, 22) = 2 groups of 22;
    the tuple count stays 22, so one request needs the same bytes (kv_cache_utils.py:1525)."""
    plain = v4_layout(FLASH, (0, 22, 0))
    mtp = v4_layout(V4Attention(compress_ratios=FLASH_RATIOS, mtp_layers=1), (0, 22, 0))
    assert len(mtp.groups) == len(plain.groups)
    assert [len(g.pages) for g in mtp.groups][1:3] == [22, 22]
    assert mtp.request_bytes(30000, MNBT) == plain.request_bytes(30000, MNBT)


def test_block_divisor_by_release():
    """0.20.0 - 0.22.1: available // (tuple bytes x 22) (kv_cache_utils.py:1218); from 0.23.0
    (_bucket_layers_by_page_size) available // sum of page x its most slots in any group:
    37440 x 22 (the SWA group of 22) + 8640 x 21 + 1728 x 20."""
    assert v4_layout(FLASH, (0, 22, 1)).block_bytes() == (37440 + 8640 + 1728) * 22
    assert v4_layout(FLASH, (0, 23, 0)).block_bytes() == 37440 * 22 + 8640 * 21 + 1728 * 20


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"version": (0, 19, 0)}, "'version'"),
        ({"version": (0, 34, 0)}, "'version'"),
        ({"kv_cache_dtype": "auto"}, "'kv_cache_dtype'"),
        ({"kv_cache_dtype": "bf16"}, "'kv_cache_dtype'"),
        ({"block_size": 128}, "'block_size'"),
        ({"pp": 2}, "'pipeline_parallel_size'"),
        ({"dcp": 2}, "'decode_context_parallel_size'"),
        ({"hybrid": False}, "'hybrid'"),
    ],
)
def test_refusals_name_the_setting(kwargs, field):
    with pytest.raises(ValueError, match=field):
        v4_layout(FLASH, **kwargs)


def test_refusals_of_config_fields():
    with pytest.raises(ValueError, match="'head_dim'"):
        v4_layout(V4Attention(compress_ratios=FLASH_RATIOS, head_dim=576))
    with pytest.raises(ValueError, match="'compress_ratios'"):
        v4_layout(V4Attention(compress_ratios=(0, 8, 4)))
    with pytest.raises(ValueError, match="'compress_ratios'"):
        v4_layout(V4Attention(compress_ratios=(0, 0)))
