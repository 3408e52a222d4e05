"""Cross-field checks of a ModelSpec's Mamba-2 mixer layers ("mamba") and mixer-less blocks
("none"); each error names the field, the constraint and the value (calc/spec_checks.py runs
them).

A mamba layer needs its five sizes; heads must split into n_groups groups (B and C are shared
per group, transformers' Mamba2 kernels and vLLM's MambaMixer2 both reshape heads by group);
the gated RMSNorm normalises groups of heads x head_dim / n_groups. A block with neither a
mixer nor an MLP is refused: no model builds one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from calc.spec import ModelSpec

MAMBA_FIELDS = ("mamba_num_heads", "mamba_head_dim", "ssm_state_size", "n_groups", "conv_kernel")


def check_ssm(s: ModelSpec) -> None:
    # sizes without mamba layers are kept, unused (as linear_* are): a one-layer copy of a
    # hybrid's attention layer (calc.params.layer_breakdown) carries them
    n = s.attention_counts.get("mamba", 0)
    if n:
        missing = [f for f in MAMBA_FIELDS if getattr(s, f) is None]
        if missing:
            raise ValueError(f"'{missing[0]}' must be set: {n} layers are mamba")
        if s.mamba_num_heads % s.n_groups:
            raise ValueError(
                f"'n_groups' must divide mamba_num_heads={s.mamba_num_heads}: got {s.n_groups}"
            )
    for (attention, mlp), count in _kinds(s).items():
        if attention == "none" and mlp == "none":
            raise ValueError(
                f"'layer_types' and 'mlp_layer_types' must not both be none for a layer: "
                f"got {count} layer(s) with neither a mixer nor an MLP"
            )


def _kinds(s: ModelSpec) -> dict[tuple[str, str], int]:
    return {(g.attention, g.mlp): g.count for g in s.layer_groups}
