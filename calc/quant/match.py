"""Which modules a quantization config leaves unquantized, matched as the writing library does.

- "transformers" (bitsandbytes, fp8, mxfp4): quantizers_utils.should_convert_module, a pattern
  matches from the start of the full name up to a module boundary (as a regex), or as a suffix;
- "substring" (AutoAWQ utils/module.py exclude_layers_to_not_quantize): `key in name`;
- "fnmatch" (ModelOpt exclude_modules, as vLLM modelopt.py is_layer_excluded): shell wildcards;
- "compressed-tensors" (utils/match.py _match_name): "re:" + regex with re.match, else the exact
  module name; class targets other than "Linear" are refused (kvcalc lists Linear layers only).

>>> ignored(("lm_head", "model.layers.*.self_attn"), "transformers",
...         "model.layers.3.self_attn.q_proj")
True
>>> ignored(("mlp.gate",), "transformers", "model.layers.3.mlp.gate_proj")
False
"""

from __future__ import annotations

import functools
import re
from fnmatch import fnmatchcase

from calc.quant.config import QuantConfig, QuantScheme

# transformers' module boundary: the match ends at a "." or the end of the name
_BOUNDARY = r"(?:(?<=\.)|(?=\.|$))"


@functools.lru_cache(maxsize=4096)
def _transformers(pattern: str, name: str) -> bool:
    try:
        hit = re.match(rf"(?:{pattern}){_BOUNDARY}", name) is not None
    except re.error:
        hit = False
    return hit or name.endswith(pattern)


def _ct(target: str, name: str) -> bool:
    if target.startswith("re:"):
        return re.match(target.removeprefix("re:"), name) is not None
    return target == name


def _is_class(target: str) -> bool:
    return not target.startswith("re:") and "." not in target and target[:1].isupper()


def ignored(patterns: tuple[str, ...], style: str, name: str) -> bool:
    """Does any pattern keep module `name` (full dotted name) out of quantization?"""
    if style == "transformers":
        return any(_transformers(p, name) for p in patterns)
    if style == "substring":
        return any(p in name for p in patterns)
    if style == "fnmatch":
        return any(fnmatchcase(name, p) for p in patterns)
    return any(_ct(p, name) for p in patterns if not _is_class(p))


def scheme_for(q: QuantConfig, name: str) -> QuantScheme | None:
    """The scheme module `name` is stored under, or None if it stays in the base dtype.

    compressed-tensors: the first config group whose targets match (the Linear class, the exact
    name or a "re:" regex); other methods have one scheme for every module not ignored.
    """
    if ignored(q.ignore, q.ignore_style, name):
        return None
    if q.method != "compressed-tensors":
        return q.scheme
    for s in q.schemes:
        for t in s.targets:
            if _is_class(t):
                if t != "Linear":
                    raise ValueError(
                        f"'targets' must name Linear or modules (kvcalc lists Linear layers): "
                        f"got {t!r}"
                    )
                return s
            if _ct(t, name):
                return s
    return None
