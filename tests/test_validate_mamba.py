"""The reference Mamba-2 mixer (calc/validate/mamba2.py) and the Mamba-2 hybrids in `kvcalc
validate`: the mixer against transformers 5.x's own NemotronHMamba2Mixer (same parameter names,
same weights, same outputs), its parameters, state bytes and FLOPs against arithmetic written out
here, then the checks on both presets and the small kind models; a spec with a wrong field must
fail them.

Written-out sources: transformers 5.x models/nemotron_h/modeling_nemotron_h.py
(NemotronHMamba2Mixer.__init__: in_proj h -> intermediate + conv_dim + heads, conv1d over conv_dim
= intermediate + 2 x n_groups x ssm_state_size, dt_bias / A_log / D of heads, the gated norm's
weight of intermediate); vLLM MambaStateShapeCalculator.mamba2_state_shape (conv state
(conv_dim, conv_kernel - 1), temporal state (heads, head_dim, ssm_state_size)), as cited in
tests/test_hybrid_ssm.py.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

import calc  # noqa: E402
import calc.validate  # noqa: E402
from calc.validate import checks, kinds, reduce  # noqa: E402
from calc.validate.checks_kv import LOGIT_TOLERANCE  # noqa: E402
from calc.validate.decoder import build_decoder, numel_by_component  # noqa: E402
from calc.validate.mamba2 import Mamba2Mixer  # noqa: E402

# h 64; 8 heads x 16 (inner 128), state 12, 2 groups (conv_dim 128 + 2 x 2 x 12 = 176), kernel 4
MIXER = dict(
    name="t", num_hidden_layers=1, hidden_size=64, num_attention_heads=4, intermediate_size=64,
    vocab_size=64, layer_types=["mamba"], mamba_num_heads=8, mamba_head_dim=16,
    ssm_state_size=12, n_groups=2, conv_kernel=4, use_conv_bias=True, mamba_proj_bias=True,
)  # fmt: skip


def mixer_spec(**changes) -> calc.ModelSpec:
    return calc.ModelSpec(**dict(MIXER, **changes))


def _failed(rows) -> list[str]:
    return [r.label for r in rows if not r.passed]


# --- the module --------------------------------------------------------------------------------


def test_mixer_matches_transformers_nemotron_h_mixer():
    """Same names and shapes as NemotronHMamba2Mixer; with its weights loaded, the same output
    as transformers' PyTorch path (its chunked SSD scan: an independent implementation)."""
    mh = pytest.importorskip("transformers.models.nemotron_h.modeling_nemotron_h")
    from transformers import NemotronHConfig

    cfg = NemotronHConfig(
        hidden_size=64, mamba_num_heads=8, mamba_head_dim=16, ssm_state_size=12, n_groups=2,
        conv_kernel=4, use_bias=True, use_conv_bias=True, hybrid_override_pattern="M",
        num_hidden_layers=1, chunk_size=8, layer_norm_epsilon=1e-6, time_step_min=0.0,
    )  # fmt: skip
    torch.manual_seed(0)
    ours = Mamba2Mixer(mixer_spec()).eval()
    theirs = mh.NemotronHMamba2Mixer(cfg, layer_idx=0).eval()
    shapes = {n: tuple(p.shape) for n, p in ours.named_parameters()}
    assert shapes == {n: tuple(p.shape) for n, p in theirs.named_parameters()}
    theirs.load_state_dict(ours.state_dict())
    x = torch.randn(2, 21, 64)  # 21 tokens: over two chunks of 8 and a partial one
    with torch.no_grad():
        torch.testing.assert_close(ours(x), theirs(x), atol=1e-5, rtol=1e-4)


def test_mixer_parameters_written_out():
    spec = mixer_spec()
    h, H, P, N, G, K = 64, 8, 16, 12, 2, 4
    inner, conv_dim = H * P, H * P + 2 * G * N
    in_proj = h * (inner + conv_dim + H) + (inner + conv_dim + H)  # weight + bias (use_bias)
    conv = conv_dim * K + conv_dim  # depthwise weight + bias
    out_proj = inner * h + h
    linear = in_proj + conv + 3 * H + out_proj  # + dt_bias, A_log, D
    assert sum(p.numel() for p in Mamba2Mixer(spec).parameters()) == linear + inner  # + norm
    got = numel_by_component(build_decoder(spec, "meta"))
    assert got["attn/linear"] == linear
    assert got["norm"] == inner + 3 * h  # the gated norm; two block norms, the final norm
    assert got == calc.param_breakdown(spec)
    # no conv bias, no projection biases
    bare = mixer_spec(use_conv_bias=False, mamba_proj_bias=False)
    got = numel_by_component(build_decoder(bare, "meta"))
    assert got["attn/linear"] == h * (inner + conv_dim + H) + conv_dim * K + 3 * H + inner * h
    assert got == calc.param_breakdown(bare)


