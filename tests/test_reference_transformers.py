"""calc against the reference implementation: transformers models built from the same config.

- Parameters: numel of every named parameter of `AutoModelForCausalLM.from_config(...)` on the
  meta device, mapped onto calc's components, for every preset transformers implements. Each is
  built with one window period of layers (per-layer and layer-count arithmetic then give the
  full depth); one preset per model type is also built at full depth.
- KV cache: bytes of the key/value tensors in the cache a forward pass with use_cache=True
  returns (meta device for presets, CPU for tiny configs), against calc.kv_cache_layer_bytes.
- hypothesis: a few hundred random small configs of every model type, both checks.

Findings (transformers 5.x):
- sliding windows: `DynamicSlidingWindowLayer.update` keeps `full[:, :, -sliding_window + 1:]`,
  i.e. min(tokens, window - 1), whether the prompt is shorter than, equal to or longer than the
  window, and after every decode step: calc's `window_tokens="window-1"`. The static cache
  (`StaticSlidingWindowLayer`) allocates min(max_cache_len, window): calc's default "window"
  at seq_len = max_cache_len. (A window of 1 keeps everything: `[-0:]` slices nothing off.)
- Falcon's new decoder (40B, 180B) up to transformers 5.24 caches K and V already broadcast to
  every query head (`FalconAttention.forward`: num_kv_heads = num_heads if
  new_decoder_architecture), so its cache holds H, not G, heads: H / G = 16x calc's count for
  Falcon-40B. transformers 5.25.0 rewrote the module (modeling_falcon.py: the fused QKV viewed as
  [num_kv_heads, heads_per_kv_group + 2, head_dim], `repeat_kv` only at attention time), so its
  cache holds the G heads, calc's count. calc counts the G heads the weights define (what vLLM
  and TGI allocate); the tests assert the installed release's figure explicitly.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import calc  # noqa: E402
from calc.hf import from_hf_config, to_hf_config  # noqa: E402

transformers.logging.set_verbosity_error()  # token ids outside tiny vocabularies, etc.

RULES = [  # (parameter name pattern, calc component); first match wins
    (r"(embed_tokens|wte|word_embeddings)\.weight$", "embed"),
    (r"wpe\.weight$", "pos_embed"),
    (r"^lm_head\.weight$", "lm_head"),
    (r"(norm|\bln_\w+)\.(weight|bias)$", "norm"),  # RMSNorm / LayerNorm, final norm
    (r"\.q_proj\.", "attn/q"),
    (r"\.(k_proj|v_proj)\.", "attn/kv"),
    (r"\.(o_proj|self_attention\.dense|attn\.c_proj)\.", "attn/o"),
    (r"\.mlp\.gate\.weight$", "router"),  # Mixtral: MixtralTopKRouter.weight, E x h
    (r"\.mlp\.", "mlp"),  # gate/up/down, experts.gate_up_proj/down_proj, c_fc, dense_*
]
LAYER = re.compile(r"\.(?:layers|h)\.(\d+)\.")


def _component(name: str, p, config) -> dict[str, int]:
    """calc components of one named parameter; fused q|k|v tensors split by their shape."""
    if "query_key_value" in name:
        # Falcon: out rows are the H * head_dim query rows plus the K and V rows (grouped per
        # KV head in the new decoder, [q | k | v] otherwise; the count is the same).
        q_rows = config.num_attention_heads * (config.hidden_size // config.num_attention_heads)
        per_row = p.numel() // p.shape[0]  # hidden inputs (weight) or 1 (bias)
        return {"attn/q": q_rows * per_row, "attn/kv": (p.shape[0] - q_rows) * per_row}
    if name.endswith(("attn.c_attn.weight", "attn.c_attn.bias")):
        # GPT-2 Conv1D stores (in, out): out columns are [q | k | v], n_embd each
        per_col = p.numel() // p.shape[-1]
        return {"attn/q": config.n_embd * per_col, "attn/kv": 2 * config.n_embd * per_col}
    for pattern, comp in RULES:
        if re.search(pattern, name):
            return {comp: p.numel()}
    raise AssertionError(f"parameter {name} maps to no calc component")


def hf_breakdown(model) -> tuple[dict[str, int], list[dict[str, int]]]:
    """(components outside the blocks, one dict per block), from named_parameters().

    named_parameters() yields a tied tensor once, under its first name (the embedding).
    """
    outside = dict.fromkeys(calc.COMPONENTS, 0)
    blocks: dict[int, dict[str, int]] = {}
    for name, p in model.named_parameters():
        m = LAYER.search(name)
        into = (
            blocks.setdefault(int(m.group(1)), dict.fromkeys(calc.COMPONENTS, 0)) if m else outside
        )
        for comp, n in _component(name, p, model.config).items():
            into[comp] += n
    return outside, [blocks[i] for i in sorted(blocks)]


def full_depth(outside: dict, blocks: list[dict], n_layers: int) -> dict[str, int]:
    """Components of the model at `n_layers` blocks, given identical blocks."""
    assert all(b == blocks[0] for b in blocks), "blocks differ in shape"
    return {c: outside[c] + n_layers * blocks[0][c] for c in calc.COMPONENTS}


def build(cfg: dict, device: str = "meta", dtype=torch.bfloat16):
    config = transformers.AutoConfig.for_model(**cfg)
    # Mixtral's default grouped-mm experts need 16-byte strides, which tiny CPU shapes lack;
    # the eager loop calls nonzero(), which the meta device cannot run
    eager = cfg["model_type"] == "mixtral" and device != "meta"
    extra = {"experts_implementation": "eager"} if eager else {}
    with torch.device(device):
        return transformers.AutoModelForCausalLM.from_config(config, dtype=dtype, **extra)


def cache_layer_bytes(model, batch: int, seq_len: int, device: str = "meta") -> list[int]:
    """Bytes of K + V per layer in the cache a prefill of `seq_len` tokens returns."""
    with torch.device(device), torch.no_grad():
        ids = torch.zeros(batch, seq_len, dtype=torch.long)
        cache = model(input_ids=ids, use_cache=True).past_key_values
    return [
        layer.keys.numel() * layer.keys.element_size()
        + layer.values.numel() * layer.values.element_size()
        for layer in cache.layers
    ]


# transformers 5.25.0: Falcon's cache holds its KV heads (the module docstring)
FALCON_BROADCAST = tuple(int(x) for x in transformers.__version__.split(".")[:2]) < (5, 25)


def as_cached_by_transformers(spec: calc.ModelSpec, config) -> calc.ModelSpec:
    """The spec whose KV heads transformers' cache holds (Falcon new decoder before 5.25: all H
    heads)."""
    if config.model_type == "falcon" and config.new_decoder_architecture and FALCON_BROADCAST:
        return spec.replace(num_key_value_heads=spec.num_attention_heads)
    return spec


def with_layers(cfg: dict, n: int) -> dict:
    out = dict(cfg)
    out["n_layer" if cfg["model_type"] == "gpt2" else "num_hidden_layers"] = n
    if "layer_types" in out:
        out["layer_types"] = out["layer_types"][:n]
    return out


# --- presets ------------------------------------------------------------------------------------


def _exportable() -> list[str]:
    names = []
    for name in calc.list_presets():  # presets are added concurrently: collect at run time
        try:
            to_hf_config(calc.load_preset(name))
        except ValueError:
            continue
        names.append(name)
    return names


EXPORTABLE = _exportable()
# one per model type, built at full depth (the rest use layer arithmetic)
FULL_DEPTH = [
    "llama-2-70b",
    "mistral-7b-v0.1",
    "mixtral-8x7b",
    "qwen2-0.5b",
    "gemma-7b",
    "gemma-2-9b",
    "falcon-40b",
    "falcon-7b",
    "gpt-3-125m",
]


def test_transformers_covers_the_released_architectures():
    # Every preset except PaLM (parallel block + gated MLP + bias-less LayerNorm) has a
    # transformers implementation; this guards against presets silently skipped below.
    # Presets of today's families are built from their own config.json instead
    # (tests/test_presets_modern.py).
    from test_presets_modern import MODERN

    skipped = set(calc.list_presets()) - set(EXPORTABLE) - set(MODERN)
    assert all(calc.load_preset(n).family == "palm" for n in skipped), skipped
    assert set(FULL_DEPTH) <= set(EXPORTABLE)


@pytest.mark.parametrize("name", EXPORTABLE)
def test_preset_params_and_kv_per_component(name):
    spec = calc.load_preset(name)
    cfg = to_hf_config(spec)
    k = spec.sliding_window_pattern or 2  # one window period: sliding and global layers
    model = build(with_layers(cfg, k))
    outside, blocks = hf_breakdown(model)
    assert len(blocks) == k
    assert full_depth(outside, blocks, k) == calc.param_breakdown(spec.replace(num_hidden_layers=k))
    # the full model: non-block parameters + L identical blocks
    assert full_depth(outside, blocks, spec.num_hidden_layers) == calc.param_breakdown(spec)
    # KV cache: a prefill past the window, so sliding layers are capped
    seq = min(spec.sliding_window + 3 if spec.sliding_window else 64, spec.max_position_embeddings)
    got = cache_layer_bytes(model, 2, seq)
    want = as_cached_by_transformers(spec, model.config)
    assert got == calc.kv_cache_layer_bytes(want, seq, 2, "bf16", window_tokens="window-1")[:k]


@pytest.mark.parametrize("name", FULL_DEPTH)
def test_preset_full_depth(name):
    spec = calc.load_preset(name)
    model = build(to_hf_config(spec))
    assert sum(p.numel() for p in model.parameters()) == calc.param_count(spec)
    outside, blocks = hf_breakdown(model)
    assert full_depth(outside, blocks, len(blocks)) == calc.param_breakdown(spec)
    seq = spec.sliding_window + 5 if spec.sliding_window else 100
    got = sum(cache_layer_bytes(model, 3, seq))
    want = as_cached_by_transformers(spec, model.config)
    assert got == calc.kv_cache_bytes(want, seq, 3, "bf16", window_tokens="window-1")
    if want is not spec:  # Falcon new decoder: transformers caches H / G times calc's G heads
        G, H = spec.n_kv_heads, spec.num_attention_heads
        assert got == H // G * calc.kv_cache_bytes(spec, seq, 3, "bf16", window_tokens="window-1")


def test_falcon_40b_cache_heads_by_transformers_release():
    spec = calc.load_preset("falcon-40b")
    model = build(with_layers(to_hf_config(spec), 1))
    # one layer, batch 1, 10 tokens, bf16: K and V x 128 heads (before 5.25) or 8 x 64 dims x 2 B
    heads = 128 if FALCON_BROADCAST else 8
    assert cache_layer_bytes(model, 1, 10) == [2 * heads * 64 * 10 * 2]
    assert calc.kv_cache_layer_bytes(spec, 10, 1, "bf16")[0] == 2 * 8 * 64 * 10 * 2


# --- tiny configs on CPU: real forward passes ---------------------------------------------------


def _tiny(name: str) -> dict:
    return json.loads((Path(__file__).parent / "fixtures" / "hf" / name).read_text())


def hf_ready(cfg: dict) -> dict:
    """A config.json as transformers 5.x loads it; legacy Falcon converted as transformers'
    falcon/convert_custom_code_checkpoint.py does (n_head_kv present: new decoder)."""
    out = {k: v for k, v in cfg.items() if k == "_name_or_path" or not k.startswith("_")}
    if out["model_type"] in ("RefinedWeb", "RefinedWebModel"):
        out["model_type"] = "falcon"
        for old, new in (("n_head", "num_attention_heads"), ("n_layer", "num_hidden_layers")):
            if old in out:
                out[new] = out.pop(old)
        if "n_head_kv" in out:
            out["num_kv_heads"] = out.pop("n_head_kv")
            out["new_decoder_architecture"] = True
        else:
            out["new_decoder_architecture"] = False
    return out


def check_config(cfg: dict, batch: int, seq_len: int) -> None:
    """numel per component and KV bytes per layer: transformers vs calc, one config."""
    spec = from_hf_config(cfg)
    model = build(hf_ready(cfg), device="cpu", dtype=torch.float32)
    assert sum(p.numel() for p in model.parameters()) == calc.param_count(spec)
    outside, blocks = hf_breakdown(model)
    assert full_depth(outside, blocks, len(blocks)) == calc.param_breakdown(spec)
    got = cache_layer_bytes(model, batch, seq_len, device="cpu")
    want = as_cached_by_transformers(spec, model.config)
    assert got == calc.kv_cache_layer_bytes(want, seq_len, batch, "fp32", window_tokens="window-1")


TINY = [
    "tiny-llama.json",
    "tiny-mistral.json",
    "tiny-mixtral.json",
    "tiny-qwen2-tied.json",
    "tiny-qwen2-untied.json",
    "tiny-gemma.json",
    "tiny-gemma2.json",
    "tiny-falcon-new.json",
    "tiny-falcon-old.json",
    "tiny-refinedweb.json",
    "tiny-gpt2.json",
]


@pytest.mark.parametrize("fixture", TINY)
@pytest.mark.parametrize("seq_len", [1, 5, 6, 7, 20])
def test_tiny_fixtures_cpu(fixture, seq_len):
    check_config(_tiny(fixture), 2, seq_len)  # windows of 6 (mistral, gemma2) and 8 (qwen2)


@pytest.mark.parametrize("prompt", [2, 4, 5, 6, 9])
def test_sliding_layer_keeps_window_minus_one_tokens(prompt):
    cfg = _tiny("tiny-mistral.json")  # window 6, every layer slides
    spec = from_hf_config(cfg)
    model = build(hf_ready(cfg), device="cpu", dtype=torch.float32)
    with torch.no_grad():
        out = model(input_ids=torch.zeros(1, prompt, dtype=torch.long), use_cache=True)
        cache = out.past_key_values
        assert cache.layers[0].keys.shape[-2] == min(prompt, 6 - 1)
        for step in range(1, 4):  # decode one token at a time
            cache = model(
                input_ids=torch.zeros(1, 1, dtype=torch.long), past_key_values=cache, use_cache=True
            ).past_key_values
            tokens = prompt + step
            assert cache.layers[0].keys.shape[-2] == min(tokens, 6 - 1)
            got = sum(lay.keys.nbytes + lay.values.nbytes for lay in cache.layers)
            assert got == calc.kv_cache_bytes(spec, tokens, 1, "fp32", window_tokens="window-1")
            assert got < calc.kv_cache_bytes(spec, tokens, 1, "fp32") or tokens < 6


@pytest.mark.parametrize("max_cache_len", [3, 6, 10])
def test_static_sliding_cache_allocates_the_window(max_cache_len):
    cfg = _tiny("tiny-mistral.json")  # window 6
    spec = from_hf_config(cfg)
    model = build(hf_ready(cfg), device="cpu", dtype=torch.float32)
    cache = transformers.StaticCache(config=model.config, max_cache_len=max_cache_len)
    with torch.no_grad():
        model(input_ids=torch.zeros(1, 2, dtype=torch.long), past_key_values=cache, use_cache=True)
    got = sum(lay.keys.nbytes + lay.values.nbytes for lay in cache.layers)
    assert got == calc.kv_cache_bytes(spec, max_cache_len, 1, "fp32")  # min(len, window)


# --- hypothesis: random small configs ----------------------------------------------------------

KV_DEFAULT = {"mistral": 8, "mixtral": 8, "qwen2": 32, "gemma": 16, "gemma2": 4}
SMALL = settings(
    max_examples=40,  # x 9 model kinds = 360 configs
    deadline=None,
    derandomize=True,  # the same examples on every run (CI is deterministic)
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _maybe(draw, cfg: dict, key: str, value) -> None:
    """Set the key (2 times in 3) or leave it out, so the config class default applies."""
    if draw(st.sampled_from([True, True, False])):
        cfg[key] = value


def _pattern_types(draw, n_layers: int) -> list[str]:
    n = draw(st.integers(1, n_layers + 1))  # 1: all sliding; n > L: all sliding but no global
    if n == 1:
        return ["sliding_attention"] * n_layers
    return ["full_attention" if (i + 1) % n == 0 else "sliding_attention" for i in range(n_layers)]


@st.composite
def llama_like(draw, mt: str) -> dict:
    heads = draw(st.sampled_from([1, 2, 4, 8, 16, 32]))
    layers = draw(st.integers(1, 4))
    cfg = {
        "model_type": mt,
        "hidden_size": heads * draw(st.sampled_from([2, 4, 6])),  # even head_dim for RoPE
        "num_attention_heads": heads,
        "num_hidden_layers": layers,
        "intermediate_size": draw(st.integers(1, 24)),
        "vocab_size": draw(st.integers(8, 40)),
    }
    kv = draw(st.sampled_from([g for g in (1, 2, 4, 8) if heads % g == 0]))
    default = KV_DEFAULT.get(mt)
    if default is None or heads % default == 0:
        null_ok = mt in ("llama", "qwen2")  # the others' strict configs type it `int`
        _maybe(
            draw, cfg, "num_key_value_heads", draw(st.sampled_from([kv, None] if null_ok else [kv]))
        )
    else:
        cfg["num_key_value_heads"] = kv
    hd = draw(st.sampled_from([2, 4, 6]))
    if mt in ("gemma", "gemma2") and heads > 4:
        cfg["head_dim"] = hd  # absent would mean 256 (Gemma's default): big for no gain
    else:
        _maybe(draw, cfg, "head_dim", hd)  # Qwen2Config has no head_dim field but reads one
    _maybe(draw, cfg, "tie_word_embeddings", draw(st.booleans()))
    if mt in ("llama", "gemma", "gemma2"):
        _maybe(draw, cfg, "attention_bias", draw(st.booleans()))
    if mt == "llama":
        _maybe(draw, cfg, "mlp_bias", draw(st.booleans()))
    window = draw(st.integers(2, 8))  # a window of 1 keeps every token in transformers
    if mt in ("mistral", "mixtral"):
        _maybe(draw, cfg, "sliding_window", draw(st.sampled_from([window, None])))
    if mt == "gemma2":  # (Gemma2Model cannot run with sliding_window null: no None here)
        _maybe(draw, cfg, "sliding_window", window)
        if draw(st.booleans()):
            cfg["layer_types"] = _pattern_types(draw, layers)
    if mt == "qwen2":
        cfg["use_sliding_window"] = draw(st.booleans())
        cfg["sliding_window"] = window
        if cfg["use_sliding_window"] and draw(st.booleans()):
            cfg["layer_types"] = _pattern_types(draw, layers)
        else:
            cfg["max_window_layers"] = draw(st.sampled_from([0, layers, layers + 3]))
    if mt == "mixtral":
        experts = draw(st.integers(2, 4))
        cfg["num_local_experts"] = experts
        cfg["num_experts_per_tok"] = draw(st.integers(1, experts))
    return cfg


@st.composite
def falcon(draw, legacy: bool = False) -> dict:
    heads = draw(st.sampled_from([1, 2, 4, 8]))
    new = draw(st.booleans())
    cfg = {
        "model_type": "falcon",
        "hidden_size": heads * draw(st.sampled_from([2, 4, 6])),
        "num_attention_heads": heads,
        "num_hidden_layers": draw(st.integers(1, 3)),
        "vocab_size": draw(st.integers(8, 40)),
    }
    if new:
        cfg["new_decoder_architecture"] = True
        kv = draw(st.sampled_from([g for g in (1, 2, 4, 8) if heads % g == 0]))
        _maybe(draw, cfg, "num_kv_heads", kv)
        _maybe(draw, cfg, "num_ln_in_parallel_attn", draw(st.sampled_from([1, 2])))
    else:
        _maybe(draw, cfg, "multi_query", draw(st.booleans()))
        _maybe(draw, cfg, "parallel_attn", draw(st.booleans()))
    _maybe(draw, cfg, "bias", draw(st.booleans()))
    _maybe(draw, cfg, "alibi", draw(st.booleans()))
    _maybe(draw, cfg, "ffn_hidden_size", draw(st.integers(1, 24)))
    _maybe(draw, cfg, "tie_word_embeddings", draw(st.booleans()))
    if legacy:  # tiiuae's remote-code names; the new decoder is told by n_head_kv
        cfg["model_type"] = "RefinedWeb" if new else "RefinedWebModel"
        cfg["n_head"] = cfg.pop("num_attention_heads")
        cfg["n_layer"] = cfg.pop("num_hidden_layers")
        cfg.pop("new_decoder_architecture", None)
        if new:
            cfg["n_head_kv"] = cfg.pop("num_kv_heads", cfg["n_head"])
    return cfg


@st.composite
def gpt2(draw) -> dict:
    heads = draw(st.sampled_from([1, 2, 4]))
    cfg = {
        "model_type": "gpt2",
        "n_embd": heads * draw(st.sampled_from([2, 4, 6])),
        "n_head": heads,
        "n_layer": draw(st.integers(1, 3)),
        "vocab_size": draw(st.integers(8, 40)),
    }
    _maybe(draw, cfg, "n_positions", draw(st.integers(12, 30)))
    _maybe(draw, cfg, "n_inner", draw(st.sampled_from([None, draw(st.integers(1, 24))])))
    _maybe(draw, cfg, "tie_word_embeddings", draw(st.booleans()))
    return cfg


STRATEGIES = {
    **{mt: llama_like(mt) for mt in ("llama", "mistral", "mixtral", "qwen2", "gemma", "gemma2")},
    "falcon": falcon(),
    "falcon-legacy": falcon(legacy=True),
    "gpt2": gpt2(),
}


@pytest.mark.parametrize("kind", sorted(STRATEGIES))
def test_random_configs_match_transformers(kind):
    @SMALL
    @given(cfg=STRATEGIES[kind], batch=st.integers(1, 2), seq_len=st.integers(1, 12))
    def check(cfg, batch, seq_len):
        check_config(cfg, batch, seq_len)

    check()
