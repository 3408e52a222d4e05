"""SGLang's --max-total-tokens (ServerArgs.max_total_tokens): a user cap on the token pool's
max_total_num_tokens, by release (read in the pypi.org sglang wheels 0.4.0 - 0.5.23:
sglang/srt/model_executor/model_runner.py init_memory_pool to 0.5.6.post2, model_runner_kv_cache
_mixin.py from 0.5.7, model_executor/pool_configurator.py from 0.5.11, mem_cache/kv_cache_
configurator.py from 0.5.16). With T' the count profile_max_num_token returns (rest // cell) and
C the cap:

- 0.4.0 - 0.4.1.post3: min(T', C) right after the profile, the warning below when C > T'; the
  request pool's E (calc.serving.sglang_requests) is then taken from the capped count. No page
  rounding (no --page-size before 0.4.4).
- 0.4.1.post4 - 0.5.9: E from the uncapped T' first; speculative decoding's headroom is added
  (up to 0.5.6.post2: calc.serving.sglang_spec_pool.headroom_tokens); the cap compares with
  T' + headroom, unrounded; then // page_size x page_size, the pipeline ranks' minimum and the
  sliding-window split of the capped count (set_num_tokens_hybrid_swa).
- 0.5.10: _resolve_token_capacity: the same order (no headroom), the split after it
  (_resolve_hybrid_swa_tokens), E and T // 2 from the capped count.
- 0.5.11 - 0.5.23: the pool configurator sizes the pools first (DefaultPoolConfigurator: the count
  already page-rounded; HybridSWAPoolConfigurator: the full layers' tokens, int(rest // (F x
  n_full + r x S x n_swa)), then swa = int(full x r), both rounded, logging its "Use sliding
  window memory pool" line), _apply_token_constraints compares C with that count (the full
  layers' with a sliding pool) and, when the minimum differs, calculate_pool_sizes_from_max_tokens
  re-runs on it (page rounding again; the sliding pool int(full x r) again, logged a second
  time); max_running_requests is resolved from the result (resolve_max_num_reqs).
The warning, every release read: "max_total_tokens=C is larger than the profiled value T. Use
the profiled value instead." (logging.warning; the profiled value kept). A linear-attention
model's mamba state pool leaves the budget before the count is taken and does not change; its
cap on max_running_requests neither. A draft worker (speculative decoding) repeats the check:
up to 0.5.8 on the target's own uncapped count (the same line again, printed before the draft's
MLA pool line kvcalc computes); in 0.5.9 on its own profile, after the target's pool (not
computed); from 0.5.10 it takes the target's pool config (no check). With pipeline parallelism
each rank checks its own count; kvcalc prints the limiting rank's.
From 0.5.10 the cap also bounds the prefill CUDA graph's max tokens, whose captured sizes the
default mem_fraction_static reserves for (calc.serving.defaults_sglang_2026).
Validation: ServerArgs checks no bound (type=int; human_readable_int from 0.5.10, "128k",
"1Mi"); a cap <= 0 fails the pool with "Not enough memory" at start-up, so kvcalc refuses it by
name. Not modelled: the unified-memory SWA pool (--enable-unified-memory, hybrid_swa_token_
capacity in 0.5.23) and a pool with no attention layer (0.5.23's _zero_kv_max_tokens).
"""

from __future__ import annotations

import re
from decimal import Decimal

from calc.plan_core import minimum
from calc.serving.defaults_sglang import release_name

CAPPED_E_UNTIL = (0, 4, 1, 4)  # E from the capped count (the cap came before it)
CONFIGURATOR_FROM = (0, 5, 11, 0)  # the cap compares with the configurator's rounded count
DRAFT_REPEAT_UNTIL = (0, 5, 9, 0)  # the draft worker compares with the target's count
HUMAN_INT_FROM = (0, 5, 10, 0)  # --max-total-tokens type=human_readable_int
_SI = {"k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}
_IEC = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


def parse_max_total_tokens(value, version: tuple[int, ...]) -> int | None:
    """The cap as `version`'s argparse reads it: an int; from 0.5.10 also human_readable_int's
    SI / IEC forms ('25.6k' = 25600, '1Ki' = 1024). kvcalc refuses a value <= 0.

    >>> parse_max_total_tokens("128k", (0, 5, 23, 0))
    128000
    """
    if value is None or isinstance(value, int) and not isinstance(value, bool):
        return check_max_total_tokens(value)
    text = str(value).strip()
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|M|G|T)", text)
    if match and version >= HUMAN_INT_FROM and not (match[2] in _IEC and "." in match[1]):
        number, suffix = match.groups()
        n = int(number) * _IEC[suffix] if suffix in _IEC else int(Decimal(number) * _SI[suffix])
        return check_max_total_tokens(n)
    try:
        n = int(text)
    except ValueError:
        forms = " (or 1k / 1Ki forms)" if version >= HUMAN_INT_FROM else ""
        raise ValueError(
            f"'max_total_tokens' must be an integer{forms} for sglang {release_name(version)}: "
            f"got {value!r}"
        ) from None
    return check_max_total_tokens(n)


def check_max_total_tokens(n: int | None) -> int | None:
    if n is not None and n <= 0:
        raise ValueError(
            f"'max_total_tokens' must be positive: got {n} (SGLang checks no bound; a cap of 0 "
            "or less leaves it 'Not enough memory' at start-up)"
        )
    return n


def capped(tokens, cap: int | None, page_size: int):
    """min(tokens, cap) in whole pages (int or array); `tokens`: already page-rounded."""
    return tokens if cap is None else minimum(tokens, cap) // page_size * page_size


def e_count(v: tuple[int, ...], profiled, cap: int | None):
    """The count the request pool's E reads before 0.5.10 (sglang_requests.max_running_requests'
    `profiled`): capped up to 0.4.1.post3, else profile_max_num_token's own."""
    return capped(profiled, cap, 1) if v < CAPPED_E_UNTIL else profiled


def cap_warning(cap: int | None, seen) -> list[str]:
    """The warning when the cap exceeds `seen`, the count the release compares it with."""
    if cap is None or getattr(seen, "ndim", 0) or cap <= seen:
        return []
    return [
        f"max_total_tokens={cap} is larger than the profiled value {seen}. Use the profiled "
        "value instead."
    ]


def draft_repeats(v: tuple[int, ...]) -> bool:
    """Whether the draft worker prints the target's warning again (module docstring)."""
    return v < DRAFT_REPEAT_UNTIL
