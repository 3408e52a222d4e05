"""Small models of the layer kinds no shipped preset has yet, built as a user would: from a
config.json dict through `calc.from_hf_config`. `kvcalc validate --all` runs them after the
presets; `kvcalc validate kind-deepseek-v3` runs one.

Each keeps its family's structure (layer types, MLA ranks, Gated-DeltaNet heads, shared experts,
gates and biases) at widths a CPU measures in a second or two. The windows and chunks are short so
that the KV runs go past them.
"""

from __future__ import annotations

from calc.spec import ModelSpec

CONFIGS: dict[str, dict] = {
    # MLA with low-rank queries, a latent cache; 1 dense layer then MoE with a shared expert and
    # sigmoid routing with e_score_correction_bias (DeepSeek-V3 / Kimi K2)
    "kind-deepseek-v3": dict(
        model_type="deepseek_v3", num_hidden_layers=3, hidden_size=128, num_attention_heads=8,
        intermediate_size=256, moe_intermediate_size=64, vocab_size=512, n_routed_experts=8,
        num_experts_per_tok=2, n_shared_experts=1, first_k_dense_replace=1, n_group=1,
        topk_group=1, q_lora_rank=48, kv_lora_rank=32, qk_nope_head_dim=16, qk_rope_head_dim=8,
        v_head_dim=16,
    ),
    # DeepSeek-V3.2: kind-deepseek-v3's MLA and MoE plus the lightning indexer (4 index heads
    # of 16, a key cache of 16 per token); index_topk 32 is below check_kv's 48-token prefill, so
    # the later prefill queries and every decoded token attend to a strict subset of the keys
    "kind-deepseek-v32": dict(
        model_type="deepseek_v32", num_hidden_layers=3, hidden_size=128, num_attention_heads=8,
        intermediate_size=256, moe_intermediate_size=64, vocab_size=512, n_routed_experts=8,
        num_experts_per_tok=2, n_shared_experts=1, first_k_dense_replace=1, n_group=1,
        topk_group=1, q_lora_rank=48, kv_lora_rank=32, qk_nope_head_dim=16, qk_rope_head_dim=8,
        v_head_dim=16, index_n_heads=4, index_head_dim=16, index_topk=32,
    ),
    # MLA with a full-rank q_proj (DeepSeek-V2-Lite)
    "kind-deepseek-v2-lite": dict(
        model_type="deepseek_v2", num_hidden_layers=2, hidden_size=128, num_attention_heads=8,
        intermediate_size=256, moe_intermediate_size=64, vocab_size=512, n_routed_experts=4,
        num_experts_per_tok=2, n_shared_experts=2, first_k_dense_replace=1, q_lora_rank=None,
        kv_lora_rank=32, qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16,
    ),
    # 3 Gated-DeltaNet layers per full layer (output gate, q/k norms), MoE with a gated shared
    # expert (Qwen3-Next)
    "kind-qwen3-next": dict(
        model_type="qwen3_next", num_hidden_layers=4, hidden_size=128, num_attention_heads=4,
        num_key_value_heads=2, head_dim=32, intermediate_size=256, moe_intermediate_size=64,
        shared_expert_intermediate_size=96, vocab_size=512, num_experts=8, num_experts_per_tok=2,
        full_attention_interval=4, linear_num_key_heads=2, linear_num_value_heads=4,
        linear_key_head_dim=16, linear_value_head_dim=24, linear_conv_kernel_dim=4,
    ),
    # sliding / full alternation, attention sinks, router bias, expert biases (gpt-oss)
    "kind-gpt-oss": dict(
        model_type="gpt_oss", num_hidden_layers=2, hidden_size=128, num_attention_heads=8,
        num_key_value_heads=2, head_dim=16, intermediate_size=96, vocab_size=512,
        num_local_experts=4, num_experts_per_tok=2, sliding_window=16,
    ),
    # 3 chunked layers per full layer, MoE every other layer with a shared expert (Llama 4);
    # the chunk is longer than the first KV run, so a second run decodes past it
    "kind-llama-4": dict(
        model_type="llama4_text", num_hidden_layers=4, hidden_size=128, num_attention_heads=8,
        num_key_value_heads=2, head_dim=16, intermediate_size=64, intermediate_size_mlp=256,
        vocab_size=512, num_local_experts=4, num_experts_per_tok=1, attention_chunk_size=96,
        interleave_moe_layer_step=2,
    ),
    # Nemotron-H blocks: Mamba-2 (2 B/C groups, biased in_proj / out_proj and conv), an MLP-only
    # block, full attention, a MoE-only block ("M-M*E"); the SSM state kept in fp32
    "kind-nemotron-h": dict(
        model_type="nemotron_h", hybrid_override_pattern="M-M*E", hidden_size=128,
        num_attention_heads=4, num_key_value_heads=2, head_dim=32, intermediate_size=256,
        moe_intermediate_size=64, moe_shared_expert_intermediate_size=96, vocab_size=512,
        n_routed_experts=8, num_experts_per_tok=2, n_group=1, topk_group=1,
        mamba_num_heads=8, mamba_head_dim=16, ssm_state_size=16, n_groups=2, conv_kernel=4,
        use_bias=True, use_conv_bias=True, mamba_ssm_cache_dtype="float32",
    ),
    # Granite 4.0-H: 3 Mamba-2 layers per attention layer, one B/C group, conv kernel 3 without
    # a bias, each block with two norms and a dense shared SwiGLU (no routed experts)
    "kind-granite-h": dict(
        model_type="granitemoehybrid", num_hidden_layers=4,
        layer_types=["mamba", "mamba", "mamba", "attention"], hidden_size=128,
        num_attention_heads=4, num_key_value_heads=1, shared_intermediate_size=256,
        num_local_experts=0, vocab_size=512, mamba_n_heads=8, mamba_expand=1, mamba_d_state=24,
        mamba_n_groups=1, mamba_d_conv=3, mamba_conv_bias=False, mamba_proj_bias=False,
    ),
    # q/k norms per head, MoE in every layer, no shared expert (Qwen3-30B-A3B)
    "kind-qwen3-moe": dict(
        model_type="qwen3_moe", num_hidden_layers=2, hidden_size=128, num_attention_heads=8,
        num_key_value_heads=2, head_dim=16, intermediate_size=256, moe_intermediate_size=64,
        vocab_size=512, num_experts=8, num_experts_per_tok=2,
    ),
}  # fmt: skip


def kind_spec(name: str) -> ModelSpec:
    """One of `CONFIGS` as a spec."""
    from calc.hf import from_hf_config

    if name not in CONFIGS:
        raise ValueError(f"'name' must be one of {', '.join(CONFIGS)}: got {name!r}")
    return from_hf_config(dict(CONFIGS[name]), name=name)


def kind_specs() -> list[ModelSpec]:
    return [kind_spec(n) for n in CONFIGS]
