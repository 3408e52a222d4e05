"""The built-in `kvcalc` commands `kv`, `attention`, `compare` and `errata` (`presets` and `show`
are in calc.cli.models; calc.cli.main registers them all).

Each command imports what it computes with inside its body, so `kvcalc kv ...` loads only the
kv modules.
"""

from __future__ import annotations

from calc.cli.output import context_note, emit_json, print_pairs, print_table, wrap


def _spec(args):
    from calc.presets import resolve_model

    return resolve_model(args.model)


def cmd_kv(args) -> int:
    from calc.dtypes import dtype_bits
    from calc.kvcache import cached_tokens
    from calc.reports import kv_cache
    from calc.units import fmt_bytes, group

    spec = _spec(args)
    rep = kv_cache(
        spec,
        args.seq,
        args.batch,
        args.dtype,
        block_size=args.block_size,
        window_tokens=args.window_tokens,
    )
    context_note(spec, args.seq)
    if args.json:
        emit_json(rep)
        return 0
    elem = f"{dtype_bits(rep.dtype) / 8:g} B"
    blocks = f", paged in blocks of {args.block_size} tokens" if args.block_size else ""
    print(
        f"{spec.label}: KV cache for {group(args.batch)} x {group(args.seq)} tokens, "
        f"{rep.dtype} ({elem} per element){blocks}"
    )
    if spec.is_mla:
        per = f"latent {spec.kv_lora_rank} + rope key {spec.qk_rope_head_dim} (MLA) x {elem}"
        if spec.index_head_dim:  # DeepSeek-V3.2: the indexer's key too
            per = per.replace(" (MLA)", f" + indexer key {spec.index_head_dim} (MLA + DSA)")
    elif spec.is_v4:
        per = f"one K = V head of {spec.head_dim} in the window x {elem}"
    else:
        per = f"2 x {spec.n_kv_heads} KV heads x {spec.head_dim} head_dim x {elem}"
    from calc.layout import NO_KV_TYPES, STATE_TYPES

    cached = spec.num_hidden_layers - sum(spec.attention_counts.get(k, 0) for k in NO_KV_TYPES)
    print_pairs(
        [
            ("K+V per token per layer", f"{per} = {fmt_bytes(rep.bytes_per_token_per_layer)}"),
            (f"K+V per token, {cached} attention layers", fmt_bytes(rep.bytes_per_token)),
            ("total", fmt_bytes(rep.total_bytes)),
        ]
    )
    print("layers")
    rows = []
    for kind, n_layers in spec.attention_counts.items():
        tokens = cached_tokens(
            spec, args.seq, kind=kind, block_size=args.block_size, window_tokens=args.window_tokens
        )
        i = spec.attention_types.index(kind)
        what = {
            "full_attention": "full-attention layers",
            "sliding_attention": f"sliding layers (window {group(spec.sliding_window or 0)})",
            "chunked_attention": f"chunked layers (chunk {group(spec.attention_chunk_size or 0)})",
            "linear_attention": "linear-attention layers (constant state)",
            "mamba": "Mamba-2 layers (constant state)",
            "none": "MLP / MoE-only blocks (no mixer)",
            "indexed_attention": f"indexed MLA layers (top-{group(spec.index_topk or 0)} keys)",
            "compressed_sparse_attention": f"CSA layers (window + 1 entry per "
            f"{spec.compress_rate_csa} tokens, top-{group(spec.index_topk or 0)})",
            "heavily_compressed_attention": f"HCA layers (window + 1 entry per "
            f"{spec.compress_rate_hca} tokens)",
        }[kind]
        held = (
            "conv + recurrent state"
            if kind in STATE_TYPES
            else "nothing"
            if kind == "none"
            else f"{group(tokens)} tokens/seq"
        )
        rate = getattr(spec, {"compressed_sparse_attention": "compress_rate_csa",
                              "heavily_compressed_attention": "compress_rate_hca"}.get(kind, "_"), None)  # fmt: skip
        if rate:  # DeepSeek-V4: the window's tokens and the compressed entries
            held = f"{group(tokens)} tokens + {group(args.seq // rate)} entries/seq"
        rows.append((f"{n_layers} {what}", held, f"{fmt_bytes(rep.layer_bytes[i])} each"))
    print_table(rows, indent=2, align="lrl")
    if {"sliding_attention", "chunked_attention"} & set(spec.attention_counts):
        print(
            f"  (a sliding / chunked layer keeps min(seq, window) tokens; window_tokens="
            f"{args.window_tokens}; transformers' caches keep window-1)"
        )
    return 0


