"""Mamba-2 mixer layers ("mamba") and mixer-less blocks ("none"): what one layer caches and
costs (calc/layers.py's questions; one home for their formulas).

A Mamba-2 layer (Nemotron-H's NemotronHMamba2Mixer, Granite 4.0-H's GraniteMoeHybridMambaLayer,
vLLM's MambaMixer2) keeps no per-token cache, only a constant state per sequence:
- conv state: the depthwise conv1d's last inputs over x, B and C: conv_dim = heads x head_dim
  + 2 x n_groups x ssm_state_size channels, conv_kernel - 1 columns (vLLM
  MambaStateShapeCalculator.mamba2_state_shape; transformers' LinearAttentionLayer keeps
  conv_kernel columns);
- SSM state: heads x head_dim x ssm_state_size.
Dtypes: vLLM and SGLang keep the conv state in the cache dtype (the model's) and the SSM state in
mamba_ssm_cache_dtype when the model sets it (Nemotron 3 Nano: float32), else the cache dtype;
transformers' torch path keeps the SSM state in float32 whatever the model's dtype (measured:
tests/test_hybrid_ssm.py) and the conv state in the model's.
FLOPs a token, recurrent form: per state element the decay multiply, the dt x B x x
multiply-add and the C readout multiply-add (5 FLOPs), plus the conv's 2 x conv_dim x kernel.
The chunked prefill scan (mamba_chunk_size) does the same work in matmuls; kvcalc counts the
recurrent form for both, as it does for Gated DeltaNet.

A "none" block (Nemotron-H's "-" MLP and "E" MoE blocks) has no mixer: no cache, no FLOPs here.
"""

from __future__ import annotations

from calc.layers import Convention, Linear


class Mamba2(Linear):
    """A Mamba-2 mixer: no per-token cache, a constant conv + SSM state per sequence."""

    name = "mamba"

    @staticmethod
    def conv_dim(spec) -> int:
        """Channels of the depthwise conv: x (heads x head_dim), B and C (n_groups x N each)."""
        return spec.mamba_num_heads * spec.mamba_head_dim + 2 * spec.n_groups * spec.ssm_state_size

    @staticmethod
    def ssm_elems(spec) -> int:
        """One sequence's SSM state: heads x head_dim x ssm_state_size."""
        return spec.mamba_num_heads * spec.mamba_head_dim * spec.ssm_state_size

    @staticmethod
    def rank_state_elems(spec, tp: int, extra_columns: int = 0) -> tuple[int, int]:
        """One TP rank's (conv, SSM) state elements in the engines: vLLM MambaStateShapeCalculator.
        mamba2_state_shape (layers/mamba/mamba_utils.py, the same from 0.10.2 to 0.33.0) and
        SGLang Mamba2StateShape.create (configs/mamba_utils.py, 0.5.7 - 0.5.23) do the same
        arithmetic: n_groups widened to tp when tp does not divide it
        (extra_groups_for_head_shards: + tp - n_groups), conv (heads x head_dim + 2 x groups x N)
        / tp x (kernel - 1), SSM heads / tp x head_dim x N. MambaMixer2 asserts that tp divides
        the heads and, unless n_groups is 1, n_groups. `extra_columns`: vLLM's conv state keeps
        conv_kernel - 1 + num_spec columns with speculative decoding (calc.serving.vllm_spec)."""
        heads, groups = spec.mamba_num_heads, spec.n_groups
        if heads % tp:
            raise ValueError(
                f"'tensor_parallel_size' must divide mamba_num_heads={heads} (MambaMixer2 "
                f"shards the heads): got {tp}"
            )
        if groups % tp:
            if groups != 1:
                raise ValueError(
                    f"'tensor_parallel_size' must divide n_groups={groups} unless n_groups is 1 "
                    f"(MambaMixer2 replicates only a single group): got {tp}"
                )
            groups = tp  # extra_groups_for_head_shards
        conv_dim = heads * spec.mamba_head_dim + 2 * groups * spec.ssm_state_size
        conv = conv_dim // tp * (spec.conv_kernel - 1 + extra_columns)
        return conv, heads // tp * spec.mamba_head_dim * spec.ssm_state_size

    def conv_elems(self, spec, convention: Convention) -> int:
        k = spec.conv_kernel
        return self.conv_dim(spec) * (k if convention == "transformers" else k - 1)

    def state_elems(self, spec, convention: Convention) -> int:
        return self.conv_elems(spec, convention) + self.ssm_elems(spec)

    def state_bits(self, spec, bits: int, convention: Convention) -> int:
        """Conv state in `bits` (the cache dtype); the SSM state in float32 for transformers,
        in mamba_ssm_cache_dtype for the engines when the model sets one, else in `bits`."""
        from calc.dtypes import dtype_bits

        if convention == "transformers":
            ssm_bits = 32
        elif spec.mamba_ssm_cache_dtype is not None:
            ssm_bits = dtype_bits(spec.mamba_ssm_cache_dtype)
        else:
            ssm_bits = bits
        return self.conv_elems(spec, convention) * bits + self.ssm_elems(spec) * ssm_bits

    def token_flops(self, spec) -> int:
        return 5 * self.ssm_elems(spec) + 2 * self.conv_dim(spec) * spec.conv_kernel


class NoMixer(Linear):
    """A block without a token mixer (an MLP or MoE only): nothing cached, no mixing FLOPs."""

    name = "none"

    def state_elems(self, spec, convention: Convention) -> int:
        return 0

    def state_bits(self, spec, bits: int, convention: Convention) -> int:
        return 0

    def token_flops(self, spec) -> int:
        return 0


SSM_KINDS = {"mamba": Mamba2(), "none": NoMixer()}
