"""SGLang's default page size by release, GPU and architecture (calc.serving.sglang_page), the
expected values read in the PyPI wheels (server_args.py to 0.5.14, arg_groups/ from 0.5.15):
on Blackwell datacenter GPUs (10.x) the default backends trtllm_mla (DeepseekV3ForCausalLM,
0.5.3.post2 on) and trtllm_mha (gpt-oss 0.5.1 on, Llama 4 0.5.6 on, the generic MHA default
0.5.6.post1 on) take 64-token pages; the token pool then holds whole pages
(max_total_num_tokens // page x page) and page + tokens rows (the K / KV size lines)."""

from __future__ import annotations

import pytest

from calc.presets import load_preset
from calc.serving.plan import engine_plan
from calc.serving.sglang_page import kind_of, sglang_page

GIB = 2**30
B200, B300, H, SM120, A = (10, 0), (10, 3), (9, 0), (12, 0), (8, 0)
MHA64 = (
    "TensorRT-LLM MHA only supports page_size of 16, 32 or 64, changing page_size from None to 64."
)
MLA64 = "TensorRT-LLM MLA only supports page_size of 32 or 64, changing page_size from None to 64."


@pytest.mark.parametrize(
    "v, cc, kind, given, want",
    [
        ((0, 5, 3, 1), B200, "deepseek_v3", None, (1, None)),  # FlashInfer MLA before .post2
        ((0, 5, 3, 2), B200, "deepseek_v3", None, (64, MLA64)),
        ((0, 5, 23, 0), B300, "deepseek_v3", None, (64, MLA64)),  # is_sm100_supported: major 10
        ((0, 5, 23, 0), B200, "deepseek_v3", 32, (32, None)),  # 32 or 64 kept
        ((0, 5, 23, 0), B200, "deepseek_v3", 16, (64, MLA64.replace("None", "16"))),
        ((0, 5, 8, 0), B200, "kimi_k25", None, (1, None)),  # in the family's list from 0.5.9
        ((0, 5, 9, 0), B200, "kimi_k25", None, (64, MLA64)),
        ((0, 5, 23, 0), B200, "mla", None, (1, None)),  # other MLA architectures
        ((0, 5, 23, 0), H, "deepseek_v3", None, (1, None)),  # fa3 on Hopper
        ((0, 5, 1, 0), B200, "gpt_oss", None, (64, MHA64)),
        ((0, 5, 6, 0), B200, "mha", None, (1, None)),  # the generic default from 0.5.6.post1
        ((0, 5, 6, 1), B200, "mha", None, (64, MHA64)),
        ((0, 5, 17, 0), B200, "mha", 128, (128, None)),  # 128 allowed from 0.5.17
        ((0, 5, 16, 0), B200, "mha", 128, (64, MHA64.replace("None", "128"))),
        ((0, 5, 17, 0), B200, "mha", None, (64, MHA64.replace("32 or 64", "32, 64 or 128"))),
        ((0, 5, 6, 0), B200, "llama4", None, (64, MHA64)),
        ((0, 5, 23, 0), B200, "gdn", None, (1, None)),  # triton for Gated DeltaNet
        ((0, 5, 23, 0), SM120, "mha", None, (1, None)),  # flashinfer: not sm100
        ((0, 5, 23, 0), A, "mha", 16, (16, None)),
        ((0, 5, 23, 0), None, "mha", None, (1, None)),  # AMD: not read
    ],
)
def test_page_by_release_gpu_and_model(v, cc, kind, given, want):
    assert sglang_page(v, cc, kind, given) == want


@pytest.mark.parametrize(
    "v, cc, kind, message",
    [
        ((0, 5, 4, 0), B200, "gdn", "triton backend is the only supported backend on Blackwell"),
        ((0, 5, 3, 0), B200, "gdn", "triton or trtllm_mha backend are the only supported"),
        ((0, 5, 9, 0), SM120, "gdn", "triton or trtllm_mha backend are the only supported"),
        ((0, 5, 6, 1), SM120, "mha", "TRTLLM MHA backend is only supported on Blackwell GPUs"),
        ((0, 5, 2, 0), H, "llama4", "fa3, aiter, or triton is required for Llama4 model"),
        ((0, 4, 10, 0), A, "llama4", "fa3 is required for Llama4 model"),
    ],
)
def test_launches_sglang_refuses_without_a_backend(v, cc, kind, message):
    with pytest.raises(ValueError, match=message):
        sglang_page(v, cc, kind, None)
    assert sglang_page((0, 5, 10, 0), cc, kind, None)[0] in (1, 64)  # later releases start


def test_kinds_of_the_presets():
    assert kind_of(load_preset("deepseek-v3")) == "deepseek_v3"
    assert kind_of(load_preset("kimi-k2")) == "deepseek_v3"  # DeepseekV3ForCausalLM
    assert kind_of(load_preset("kimi-k2.5")) == "kimi_k25"
    assert kind_of(load_preset("deepseek-v3.2")) == "dsa"  # indexed_sglang's page
    assert kind_of(load_preset("glm-4.7-flash")) == "mla"
    assert kind_of(load_preset("gpt-oss-120b")) == "gpt_oss"
    assert kind_of(load_preset("llama-4-scout")) == "llama4"
    assert kind_of(load_preset("qwen3-next-80b-a3b")) == "gdn"
    assert kind_of(load_preset("llama-3.1-70b")) == "mha"


def test_plans_hold_whole_pages():
    # DeepSeek-V3 at tp 8 on B200s, SGLang 0.5.23, 40 GiB: one 576-wide bf16 latent a token and
    # layer, 61 layers: 70,272 B a token; 40 GiB // 70,272 = 611,191 tokens -> 611,136 in
    # whole 64-token pages; the KV buffer holds 611,136 + 64 rows
    cell = 576 * 2 * 61
    tokens = 40 * GIB // cell // 64 * 64
    p = engine_plan("deepseek-v3", "b200", "sglang", version="0.5.23", tensor_parallel_size=8,
                    available_kv_gib=40)  # fmt: skip
    assert p.gpu_kv_cache_tokens == tokens == 611136
    assert p.log_lines[0] == MLA64
    assert f"KV size: {(tokens + 64) * cell / GIB:.2f} GB" in p.log_lines[2]
    h = engine_plan("deepseek-v3", "h200", "sglang", version="0.5.23", tensor_parallel_size=8,
                    available_kv_gib=40)  # fmt: skip
    assert h.gpu_kv_cache_tokens == 40 * GIB // cell == 611191
    # Llama 3.1 70B at tp 8 on B200s, 0.5.23: trtllm_mha's 64-token pages, K size over
    # tokens + 64 rows (one KV head a rank x 128 x 80 layers x 2 B)
    k_row = 128 * 80 * 2
    t = 10 * GIB // (2 * k_row) // 64 * 64
    q = engine_plan("llama-3.1-70b", "b200", "sglang", version="0.5.23", tensor_parallel_size=8,
                    available_kv_gib=10)  # fmt: skip
    assert q.gpu_kv_cache_tokens == t
    assert f"K size: {(t + 64) * k_row / GIB:.2f} GB" in q.log_lines[2]
