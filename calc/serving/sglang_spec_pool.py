"""SGLang's speculative decoding in the token pools (the rules: calc.serving.sglang_spec's
docstring): the headroom init_memory_pool adds up to 0.5.6.post2, the draft's layers the target's
cell counts from 0.5.14, and the draft worker's MLA pool line of an MTP draft."""

from __future__ import annotations

from calc.serving.defaults_sglang import release_name, sglang_version
from calc.serving.sglang_spec import (
    DRAFT_CELL_FROM,
    HEADROOM_BUFFER,
    HEADROOM_UNTIL,
    MTP_PATH_FROM,
    speculation,
)

CELL_SUM_FROM = (0, 5, 22, 0)  # cell + int(cell x D / L), was int(cell x (1 + D / L))
GIB = 2**30


def headroom_tokens(config) -> int:
    """The tokens init_memory_pool adds to the profiled count (0 without speculation)."""
    if config.speculative_algorithm is None:
        return 0
    s = speculation(config)
    if sglang_version(config.version) >= HEADROOM_UNTIL:
        return 0
    g = config.max_running_requests
    return g * s.steps * s.topk + g * s.draft_tokens + HEADROOM_BUFFER


def resolve_draft_layers(spec, config, lay, arch: str):
    """`config` with speculative_draft_num_layers resolved: as given, else the MTP layers of a
    model whose draft path SGLang sets to the model (MTP_PATH_FROM; from 0.5.23 any path-less
    MTP draft, spec_aux_hidden_state.py: "A private draft pool is sized off the TARGET config
    when path-less"); None where the draft's layers are unknown. From 0.5.14 they size the
    target's pool, so they are required there, and the pools kvcalc has not read the draft's
    share of (sliding-window, DSA indexer) are refused."""
    if config.speculative_algorithm is None:
        return config
    v = sglang_version(config.version)
    if v < DRAFT_CELL_FROM and config.speculative_draft_weights_gib is not None:
        raise ValueError(
            f"'speculative_draft_weights_gib' sizes nothing on sglang {release_name(v)}: the "
            "draft worker loads after the target's pool there (from 0.5.14 before it); got "
            f"{config.speculative_draft_weights_gib}"
        )
    d = config.speculative_draft_num_layers
    mtp = spec.num_nextn_predict_layers
    since = MTP_PATH_FROM.get(arch)
    if d is None and mtp and (since is not None and v >= since or v >= (0, 5, 23, 0)):
        d = mtp
    if d is None and config.speculative_algorithm == "NEXTN":
        d = mtp
    if v >= DRAFT_CELL_FROM:
        release = release_name(v)
        if d is None:
            raise ValueError(
                "'speculative_draft_num_layers' (the draft checkpoint's num_hidden_layers) must "
                f"be given for sglang {release}: its target pool counts the draft's layers "
                "(DefaultPoolConfigurator) and kvcalc reads no draft config.json"
            )
        if lay.sglang_swa or lay.index_bytes:
            what = "sliding-window" if lay.sglang_swa else "DSA indexer"
            raise ValueError(
                f"'speculative_algorithm' on {spec.name!r} with sglang {release}: the draft's "
                f"share of the {what} pools is not modelled yet"
            )
    if d == config.speculative_draft_num_layers:
        return config
    return config.model_copy(update={"speculative_draft_num_layers": d})


def draft_weight_bytes(config) -> int:
    """The draft worker's weights resident when the target's pool is sized (calc.serving.
    sglang_budget): 0 without speculation or up to 0.5.13 (the draft loads after the pool), from
    0.5.14 speculative_draft_weights_gib, required there: kvcalc reads no draft checkpoint."""
    if config.speculative_algorithm is None:
        return 0
    v = sglang_version(config.version)
    if v < DRAFT_CELL_FROM:
        return 0
    if config.speculative_draft_weights_gib is None:
        raise ValueError(
            "'speculative_draft_weights_gib' (the draft worker's 'Load weight end ... mem "
            f"usage', GB) must be given to derive the pool on sglang {release_name(v)}: the "
            "draft loads before the target's pool is sized and kvcalc reads no draft "
            "checkpoint (or plan from a given --available-kv-gib)"
        )
    return int(config.speculative_draft_weights_gib * GIB)


def pool_cell_bytes(cell: int, config, layers: int) -> int:
    """The cell profile_max_num_token divides by: the target's, and from 0.5.14 its draft's
    layers too ("EAGLE/STANDALONE: scale cell_size to account for draft model KV cache"):
    int(cell x (1 + D / L)) to 0.5.21, cell + int(cell x D / L) from 0.5.22; L the layers in
    `cell`."""
    d = config.speculative_draft_num_layers
    if config.speculative_algorithm is None or not d:
        return cell
    v = sglang_version(config.version)
    if v < DRAFT_CELL_FROM:
        return cell
    if v >= CELL_SUM_FROM:
        return cell + int(cell * d / layers)
    return int(cell * (1 + d / layers))


def mtp_pool_layers(config, lay) -> int:
    """The latent layers of the MTP draft's pool that kvcalc computes: the resolved draft layers
    of an MLA model's EAGLE draft (not DSA); 0 where it does not compute the draft's pool."""
    s = speculation(config)
    if s is None or s.algorithm != "EAGLE" or not lay.mla or lay.index_bytes:
        return 0
    return config.speculative_draft_num_layers or 0


def draft_pool_bytes(lay, tokens: int, page_size: int, layers: int) -> int:
    """The draft worker's MLA pool: the target's tokens, `layers` layers of the same latent
    (MLATokenToKVPool: tokens + page_size rows a layer)."""
    return (tokens + page_size) * lay.token_bytes * layers
