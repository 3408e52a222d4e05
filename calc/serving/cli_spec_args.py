"""The plan command's flags for speculative decoding and the multimodal and attention-backend
settings beside it (calc.serving.cli_settings maps them to EngineConfig's fields)."""

from __future__ import annotations

from calc.cli.args import int_at_least
from calc.serving.sglang_spec import NUMBER_NAMES


def fraction(text: str) -> float:
    return float(text)


def add_speculative_args(g) -> None:
    g.add_argument(
        "--speculative-config",
        default=None,
        metavar="JSON",
        help='vLLM: \'{"method": "mtp", "num_speculative_tokens": 1}\' (mtp or ngram; the '
        "KV cache from --available-kv-gib)",
    )
    g.add_argument("--attention-backend", default=None, metavar="NAME", help="vLLM: the "
                   "target's (TRITON_ATTN, ...; an MTP drafter picks its own: its group)")  # fmt: skip
    g.add_argument(
        "--speculative-algorithm",
        default=None,
        metavar="A",
        help="SGLang 0.4.7.post1 - 0.5.23: EAGLE, EAGLE3, NEXTN or STANDALONE",
    )
    for name in NUMBER_NAMES[:-1]:
        flag = "--speculative-" + name.replace("_", "-")
        what = "SGLang" if name != "draft_num_layers" else (
            "kvcalc: the draft checkpoint's layers (SGLang 0.5.14+ counts them in the pool)"
        )  # fmt: skip
        g.add_argument(flag, type=int_at_least(1), default=None, metavar="N", help=what)
    g.add_argument(
        "--speculative-draft-weights-gib",
        type=fraction,
        default=None,
        metavar="X",
        help="kvcalc: the draft worker's 'Load weight end ... mem usage' (SGLang 0.5.14+ sizes "
        "the pool after it)",
    )
    g.add_argument(
        "--enable-multimodal",
        action="store_true",
        default=None,
        help="SGLang 0.4.6+: run Gemma 3 / Llama 4 checkpoints as multimodal (off by default)",
    )
    g.add_argument(
        "--mm-feature-transport",
        choices=("cpu", "cuda_ipc", "cuda_vmm"),
        default=None,
        help="SGLang 0.5.16+: a GPU transport reserves 1 GiB of a multimodal model's KV budget "
        "from 0.5.18",
    )
    g.add_argument(
        "--language-model-only",
        action="store_true",
        default=None,
        help="vLLM 0.17+: a vision checkpoint's language model alone (no tower, no images)",
    )
    g.add_argument(
        "--mm-encoder-tp-mode",
        choices=("weights", "data"),
        default=None,
        help="vLLM 0.10.2+: data keeps the vision tower whole on every TP rank",
    )
    g.add_argument(
        "--skip-mm-profiling",
        action="store_true",
        default=None,
        help="vLLM 0.10.1+: no dummy images in the memory profile",
    )
    g.add_argument(
        "--limit-mm-per-prompt",
        default=None,
        metavar="JSON",
        help="vLLM: items per prompt by modality, e.g. '{\"image\": 2}' (all 0: no tower)",
    )
    g.add_argument("--enable-lora", action="store_true", default=None, help="vLLM: LoRA slots")
    g.add_argument("--max-loras", type=int, default=None, metavar="N", help="vLLM (default 1)")
    g.add_argument("--max-lora-rank", type=int, default=None, metavar="R", help="vLLM (default 16)")
    g.add_argument("--fully-sharded-loras", action="store_true", default=None)
    g.add_argument(
        "--auto-max-model-len",
        action="store_true",
        default=None,
        help="vLLM 0.14+ --max-model-len -1 (auto): the longest context the KV cache fits",
    )