@pytest.mark.parametrize("ssm_dtype", [None, "float32"])
def test_cached_decode_reproduces_the_full_forward_and_state_bytes(ssm_dtype):
    spec = mixer_spec(mamba_ssm_cache_dtype=ssm_dtype)
    torch.manual_seed(0)
    mixer = Mamba2Mixer(spec).to(torch.bfloat16 if ssm_dtype else torch.float32).eval()
    dtype = next(mixer.parameters()).dtype
    x = torch.randn(2, 14, 64, dtype=dtype)
    with torch.no_grad():
        full = mixer(x)
        cache = mixer.new_cache(2, 14, dtype, "cpu")
        out = [mixer(x[:, :9], cache)] + [mixer(x[:, i : i + 1], cache) for i in range(9, 14)]
    tol = 2e-2 if ssm_dtype else 1e-5
    torch.testing.assert_close(torch.cat(out, dim=1), full, atol=tol, rtol=0)
    # vLLM's shapes: conv (conv_dim, K - 1) in the cache dtype, SSM (H, P, N) in its own
    conv_bytes, ssm_bytes = 2 if ssm_dtype else 4, 4
    assert cache.conv.untyped_storage().nbytes() == 2 * 176 * 3 * conv_bytes
    assert cache.ssm.untyped_storage().nbytes() == 2 * 8 * 16 * 12 * ssm_bytes
    dt = "bf16" if ssm_dtype else "fp32"
    assert calc.state_bytes_per_sequence(spec, dt) == 176 * 3 * conv_bytes + 8 * 16 * 12 * 4


def test_a_lost_state_breaks_the_cached_decode():
    """The decode check can fail: dropping the SSM state (or the conv columns) between steps
    moves the output far past the fp32 tolerance."""
    spec = mixer_spec()
    torch.manual_seed(0)
    mixer = Mamba2Mixer(spec).eval()
    x = torch.randn(2, 14, 64)
    with torch.no_grad():
        full = mixer(x)[:, -1]
        for part in ("ssm", "conv"):
            cache = mixer.new_cache(2, 14, torch.float32, "cpu")
            mixer(x[:, :9], cache)
            for i in range(9, 14):
                getattr(cache, part).zero_()
                last = mixer(x[:, i : i + 1], cache)[:, -1]
            diff = ((last - full).abs().max() / full.abs().max()).item()
            assert diff > 100 * LOGIT_TOLERANCE["fp32"], part


def test_mixer_flops_written_out():
    """FlopCounterMode sees the projections, the conv and the scan's two matmuls per step
    (dt x B^T update, C readout: 2 + 2 per state element), not the elementwise decay."""
    spec = mixer_spec()
    mixer = Mamba2Mixer(spec).to("meta")
    h, H, P, N, K = 64, 8, 16, 12, 4
    inner, conv_dim = H * P, 176
    n = 10
    x = torch.zeros(1, n, h, device="meta")
    with torch.no_grad(), FlopCounterMode(display=False) as fc:
        mixer(x)
    proj = 2 * h * (inner + conv_dim + H) + 2 * inner * h
    assert fc.get_total_flops() == n * (proj + 2 * conv_dim * K + 4 * H * P * N)
    # kvcalc's per-token count is 5 per state element (the decay too) + the conv
    assert calc.layers.KINDS["mamba"].token_flops(spec) == 5 * H * P * N + 2 * conv_dim * K


