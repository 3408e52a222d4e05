"""The plan command's SGLang pool flags: the token pool's cap and the mamba state pool's settings
(calc.serving.cli_settings maps them to SglangConfig's fields and refuses them for vLLM)."""

from __future__ import annotations

from calc.cli.args import int_at_least


def add_sglang_pool_args(g) -> None:
    g.add_argument(
        "--max-total-tokens",
        default=None,
        metavar="N",
        help="SGLang: cap the token pool's max_total_num_tokens (0.5.10+ also 128k / 1Mi)",
    )
    g.add_argument("--max-mamba-cache-size", type=int_at_least(1), default=None, metavar="N")
    g.add_argument("--mamba-full-memory-ratio", type=float, default=None, metavar="R")
    g.add_argument("--disable-radix-cache", action="store_true", default=None)
    g.add_argument(
        "--mamba-ssm-dtype",
        choices=("float32", "bfloat16", "float16"),
        default=None,
        help="SGLang: the linear layers' temporal state (default: the release's rule)",
    )
