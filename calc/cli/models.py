"""`kvcalc presets` and `kvcalc show`: what the shipped models are, and one model in full.

Registered by calc.cli.main; helpers (tables, JSON) from calc.cli.output.
"""

from __future__ import annotations

from calc.cli.output import emit_json, print_pairs, print_table, wrap


def cmd_presets(args) -> int:
    from calc.params import active_param_count, param_count
    from calc.presets import list_presets, load_preset
    from calc.units import group, human_count

    specs = [load_preset(name) for name in list_presets()]
    if args.json:
        emit_json([_preset_summary(s, param_count(s), active_param_count(s)) for s in specs])
        return 0
    rows = []
    for s in specs:
        total, active = param_count(s), active_param_count(s)
        params = human_count(total) + (f" ({human_count(active)} active)" if s.is_moe else "")
        heads = f"{s.attention_kind} {s.num_attention_heads}/{s.n_kv_heads}"
        rows.append(
            (
                s.name,
                s.family,
                params,
                heads,
                s.head_dim,
                s.num_hidden_layers,
                group(s.max_position_embeddings),
            )
        )
    print_table(
        rows,
        (
            "name",
            "family",
            "params",
            "attention (query/KV heads)",
            "head_dim",
            "layers",
            "context (tokens)",
        ),
    )
    print(f"\n{len(specs)} presets; params counted by kvcalc (B = 10^9). `kvcalc show NAME`.")
    return 0


def _preset_summary(s, total: int, active: int) -> dict:
    return {
        "name": s.name,
        "display_name": s.label,
        "family": s.family,
        "params": total,
        "active_params": active,
        "attention_kind": s.attention_kind,
        "num_attention_heads": s.num_attention_heads,
        "num_key_value_heads": s.n_kv_heads,
        "head_dim": s.head_dim,
        "num_hidden_layers": s.num_hidden_layers,
        "max_position_embeddings": s.max_position_embeddings,
    }


def cmd_show(args) -> int:
    from calc.cli.stored import print_stored, stored_summary
    from calc.presets import resolve_model
    from calc.reports import params_report
    from calc.units import fmt_params, group, percent

    spec = resolve_model(args.model)
    rep = params_report(spec)
    if args.json:
        emit_json(
            {
                "spec": spec.model_dump(mode="json", by_alias=True),
                "params": rep.model_dump(),
                "stored_weights": stored_summary(spec),
            }
        )
        return 0
    print(f"{spec.label} ({spec.name}), family {spec.family}")
    print_pairs(_spec_rows(spec))
    print("\nsources" + (f" (retrieved {spec.retrieved})" if spec.retrieved else ""))
    for url in spec.source or ("(none given)",):
        print(f"  {url}")
    if spec.notes:
        print("\nnotes")
        print(wrap(spec.notes, indent=2))
    print("\nparameters by component")
    rows = [
        (k, group(v), percent(v / rep.total if rep.total else 0.0))
        for k, v in rep.breakdown.items()
    ]
    print_table(rows, ("component", "params", "share"), indent=2)
    totals = [("total", fmt_params(rep.total)), ("non-embedding", fmt_params(rep.non_embedding))]
    if spec.is_moe:
        totals.append(
            (
                f"active per token ({spec.num_experts_per_tok} of "
                f"{spec.num_local_experts} experts)",
                fmt_params(rep.active_per_token),
            )
        )
    totals.append(("published", rep.published or "-"))
    print()
    print_pairs(totals)
    print_stored(spec)
    return 0


