"""Which kind of layer sits where: per-layer attention and MLP types, stored as runs.

A model is a few runs of identical layers (vLLM's KV-cache groups, in spirit): Gemma 3 27B is
"5 sliding, 1 full" ten times and 2 sliding more; DeepSeek-V3 is 3 dense-MLP layers then 58 MoE
layers. Every formula in kvcalc is one sum over `LayerGroup`s (layers of the same attention and
MLP type, wherever they sit), so a 94-layer model costs a handful of terms.

Vocabulary (Hugging Face's own, `config.layer_types` / `mlp_layer_types`):
- attention: full_attention, sliding_attention, chunked_attention (Llama 4's local chunks),
  linear_attention (Qwen3-Next's Gated DeltaNet: a constant state, no per-token cache),
  indexed_attention (DeepSeek-V3.2), compressed_sparse_attention / heavily_compressed_attention
  (DeepSeek-V4's CSA / HCA: calc/layers_v4.py), mamba (a Mamba-2 mixer: a constant conv + SSM
  state, calc/layers_ssm.py), none (no mixer: Nemotron-H's MLP-only and MoE-only blocks);
  MLA (DeepSeek) is an attention *family* (`ModelSpec.is_mla`), not a layer type;
- MLP: dense, sparse (mixture of experts), none (Nemotron-H's mixer-only blocks).

A layout is given either explicitly (`layer_types`: runs, or one name per layer) or as one
period repeated to the depth (`layer_pattern`; the last period may be cut short).

>>> expand_runs((("sliding_attention", 2), ("full_attention", 1)), 5, periodic=True)
('sliding_attention', 'sliding_attention', 'full_attention', 'sliding_attention', 'sliding_attention')
>>> compress(["dense", "dense", "sparse"])
(('dense', 2), ('sparse', 1))
"""

from __future__ import annotations

from typing import Literal, NamedTuple

AttentionType = Literal[
    "full_attention",
    "sliding_attention",
    "chunked_attention",
    "linear_attention",
    "indexed_attention",
    "compressed_sparse_attention",
    "heavily_compressed_attention",
    "mamba",
    "none",
]
MlpType = Literal["dense", "sparse", "none"]
ATTENTION_TYPES: tuple[str, ...] = (
    "full_attention",
    "sliding_attention",
    "chunked_attention",
    "linear_attention",
    "indexed_attention",  # DeepSeek-V3.2's sparse MLA with its lightning indexer (transformers' name)
    # DeepSeek-V4 (transformers' names): the sliding window plus compressed entries, one per
    # compress_rate_csa tokens picked by an indexer (CSA) / per compress_rate_hca tokens (HCA)
    "compressed_sparse_attention",
    "heavily_compressed_attention",
    "mamba",  # a Mamba-2 mixer (Nemotron-H, Granite 4.0-H; calc/layers_ssm.py)
    "none",  # no token mixer: a block that is only an MLP / MoE (Nemotron-H's "-" and "E")
)
MLP_TYPES: tuple[str, ...] = ("dense", "sparse", "none")  # none: a mixer-only block
# per-sequence constant state, no per-token cache (calc/layers.py Linear, calc/layers_ssm.py)
STATE_TYPES: tuple[str, ...] = ("linear_attention", "mamba")
# layer types that cache no tokens: the state types and the mixer-less blocks
NO_KV_TYPES: tuple[str, ...] = (*STATE_TYPES, "none")
# older / alternative names transformers configs use for the same thing
ATTENTION_ALIASES = {"attention": "full_attention", "global": "full_attention"}

Run = tuple[str, int]


class LayerGroup(NamedTuple):
    """`count` layers (anywhere in the stack) with this attention and MLP type."""

    attention: str
    mlp: str
    count: int


def compress(names) -> tuple[Run, ...]:
    """Run-length encoding of a per-layer list of names."""
    runs: list[list] = []
    for name in names:
        if runs and runs[-1][0] == name:
            runs[-1][1] += 1
        else:
            runs.append([name, 1])
    return tuple((n, c) for n, c in runs)


def normalize_runs(value: object, vocabulary: tuple[str, ...], field: str) -> object:
    """Accept runs ([name, count] pairs) or one name per layer; return runs (else leave as is,
    for pydantic to report)."""
    if value is None or not isinstance(value, list | tuple):
        return value
    if all(isinstance(v, str) for v in value):
        names = [ATTENTION_ALIASES.get(v, v) for v in value]
        bad = [v for v in names if v not in vocabulary]
        if bad:
            raise ValueError(
                f"'{field}' entries must be one of {', '.join(vocabulary)}: got {bad[0]!r}"
            )
        return compress(names)
    out = []
    for item in value:
        if not (isinstance(item, list | tuple) and len(item) == 2):
            raise ValueError(
                f"'{field}' must be a list of layer type names or of [name, count] runs: "
                f"got {item!r}"
            )
        name, count = item
        name = ATTENTION_ALIASES.get(name, name) if isinstance(name, str) else name
        if name not in vocabulary:
            raise ValueError(
                f"'{field}' entries must be one of {', '.join(vocabulary)}: got {name!r}"
            )
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            raise ValueError(f"'{field}' run counts must be positive integers: got {count!r}")
        out.append((name, count))
    return tuple(out)


def expand_runs(runs: tuple[Run, ...], n_layers: int, *, periodic: bool) -> tuple[str, ...]:
    """One name per layer: the runs as they are, or repeated (and cut) to `n_layers`."""
    period = tuple(name for name, count in runs for _ in range(count))
    if not periodic:
        return period
    reps = -(-n_layers // len(period))
    return (period * reps)[:n_layers]


def group(attention: tuple[str, ...], mlp: tuple[str, ...]) -> tuple[LayerGroup, ...]:
    """Layers of the same (attention, MLP) type, counted, in order of first appearance."""
    counts: dict[tuple[str, str], int] = {}
    for key in zip(attention, mlp, strict=True):
        counts[key] = counts.get(key, 0) + 1
    return tuple(LayerGroup(a, m, c) for (a, m), c in counts.items())


def compact(names, types_field: str, pattern_field: str, default: str | None = None) -> dict:
    """The shortest spec fields for a per-layer list: nothing when every layer is `default`,
    one period (`pattern_field`) when the list repeats, else the runs (`types_field`).

    >>> compact(["dense", "sparse"] * 3, "mlp_layer_types", "mlp_layer_pattern")
    {'mlp_layer_pattern': (('dense', 1), ('sparse', 1))}
    """
    names = list(names)
    if default is not None and all(n == default for n in names):
        return {}
    period = next(
        p for p in range(1, len(names) + 1) if names == (names[:p] * len(names))[: len(names)]
    )
    runs, period_runs = compress(names), compress(names[:period])
    if len(period_runs) < len(runs):
        return {pattern_field: period_runs}
    return {types_field: runs}