# --- the checks ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["nemotron-3-nano-30b-a3b", "granite-4.0-h-small"])
def test_presets_pass_params_flops_and_kv(name):
    spec = calc.load_preset(name)
    result = calc.validate.run(spec, "cpu", checks=["params", "flops", "kv_cache"])
    failed = [(c.label, c.predicted, c.measured) for c in result.checks if not c.passed]
    assert not failed, failed
    labels = [c.label for c in result.checks]
    assert "mamba state bytes" in " ".join(labels)
    assert all("less Mamba decay" in c.label for c in result.checks if c.check == "flops")
    total = next(c for c in result.checks if c.label == "total")
    assert total.measured == calc.param_count(spec)
    if name.startswith("nemotron"):  # MoE-only / MLP-only blocks: no cache at all
        none = next(c for c in result.checks if c.label.startswith("none (no mixer)"))
        assert none.measured == none.predicted == 0


@pytest.mark.parametrize("name", ["kind-nemotron-h", "kind-granite-h"])
def test_kind_models_pass_every_check(name):
    result = calc.validate.run(kinds.kind_spec(name), "cpu")
    assert not [c.label for c in result.checks if not c.passed]
    assert {c.check for c in result.checks} == set(calc.validate.CHECKS)


def test_bf16_cache_keeps_nemotrons_ssm_state_in_fp32():
    spec = kinds.kind_spec("kind-nemotron-h")  # mamba_ssm_cache_dtype float32
    rows = checks.check_kv(spec, spec, "cpu", "bf16", max_params=1 << 22, prefill=24, decode=4)
    assert not _failed(rows)
    state = next(r for r in rows if r.label.startswith("mamba state bytes"))
    conv, ssm = (128 + 2 * 2 * 16) * 3, 8 * 16 * 16  # 2 layers x batch 2
    assert state.measured == 2 * 2 * (2 * conv + 4 * ssm)


@pytest.mark.parametrize(
    "name, wrong, component",
    [
        ("granite-4.0-h-small", dict(ssm_state_size=129), "attn/linear"),
        ("nemotron-3-nano-30b-a3b", dict(ssm_state_size=127), "attn/linear"),
        ("nemotron-3-nano-30b-a3b", dict(n_groups=4), "attn/linear"),
        ("nemotron-3-nano-30b-a3b", dict(conv_kernel=3), "attn/linear"),
        ("granite-4.0-h-small", dict(mamba_head_dim=32, mamba_num_heads=64), "norm"),
    ],
)
def test_a_wrong_mamba_field_fails_params_and_kv(name, wrong, component):
    spec = calc.load_preset(name)
    claim = spec.replace(**wrong)
    params = _failed(checks.check_params(spec, claim))
    assert component in params and "total" in params
    kv = _failed(
        checks.check_kv(spec, claim, "cpu", "fp32", max_params=1 << 22, prefill=8, decode=2)
    )
    assert any(label.startswith("cache bytes") for label in kv)
    assert any(label.startswith("mamba state bytes") for label in kv)


def test_a_wrong_ssm_cache_dtype_fails_the_state_rows():
    spec = kinds.kind_spec("kind-nemotron-h")  # the SSM state in fp32
    claim = spec.replace(mamba_ssm_cache_dtype="bf16")
    rows = checks.check_kv(spec, claim, "cpu", "bf16", max_params=1 << 22, prefill=8, decode=2)
    assert any(label.startswith("mamba state bytes") for label in _failed(rows))
    assert not _failed(checks.check_params(spec, claim))  # a dtype changes no count


def test_a_wrong_flop_claim_fails():
    spec = kinds.kind_spec("kind-granite-h")
    rows = checks.check_flops(spec, spec.replace(ssm_state_size=25), (16,))
    assert len(_failed(rows)) == 2  # the prefill and the decode step
    assert reduce.check_depth(spec) == 4


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_cuda_tensor_split_matches_the_cache_tensors(dtype):
    """The per-tensor bytes the CUDA rows round (conv, then SSM state, per mamba layer; none for
    a mixer-less block) are the tensors the decoder allocates, here on CPU."""
    spec = kinds.kind_spec("kind-nemotron-h")
    model = build_decoder(spec, "cpu", checks.torch_dtype(dtype))
    cache = model.new_cache(2, 20)
    measured = [t.untyped_storage().nbytes() for t in cache.tensors()]
    assert checks.predicted_tensor_bytes(spec, 20, 2, dtype) == measured
    conv = 2 * (128 + 2 * 2 * 16) * 3 * (4 if dtype == "fp32" else 2)
    assert measured[:2] == [conv, 2 * 8 * 16 * 16 * 4]  # layer 0: conv, the fp32 SSM state
