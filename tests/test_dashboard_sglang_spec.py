"""The capacity page's SGLang speculative inputs (dashboard/capacity_spec.py): the plan and its
start-up lines are calc.serving's for the same settings; bad ones are one st.error naming them."""

from __future__ import annotations

from dashboard_util import errors, open_page

from calc.serving.plan import engine_plan

V3 = {"model": "deepseek-v3", "gpu": "h200", "gpus": "8", "tp": "8"}


def test_nextn_on_deepseek_v3_prints_both_pools():
    at = open_page("capacity", **V3, engine="sglang", ever="0.5.2", elen="32768", esalg="NEXTN")
    assert errors(at) == ""
    p = engine_plan("deepseek-v3", "h200", "sglang", version="0.5.2", tensor_parallel_size=8,
                    max_model_len=32768, speculative_algorithm="NEXTN")  # fmt: skip
    lines = at.code[0].value.splitlines()
    assert lines == p.log_lines
    assert sum(x.startswith("KV Cache is allocated") for x in lines) == 2
    assert "max_running_requests=48" in lines[-1]


LLAMA = {"model": "llama-3.1-8b", "gpu": "h100-sxm", "gpus": "1", "tp": "1"}


def page_matches_plan(url: dict, **settings) -> None:
    """The page at Llama-3.1-8B's `url` keys shows no error and the API's start-up lines."""
    at = open_page("capacity", **LLAMA, engine="sglang", elen="8192", **url)
    assert errors(at) == ""
    p = engine_plan("llama-3.1-8b", "h100-sxm", "sglang", max_model_len=8192, **settings)
    assert at.code[0].value.splitlines() == p.log_lines


def test_given_numbers_and_refusals():
    base = LLAMA
    page_matches_plan(
        dict(ever="0.5.3.post1", esalg="EAGLE", esteps="2", etopk="1"),
        version="0.5.3.post1", speculative_algorithm="EAGLE", speculative_num_steps=2,
        speculative_eagle_topk=1,
    )  # fmt: skip
    # topk without steps: SGLang asserts all three or none
    at = open_page(
        "capacity", **base, engine="sglang", ever="0.5.3.post1", esalg="EAGLE", etopk="2"
    )
    assert "'speculative_num_steps' is required" in errors(at)
    # 0.5.23 counts a separate draft's layers in the pool: blank, it is refused by name
    at = open_page("capacity", **base, engine="sglang", ever="0.5.23", esalg="EAGLE")
    assert "'speculative_draft_num_layers'" in errors(at) and "\n" not in errors(at)
    # ... and sizes the pool after the draft's weights: blank, refused by name
    at = open_page("capacity", **base, engine="sglang", ever="0.5.23", elen="8192",
                   esalg="EAGLE3", edlay="1")  # fmt: skip
    assert "'speculative_draft_weights_gib'" in errors(at) and "\n" not in errors(at)
    page_matches_plan(
        dict(ever="0.5.23", esalg="EAGLE3", edlay="1", edw="1.5"),
        version="0.5.23", speculative_algorithm="EAGLE3", speculative_draft_num_layers=1,
        speculative_draft_weights_gib=1.5,
    )  # fmt: skip


def test_memory_stack_shows_the_draft_weights():
    from dashboard.capacity_charts import engine_memory_chart
    from dashboard.engine_data import engine_stack_frame

    kw = dict(version="0.5.23", max_model_len=8192, speculative_algorithm="EAGLE3",
              speculative_draft_num_layers=1)  # fmt: skip
    p = engine_plan("llama-3.1-8b", "h100-sxm", "sglang", speculative_draft_weights_gib=1.5, **kw)
    df = engine_stack_frame(p)
    parts = dict(zip(df["category"], df["bytes"], strict=True))
    assert parts["draft weights"] == int(1.5 * 2**30)  # as given: SGLang's "mem usage" GB
    assert df["bytes"].sum() == p.total_memory_bytes
    engine_memory_chart(df).to_dict()
    # from a given budget the draft is not needed, and not drawn
    given = engine_plan("llama-3.1-8b", "h100-sxm", "sglang", available_kv_gib=20, **kw)
    assert "draft weights" not in set(engine_stack_frame(given)["category"])