def _spec_rows(s) -> list[tuple[str, str]]:
    H, G, d = s.num_attention_heads, s.n_kv_heads, s.head_dim
    derived = s.hidden_size // H
    rows = [
        ("num_hidden_layers", f"{s.num_hidden_layers}"),
        ("hidden_size", f"{s.hidden_size:,}"),
        ("num_attention_heads", f"{H} query heads"),
        (
            "num_key_value_heads",
            "MLA: one latent per token, shared by every head"
            if s.is_mla
            else "1 KV head, read as both K and V (DeepSeek-V4 shared-KV MQA)"
            if s.is_v4
            else f"{G} KV head{'s' if G > 1 else ''}: {s.attention_kind}, {s.kv_groups} query heads per KV head",
        ),
        ("head_dim", _head_dim_text(s, d, derived)),
        ("intermediate_size", _widths_text(s)),
        ("vocab_size", f"{s.vocab_size:,}"),
        ("max_position_embeddings", f"{s.max_position_embeddings:,} tokens"),
        ("mlp", f"{s.mlp_kind} ({s.hidden_act})"),
        (
            "norm",
            f"{s.norm_kind}, {s.norms_per_block} per block" + (" + final" if s.final_norm else ""),
        ),
        ("position_embedding", s.position_embedding),
        ("block_kind", s.block_kind),
        ("tie_word_embeddings", str(s.tie_word_embeddings).lower()),
        (
            "biases",
            ", ".join(
                n
                for n, on in (
                    ("qkv", s.qkv_bias),
                    ("attn out", s.attn_out_bias),
                    ("mlp", s.mlp_bias),
                )
                if on
            )
            or "none",
        ),
    ]
    if s.sliding_window is not None:
        rows.append(
            (
                "sliding_window",
                f"{s.sliding_window:,} tokens on "
                f"{s.num_hidden_layers if s.is_v4 else s.n_sliding_layers} of "
                f"{s.num_hidden_layers} layers",
            )
        )
    if s.attention_chunk_size is not None:
        rows.append(("attention_chunk_size", f"{s.attention_chunk_size:,} tokens"))
    rows.append(("layers", _layers_text(s)))
    if "linear_attention" in s.attention_counts:
        rows.append(
            (
                "linear attention",
                f"Gated DeltaNet: {s.linear_num_key_heads} key heads x {s.linear_key_head_dim}, "
                f"{s.linear_num_value_heads} value heads x {s.linear_value_head_dim}, "
                f"conv kernel {s.linear_conv_kernel_dim}",
            )
        )
    if "mamba" in s.attention_counts:
        rows.append(
            (
                "Mamba-2",
                f"{s.mamba_num_heads} heads x {s.mamba_head_dim}, state {s.ssm_state_size}, "
                f"{s.n_groups} groups, conv kernel {s.conv_kernel}"
                + (f", SSM state in {s.mamba_ssm_cache_dtype}" if s.mamba_ssm_cache_dtype else ""),
            )
        )
    if s.is_v4:
        rows.append(("compressed attention", _v4_text(s)))
    if s.is_moe:
        shared = " + shared" if s.shared_expert_intermediate_size else ""
        rows.append(
            ("experts", f"{s.num_experts_per_tok} of {s.num_local_experts} per token{shared}")
        )
    extras = [
        n
        for n, on in (
            (f"q/k norm ({s.qk_norm})", s.qk_norm != "none"),
            ("attention sinks", s.attention_sinks),
            ("output gate", s.attn_output_gate),
            ("router bias", s.router_bias),
            (f"{s.num_nextn_predict_layers} MTP layer(s), counted", s.include_mtp),
            (
                f"{s.num_nextn_predict_layers} MTP layer(s), not counted",
                s.num_nextn_predict_layers and not s.include_mtp,
            ),
        )
        if on
    ]
    if extras:
        rows.append(("also", ", ".join(extras)))
    return rows


def _v4_text(s) -> str:
    parts = []
    if "compressed_sparse_attention" in s.attention_counts:
        parts.append(
            f"CSA: an entry per {s.compress_rate_csa} tokens, indexer {s.index_n_heads} heads x "
            f"{s.index_head_dim} picks {s.index_topk}"
        )
    if "heavily_compressed_attention" in s.attention_counts:
        parts.append(f"HCA: an entry per {s.compress_rate_hca} tokens, all attended")
    parts.append(f"{s.hc_mult} hyper-connection streams")
    return "; ".join(parts)


def _head_dim_text(s, d: int, derived: int) -> str:
    if s.is_v4:
        return (
            f"{d} ({s.qk_rope_head_dim} rope); q_lora_rank {s.q_lora_rank}; output "
            f"{s.o_groups} groups x o_lora_rank {s.o_lora_rank}"
        )
    if s.is_mla:
        return (
            f"MLA: q/k {s.qk_head_dim} ({s.qk_nope_head_dim} nope + {s.qk_rope_head_dim} rope), "
            f"v {s.v_head_dim}; latent kv_lora_rank {s.kv_lora_rank}, q_lora_rank "
            f"{s.q_lora_rank or 'none'}"
        )
    return f"{d}" + (f" (not hidden_size / heads = {derived})" if d != derived else "")


def _widths_text(s) -> str:
    if not s.is_moe:
        return f"{s.intermediate_size:,}"
    out = f"{s.expert_intermediate_size:,} per expert"
    if s.n_moe_layers < s.num_hidden_layers:
        out += f", {s.intermediate_size:,} dense"
    if s.shared_expert_intermediate_size:
        out += f", {s.shared_expert_intermediate_size:,} shared"
    return out


def _layers_text(s) -> str:
    names = {"full_attention": "full", "sliding_attention": "sliding",
             "chunked_attention": "chunked", "linear_attention": "linear",
             "indexed_attention": "indexed", "compressed_sparse_attention": "CSA",
             "heavily_compressed_attention": "HCA", "mamba": "mamba",
             "none": "none"}  # fmt: skip
    groups = ", ".join(f"{g.count} {names[g.attention]}/{g.mlp}" for g in s.layer_groups)
    return f"{groups} (attention/MLP)"