def cmd_attention(args) -> int:
    from calc.reports import attention_cost
    from calc.units import fmt_bytes, fmt_flops, group, percent

    spec = _spec(args)
    r = attention_cost(spec, args.seq, args.batch, args.dtype)
    context_note(spec, args.seq)
    if args.json:
        emit_json(r)
        return 0
    print(
        f"{spec.label}: attention at {group(args.seq)} tokens x batch {group(args.batch)}, "
        f"{r.dtype}; 2 FLOPs per multiply-add, {spec.num_attention_heads} query heads x "
        f"head_dim {spec.qk_head_dim if spec.is_mla else spec.head_dim}"
    )
    print("FLOPs, all layers")
    print_pairs(
        [
            ("prefill QK^T+AV, full n x n", fmt_flops(r.prefill_attention_flops_full)),
            ("prefill QK^T+AV, causal", fmt_flops(r.prefill_attention_flops_causal)),
            ("decode step QK^T+AV (1 token)", fmt_flops(r.decode_attention_flops)),
            ("prefill forward (causal)", fmt_flops(r.prefill_forward_flops)),
            ("  per token", fmt_flops(r.prefill_forward_flops_per_token)),
            ("decode step forward", fmt_flops(r.decode_forward_flops)),
            ("training per token (3 x fwd)", fmt_flops(r.training_flops_per_token)),
            ("attention share of prefill", percent(r.attention_share_prefill)),
            ("attention share of a decode step", percent(r.attention_share_decode)),
        ]
    )
    print(f"memory, one layer ({r.dtype})")
    print_pairs(
        [
            (
                "score matrix, materialized",
                f"{fmt_bytes(r.score_matrix_bytes)}  (batch x "
                f"{spec.num_attention_heads} heads x n x n)",
            ),
            (
                "fused kernel, no n x n",
                f"{fmt_bytes(r.fused_attention_bytes)}  (output + fp32 "
                "log-sum-exp per row and head)",
            ),
        ]
    )
    if spec.n_sliding_layers:
        print(
            f"  ({spec.n_sliding_layers} sliding layers score at most "
            f"{group(spec.sliding_window)} keys per query)"
        )
    return 0


def cmd_compare(args) -> int:
    from calc.reports import compare_attention
    from calc.units import fmt_bytes, fmt_flops, percent

    spec = _spec(args)
    c = compare_attention(spec, args.seq, args.batch, args.dtype)
    context_note(spec, args.seq)
    if args.json:
        emit_json(c)
        return 0
    print(
        f"{spec.label}: {c.query_heads} query heads x head_dim {spec.qk_head_dim}, "
        f"{c.seq_len:,} tokens x batch {c.batch}, {c.dtype}; * = this model"
    )
    own = "this model" if any(r.variant == "this model" for r in c.rows) else spec.attention_kind
    rows = [
        (
            r.variant + (" *" if r.variant == own else ""),
            "-" if r.kv_heads is None else f"{r.kv_heads}/{c.query_heads}",
            fmt_bytes(r.kv_bytes_per_token),
            fmt_bytes(r.kv_cache_bytes),
            fmt_flops(r.prefill_attention_flops),
            fmt_flops(r.decode_attention_flops),
            percent(r.savings),
        )
        for r in c.rows
    ]
    print_table(
        rows,
        ("variant", "G/H", "KV per token", "KV cache", "prefill attn", "decode attn",
         "saving vs MHA"),
    )  # fmt: skip
    return 0


def cmd_errata(args) -> int:
    from calc.errata import check_errata
    from calc.units import plural

    rep = check_errata()
    if args.json:
        emit_json(rep)
        return 0
    rows = [(i, e.verdict, e.subject, e.claimed, e.kvcalc) for i, e in enumerate(rep.rows, 1)]
    print_table(rows, ("#", "verdict", "claim about", "the notes say", "kvcalc computes"))
    for i, e in enumerate(rep.rows, 1):
        if e.verdict == "wrong":
            print(f'\n[{i}] {e.source}: "{e.claim}"')
            print(wrap(e.explanation, indent=4))
    summary = (
        f"{rep.n_wrong} of {plural(len(rep.rows), 'claim')} from the lecture notes kvcalc grew "
        f"from {'is' if rep.n_wrong == 1 else 'are'} wrong; values recomputed from the presets "
        "(`kvcalc show MODEL` for sources). The claims, quoted with their section and line: "
        "calc/data/errata_claims.toml."
    )
    print("\n" + wrap(summary, indent=0))
    return 0
