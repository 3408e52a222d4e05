"""Parameter counts of every preset against the figure its source publishes, and against the
reference implementation (numel of the transformers model built from the official config).

Rules for a published figure (its last printed digit is the "unit"):
- ROUND: the count rounds to the figure (within half a unit);
- TRUNCATE: the source truncates: figure <= count < figure + one unit;
- REL: the figure is a nominal size class with no finer published figure; the count must lie
  within `rel_tol` of it, and the comment says why the gap exists;
- PARTS: exact embedding / non-embedding counts (Gemma papers, Table 2).
`comparable` is the part of our count the figure covers, when that is not the plain total; the
arithmetic is written out. No expected value below is copied from calc's output.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal

import pytest

import calc
from calc.spec import ModelSpec

ROUND, TRUNCATE, REL, PARTS = "round", "truncate", "rel", "parts"


@dataclass(frozen=True)
class Claim:
    figure: str  # exactly as published (== the preset's published_params)
    rule: str
    cite: str
    rel_tol: float = 0.0  # REL only
    comparable: Callable[[ModelSpec], int] = calc.param_count


def _without_norm_scales(spec: ModelSpec) -> int:
    # PaLM: one LayerNorm scale of d_model per parallel block, plus the final norm.
    return calc.param_count(spec) - (spec.num_hidden_layers + 1) * spec.hidden_size


def _less_one_table(spec: ModelSpec) -> int:
    return calc.param_count(spec) - spec.vocab_size * spec.hidden_size


GPT3 = "GPT-3 paper (arXiv 2005.14165) Table 2.1, n_params"
GPT3_LABEL = (
    "Table 2.1 n_params are size labels; the table's own shapes in the GPT-2 layout give "
    "12 L d^2 + (50257 + 2048) d, e.g. 96 x 12 x 12288^2 + 52305 x 12288 = 174.6B for '175.0B', "
    "40 x 12 x 5120^2 + 52305 x 5120 = 12.85B for '13.0B', 24 x 12 x 1024^2 + 52305 x 1024 = "
    "355.5M (+ biases, norms) for '350M'. The paper gives no finer figure."
)
LLAMA1 = (
    "LLaMA paper (arXiv 2302.13971) Table 2, which truncates: 8192-dim 80-layer 65B is "
    "80 x (4 x 8192^2 + 3 x 8192 x 22016) + 2 x 32000 x 8192 = 65.29B, printed 65.2B"
)
LLAMA2 = "Llama 2 paper (arXiv 2307.09288) Table 1"
LLAMA3 = "Meta Llama 3 model card (MODEL_CARD.md)"
LLAMA31 = "The Llama 3 Herd of Models (arXiv 2407.21783) Table 3"
SIZE_CLASS = 0.02  # nominal size label; see each entry's comment
PALM = (
    "PaLM paper (arXiv 2204.02311) Table 1. Its three figures are reproduced to the printed "
    "2 decimals when the LayerNorm scales ((L + 1) x d_model) are left out; with them 540B "
    "would print 540.36 (+2.2M)."
)
QWEN2 = "Qwen2 blog (qwenlm.github.io/blog/qwen2), model table, '# Params'"

CLAIMS: dict[str, Claim] = {
    "gpt-3-125m": Claim("125M", ROUND, GPT3),
    "gpt-3-350m": Claim("350M", REL, GPT3 + "; " + GPT3_LABEL, SIZE_CLASS),
    "gpt-3-760m": Claim("760M", ROUND, GPT3),
    "gpt-3-1.3b": Claim("1.3B", ROUND, GPT3),
    "gpt-3-2.7b": Claim("2.7B", ROUND, GPT3),
    "gpt-3-6.7b": Claim("6.7B", ROUND, GPT3),
    "gpt-3-13b": Claim("13.0B", REL, GPT3 + "; " + GPT3_LABEL, SIZE_CLASS),
    "gpt-3-175b": Claim("175.0B", REL, GPT3 + "; " + GPT3_LABEL, SIZE_CLASS),
    "llama-1-7b": Claim("6.7B", TRUNCATE, LLAMA1),
    "llama-1-13b": Claim("13.0B", TRUNCATE, LLAMA1),
    "llama-1-33b": Claim("32.5B", TRUNCATE, LLAMA1),
    "llama-1-65b": Claim("65.2B", TRUNCATE, LLAMA1),
    "llama-2-7b": Claim("7B", ROUND, LLAMA2),
    "llama-2-13b": Claim("13B", ROUND, LLAMA2),
    # "70B" is the size class: 80 x (2 x 8192^2 + 2 x 8192 x 1024 + 3 x 8192 x 28672)
    # + 2 x 32000 x 8192 = 68.98B. Meta publishes no finer figure.
    "llama-2-70b": Claim("70B", REL, LLAMA2 + "; size class, 68.98B", SIZE_CLASS),
    "llama-3-8b": Claim("8B", ROUND, LLAMA3),
    # Same shapes as Llama 2 70B with a 128256-token vocabulary: 68.45B + 2 x 128256 x 8192
    # = 70.55B, just past the half-unit of "70B". No finer figure is published.
    "llama-3-70b": Claim("70B", REL, LLAMA3 + "; size class, 70.55B", SIZE_CLASS),
    "llama-3.1-8b": Claim("8B", ROUND, LLAMA31),
    "llama-3.1-70b": Claim("70B", REL, LLAMA31 + "; size class, 70.55B", SIZE_CLASS),
    # 126 x (2 x 16384^2 + 2 x 16384 x 1024 + 3 x 16384 x 53248) + 2 x 128256 x 16384 = 405.85B
    "llama-3.1-405b": Claim("405B", REL, LLAMA31 + "; size class, 405.85B", SIZE_CLASS),
    # The blog's "7.3B" is not reproducible from the paper's Table 1 shapes, which give
    # 32 x (2 x 4096^2 + 2 x 4096 x 1024 + 3 x 4096 x 14336) + 2 x 32000 x 4096 = 7.24B
    # (also numel of MistralForCausalLM, test_reference_implementation). No finer figure.
    "mistral-7b-v0.1": Claim(
        "7.3B", REL, "mistral.ai/news/announcing-mistral-7b; 7.24B from Table 1", SIZE_CLASS
    ),
    "mixtral-8x7b": Claim("46.7B", ROUND, "mistral.ai/news/mixtral-of-experts"),
    "palm-8b": Claim("8.63B", ROUND, PALM, comparable=_without_norm_scales),
    "palm-62b": Claim("62.50B", ROUND, PALM, comparable=_without_norm_scales),
    "palm-540b": Claim("540.35B", ROUND, PALM, comparable=_without_norm_scales),
    "falcon-7b": Claim("7B", ROUND, "tiiuae/falcon-7b model card"),
    # The model card says "a 40B parameters ... model". config.json gives 60 x (8192^2 x 2 +
    # 2 x 8192 x 512 + 2 x 8192 x 32768) + 65024 x 8192 = 41.3B (tied head; 41.8B if the
    # stored lm_head tensor is counted again). No finer figure is published.
    "falcon-40b": Claim("40B", REL, "tiiuae/falcon-40b model card; size class", 0.05),
    # 80 x (14848^2 x 2 + 2 x 14848 x 512 + 2 x 14848 x 59392) + 65024 x 14848 = 178.56B.
    "falcon-180b": Claim("180B", REL, "tiiuae/falcon-180B model card; size class", SIZE_CLASS),
    "gemma-2b": Claim(
        "524,550,144 embedding + 1,981,884,416 non-embedding",
        PARTS,
        "Gemma paper (arXiv 2403.08295) Table 2",
    ),
    "gemma-7b": Claim(
        "786,825,216 embedding + 7,751,248,896 non-embedding",
        PARTS,
        "Gemma paper (arXiv 2403.08295) Table 2",
    ),
    "gemma-2-9b": Claim(
        "917,962,752 embedding + 8,324,201,984 non-embedding",
        PARTS,
        "Gemma 2 paper (arXiv 2408.00118) Table 2",
    ),
    "gemma-2-27b": Claim(
        "1,180,237,824 embedding + 26,047,480,320 non-embedding",
        PARTS,
        "Gemma 2 paper (arXiv 2408.00118) Table 2",
    ),
    "qwen2-0.5b": Claim("0.49B", ROUND, QWEN2),
    "qwen2-1.5b": Claim("1.54B", ROUND, QWEN2),
    # The blog's 7B row (7.07B total, 5.98B non-embedding) is short by exactly one
    # 152064 x 3584 table (0.545B) in both columns: config.json has tie_word_embeddings
    # false, so embed_tokens and lm_head are separate (numel of Qwen2ForCausalLM agrees,
    # test_reference_implementation). Compared: total less one table.
    "qwen2-7b": Claim("7.07B", ROUND, QWEN2 + "; one table short", comparable=_less_one_table),
    "qwen2-72b": Claim("72.71B", ROUND, QWEN2),
}


def _parse(figure: str) -> tuple[Decimal, Decimal]:
    """("540.35B") -> (540.35e9, 0.01e9): the value and one unit of its last printed digit."""
    m = re.fullmatch(r"(\d+)(?:\.(\d+))?([MBT])", figure)
    assert m, figure
    scale = Decimal(10) ** {"M": 6, "B": 9, "T": 12}[m[3]]
    decimals = len(m[2] or "")
    return Decimal(f"{m[1]}.{m[2] or 0}") * scale, scale / Decimal(10) ** decimals


def _within(rule: str, count: int, figure: str, rel_tol: float = 0.0) -> bool:
    value, unit = _parse(figure)
    if rule == ROUND:
        return abs(count - value) <= unit / 2
    if rule == TRUNCATE:
        return value <= count < value + unit
    assert rule == REL
    return abs(count - value) <= Decimal(str(rel_tol)) * value


def test_every_preset_has_a_claim():
    from test_presets_modern import MODERN  # today's families: their claims live there

    assert sorted([*CLAIMS, *MODERN]) == calc.list_presets()


def test_parse_rules():
    assert _parse("540.35B") == (Decimal("540.35e9"), Decimal("0.01e9"))
    assert _parse("125M") == (Decimal("125e6"), Decimal("1e6"))
    assert _within(ROUND, 8_634_999_999, "8.63B") and not _within(ROUND, 8_635_000_001, "8.63B")
    assert _within(TRUNCATE, 65_299_999_999, "65.2B") and not _within(
        TRUNCATE, 65_300_000_000, "65.2B"
    )
    assert _within(REL, 68_600_000_000, "70B", 0.02) and not _within(
        REL, 68_599_999_999, "70B", 0.02
    )


@pytest.mark.parametrize("name", sorted(CLAIMS))
def test_published_params(name):
    claim, spec = CLAIMS[name], calc.load_preset(name)
    assert spec.published_params == claim.figure  # the preset stores it as published
    if claim.rule == PARTS:
        embed, non_embed = (int(x.replace(",", "")) for x in re.findall(r"[\d,]+", claim.figure))
        # Non-embedding: exact (Gemma Table 2 counts every block and the final norm).
        assert calc.non_embedding_param_count(spec) == non_embed, claim.cite
        # Embedding: the papers count the padded training table of 256128 rows (Gemma 2
        # Table 1: vocab size 256128); the released config.json has vocab_size 256000.
        assert embed == 256_128 * spec.hidden_size
        assert calc.param_breakdown(spec)["embed"] == 256_000 * spec.hidden_size
        assert spec.vocab_size == 256_000 and spec.tie_word_embeddings
        return
    count = claim.comparable(spec)
    assert _within(claim.rule, count, claim.figure, claim.rel_tol), (count, claim.cite)


def test_mixtral_active_params():
    # "Mixtral has 46.7B total parameters but only uses 12.9B parameters per token"
    # (mistral.ai/news/mixtral-of-experts); the paper rounds them to 47B and 13B.
    spec = calc.load_preset("mixtral-8x7b")
    assert spec.published_active_params == "12.9B"
    assert _within(ROUND, calc.active_param_count(spec), "12.9B")
    assert _within(ROUND, calc.param_count(spec), "47B")
    assert _within(ROUND, calc.active_param_count(spec), "13B")
    # Active = total less the 6 idle SwiGLU experts of each of the 32 layers.
    idle = 32 * 6 * 3 * 4096 * 14336
    assert calc.param_count(spec) - calc.active_param_count(spec) == idle


def test_palm_8b_written_out():
    # PaLM Table 1, 8B: 32 layers, d_model 4096, 16 heads x 256, multi-query (one K and one V
    # head of 256), SwiGLU d_ff = 4 x 4096, vocabulary 256k shared in and out, no biases.
    embed = 256_000 * 4096  # 1,048,576,000 shared input/output table
    q = 4096 * (16 * 256)  # 16,777,216
    kv = 2 * 4096 * 256  # 2,097,152: one K and one V head
    o = (16 * 256) * 4096  # 16,777,216
    mlp = 3 * 4096 * 16384  # 201,326,592: gate, up, down
    norm = 4096  # one LayerNorm scale per parallel block
    per_layer = q + kv + o + mlp + norm  # 236,982,272
    total = embed + 32 * per_layer + 4096  # + final LayerNorm: 8,632,012,800
    assert calc.param_count(calc.load_preset("palm-8b")) == total
    assert _within(ROUND, total, "8.63B") and _within(ROUND, total - 33 * 4096, "8.63B")


# --- reference implementation: numel of the transformers model from config.json ------------

# Shape fields transcribed from each official config.json (the `source` of the preset); GPT-3
# has no released weights, so its row is GPT-2 (the paper's stated architecture) at the
# Table 2.1 shapes. PaLM has no reference implementation here (no released config).
L1 = dict(vocab_size=32000, max_position_embeddings=2048)  # huggyllama/llama-*
L2 = dict(vocab_size=32000, max_position_embeddings=4096)  # meta-llama/Llama-2-*-hf
L3 = dict(vocab_size=128256, max_position_embeddings=8192, num_key_value_heads=8)
L31 = dict(vocab_size=128256, max_position_embeddings=131072, num_key_value_heads=8)
MIS = dict(
    hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32
) | dict(num_key_value_heads=8, vocab_size=32000, max_position_embeddings=32768)
FAL = dict(vocab_size=65024, parallel_attn=True, bias=False)


def _llama(h, f, heads, layers, **kw):
    return dict(hidden_size=h, intermediate_size=f, num_attention_heads=heads) | dict(
        num_hidden_layers=layers, **kw
    )


def _gpt2(d, layers, heads):
    return dict(n_embd=d, n_layer=layers, n_head=heads, n_positions=2048, vocab_size=50257)


HF_CONFIGS: dict[str, tuple[str, dict]] = {
    "gpt-3-125m": ("gpt2", _gpt2(768, 12, 12)),
    "gpt-3-350m": ("gpt2", _gpt2(1024, 24, 16)),
    "gpt-3-760m": ("gpt2", _gpt2(1536, 24, 16)),
    "gpt-3-1.3b": ("gpt2", _gpt2(2048, 24, 16)),
    "gpt-3-2.7b": ("gpt2", _gpt2(2560, 32, 32)),
    "gpt-3-6.7b": ("gpt2", _gpt2(4096, 32, 32)),
    "gpt-3-13b": ("gpt2", _gpt2(5120, 40, 40)),
    "gpt-3-175b": ("gpt2", _gpt2(12288, 96, 96)),
    "llama-1-7b": ("llama", _llama(4096, 11008, 32, 32, **L1)),
    "llama-1-13b": ("llama", _llama(5120, 13824, 40, 40, **L1)),
    "llama-1-33b": ("llama", _llama(6656, 17920, 52, 60, **L1)),
    "llama-1-65b": ("llama", _llama(8192, 22016, 64, 80, **L1)),
    "llama-2-7b": ("llama", _llama(4096, 11008, 32, 32, num_key_value_heads=32, **L2)),
    "llama-2-13b": ("llama", _llama(5120, 13824, 40, 40, num_key_value_heads=40, **L2)),
    "llama-2-70b": ("llama", _llama(8192, 28672, 64, 80, num_key_value_heads=8, **L2)),
    "llama-3-8b": ("llama", _llama(4096, 14336, 32, 32, **L3)),
    "llama-3-70b": ("llama", _llama(8192, 28672, 64, 80, **L3)),
    "llama-3.1-8b": ("llama", _llama(4096, 14336, 32, 32, **L31)),
    "llama-3.1-70b": ("llama", _llama(8192, 28672, 64, 80, **L31)),
    "llama-3.1-405b": ("llama", _llama(16384, 53248, 128, 126, **L31)),
    "mistral-7b-v0.1": ("mistral", MIS | dict(sliding_window=4096)),
    "mixtral-8x7b": (
        "mixtral",
        MIS | dict(num_local_experts=8, num_experts_per_tok=2, sliding_window=None),
    ),
    "falcon-7b": (
        "falcon",
        FAL
        | dict(hidden_size=4544, num_attention_heads=71, num_hidden_layers=32)
        | dict(multi_query=True, new_decoder_architecture=False),
    ),
    "falcon-40b": (
        "falcon",
        FAL
        | dict(hidden_size=8192, num_attention_heads=128, num_kv_heads=8, num_hidden_layers=60)
        | dict(new_decoder_architecture=True),
    ),
    "falcon-180b": (
        "falcon",
        FAL
        | dict(hidden_size=14848, num_attention_heads=232, num_kv_heads=8, num_hidden_layers=80)
        | dict(new_decoder_architecture=True),
    ),
    "gemma-2b": (
        "gemma",
        _llama(2048, 16384, 8, 18, num_key_value_heads=1, head_dim=256, vocab_size=256000)
        | dict(max_position_embeddings=8192),
    ),
    "gemma-7b": (
        "gemma",
        _llama(3072, 24576, 16, 28, num_key_value_heads=16, head_dim=256, vocab_size=256000)
        | dict(max_position_embeddings=8192),
    ),
    "gemma-2-9b": (
        "gemma2",
        _llama(3584, 14336, 16, 42, num_key_value_heads=8, head_dim=256, vocab_size=256000)
        | dict(sliding_window=4096, max_position_embeddings=8192),
    ),
    "gemma-2-27b": (
        "gemma2",
        _llama(4608, 36864, 32, 46, num_key_value_heads=16, head_dim=128, vocab_size=256000)
        | dict(sliding_window=4096, max_position_embeddings=8192),
    ),
    "qwen2-0.5b": (
        "qwen2",
        _llama(896, 4864, 14, 24, num_key_value_heads=2, vocab_size=151936)
        | dict(tie_word_embeddings=True),
    ),
    "qwen2-1.5b": (
        "qwen2",
        _llama(1536, 8960, 12, 28, num_key_value_heads=2, vocab_size=151936)
        | dict(tie_word_embeddings=True),
    ),
    "qwen2-7b": (
        "qwen2",
        _llama(3584, 18944, 28, 28, num_key_value_heads=4, vocab_size=152064)
        | dict(tie_word_embeddings=False),
    ),
    "qwen2-72b": (
        "qwen2",
        _llama(8192, 29568, 64, 80, num_key_value_heads=8, vocab_size=152064)
        | dict(tie_word_embeddings=False),
    ),
}
HF_CLASSES = {  # model_type -> (config class, causal-LM class) in transformers
    "gpt2": ("GPT2Config", "GPT2LMHeadModel"),
    "llama": ("LlamaConfig", "LlamaForCausalLM"),
    "mistral": ("MistralConfig", "MistralForCausalLM"),
    "mixtral": ("MixtralConfig", "MixtralForCausalLM"),
    "falcon": ("FalconConfig", "FalconForCausalLM"),
    "gemma": ("GemmaConfig", "GemmaForCausalLM"),
    "gemma2": ("Gemma2Config", "Gemma2ForCausalLM"),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM"),
}
SPEC_FIELDS = set(ModelSpec.model_fields) | {"head_dim"}


def test_reference_configs_cover_every_released_model():
    from test_presets_modern import MODERN  # built from their own fixtures there

    expected = set(calc.list_presets()) - {"palm-8b", "palm-62b", "palm-540b"} - set(MODERN)
    assert set(HF_CONFIGS) == expected


@pytest.mark.parametrize("name", sorted(HF_CONFIGS))
def test_preset_matches_config(name):
    # Every config.json field that is also a spec field must agree with the preset.
    spec = calc.load_preset(name)
    _, cfg = HF_CONFIGS[name]
    for key in SPEC_FIELDS & set(cfg):
        assert getattr(spec, key) == cfg[key], key


@pytest.mark.parametrize("name", sorted(HF_CONFIGS))
def test_reference_implementation(name):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    model_type, cfg = HF_CONFIGS[name]
    config_cls, model_cls = (getattr(transformers, c) for c in HF_CLASSES[model_type])
    with torch.device("meta"):  # shapes only: no memory, no initialisation cost
        model = model_cls(config_cls(**cfg))
    numel = sum(p.numel() for p in model.parameters())  # tied tensors are yielded once
    assert calc.param_count(calc.load_preset(name)) == numel
