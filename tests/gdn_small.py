"""A small Gated DeltaNet model for the hybrid-pool tests (tests/test_serving_sglang_hybrid.py,
tests/test_serving_sglang_requests.py): Qwen3-Next's preset cut to 3 linear + 1 full layer;
4 key heads, 8 value heads, dk 64, dv 32, kernel 4; 2 KV heads of 64."""

from calc.presets import load_preset

SMALL = load_preset("qwen3-next-80b-a3b").replace(
    num_hidden_layers=4,
    linear_num_key_heads=4,
    linear_num_value_heads=8,
    linear_key_head_dim=64,
    linear_value_head_dim=32,
    num_key_value_heads=2,
    head_dim=64,
    hidden_size=256,
    num_attention_heads=4,
)
