"""SGLang's server defaults by release (python/sglang/srt/server_args.py, ServerArgs.__post_init__).

Each rule is the server_args.py of the version-bump commit of python/sglang/version.py named
beside it, read in sglang's history (the kvcache-ai/sglang_awq fork, to 2025-12-11); "first in"
is the oldest bump that has the PR's commit as an ancestor. gpu_mem is nvidia-smi's memory.total
in MiB (utils.get_nvgpu_memory_capacity: the smallest GPU's), i.e. HardwareSpec.driver_total_mib.

mem_fraction_static when unset:
- v0.4.0 (f8b0326) - v0.4.7 (4f723ed): a table by tp (tp x pp from v0.4.6.post2), with the
  GPU's memory from v0.4.5.post3 (b9c87e7; sglang #5604, #5893, #5724, #6718).
- v0.4.7.post1 (f9dc9dd; sglang #7054 "Simplify the heuristics for setting
  --mem-fraction-static", 6b12d6a) - v0.5.3rc0 (86a32bb): round((gpu_mem - reserved) / gpu_mem,
  3) with reserved = (2.8 + tp x pp / 10) GiB under 35 GiB, (9.5 + tp x pp / 2) GiB under 90
  GiB, (12 + tp x pp / 2) GiB under 160 GiB, else 32 GiB; + 4 GiB with DP attention.
- v0.5.3rc2 (0b13cbb; sglang #10372 "Restruct gpu_memory_settings in a unify function" 05a3526,
  and #10975 "Use more general heuristics to set the default value of --mem-fraction-static"
  a17e70f) to v0.5.6.post2 (5c8bd8b; later releases: defaults_sglang_2026.py): ServerArgs._handle_gpu_memory_settings,
  reserved = 512 + max(chunked_prefill_size, 2048) x 1.5 + cuda_graph_max_bs x 2 + tp x pp / 8
  x 1024 MiB; with DP attention + cuda_graph_max_bs x dp x 3, and x 1.5 more when
  cuda_graph_max_bs > 300; at least 10 GiB on GPUs over 60 GiB.
Multimodal models: ModelRunner.__init__ multiplied any mem_fraction_static, given or default, by
0.95 (v0.4.0 f8b0326) and by 0.90 from v0.4.4.post4 (#4754 5cb552b) up to v0.4.8.post1
(sglang_vlm_runner_scale);
sglang #7748 (14229cc, first in v0.4.9 ec5f9c6) moved it into the default (x 0.90), and #6881
(3964b352c, 2025-07-19; #8161 made it the method adjust_mem_fraction_for_vlm; both first in
v0.4.9.post3, bump 01c000043) scales the default by the vision tower's size: 0.95 x clamp(1 - 0.1
x (L d^2 / (24 x 1024^2) - 1), 0.8, 1.05), L and d its vision_config's num_hidden_layers and
hidden_size (24 and 1024 where absent; transformers maps Qwen3.5's `depth`). Unchanged to
v0.5.23 (arg_groups/memory_hook.py; its post-capture branch needs
SGLANG_ENABLE_POST_CAPTURE_KV_SIZING, off by default in environ.py). A given fraction is not
scaled from v0.4.9 (sglang_vlm_default_scale).
DeepSeek NSA (V3.2): sglang #11061 (efbc687, first in v0.5.3rc2) set 0.8 whatever was given;
#11309 (a4b424c, first in v0.5.3.post1) removed that.
Speculative decoding (calc.serving.sglang_spec, v0.4.7.post1 - v0.5.13; 4 GiB from v0.5.10): + 2 GiB ("draft
model and larger cuda graph buffers", in every wheel of the range), STANDALONE + 6 GiB from v0.5.2 (b0d25e7), added
after the 10 GiB floor from v0.5.3rc2. Not modelled, so not accepted: the spec-dependent tp-table
rules before v0.4.7.post1 (v0.4.7: x 0.95, or a 20 GiB reserve above 96 GiB), NGRAM (+0 from
v0.5.3rc2), --enable-piecewise-cuda-graph (+ its max tokens / 4 from
v0.5.5.post1 303cc95, sglang #12996; off by default), NPUs, AMD (rocm-smi's memory, and the
aiter backend's x 0.90 / x 0.85), Ascend. The reserve reads cuda_graph_max_bs as given or by its
default even with --disable-cuda-graph (as SGLang does).

chunked_prefill_size when unset: 8192, 2048 under 25 GiB (0.4.0 - 0.4.7); from v0.4.7.post1
2048 under 35 GiB, 8192 under 160 GiB, else 16384; from v0.5.3rc2 4096 from 35 to 60 GiB.
cuda_graph_max_bs when unset (from v0.5.3rc2, sglang #10372): under 20 GiB 8; under 35 GiB 16
(24 from v0.5.4.post1 55d75e1, sglang #12124 4caca1b) below tp 4, else 80; under 60 GiB 32 /
160; under 160 GiB 256 / 512; else 512.
page_size: 1 (None, then 1 in _handle_page_size, from v0.4.9.post4; attention backends that
need 64 or 128 pages set it themselves: pass page_size). swa_full_tokens_ratio 0.8 (from
v0.4.9.post3, unchanged to v0.5.6.post2). max_running_requests: None, derived at start-up
(48 with EAGLE).
"""

from __future__ import annotations

import re
from functools import lru_cache

from calc.serving import defaults_sglang_2026 as sg26
from calc.serving.sglang_spec import reserve_mib

# versions are (major, minor, patch, n): n = post number, 0 for the release, rc - 100 for an rc
SGLANG_TP_TABLE = ((0, 4, 0), (0, 4, 7, 1))  # [from, until): the tp table (module docstring)
SGLANG_GPU_MEM_FROM = (0, 4, 5, 3)  # sglang #5604: the table on GPUs of <= 81920 MiB only
SGLANG_H200_RELAX_FROM = (0, 4, 6, 2)  # sglang #5893 (and #5724: the table by tp x pp)
SGLANG_B200_FROM = (0, 4, 7)  # sglang #6718: 0.79 on GPUs of > 180,000 MiB
SGLANG_RESERVE_FROM = (0, 4, 7, 1)  # sglang #7054 (6b12d6a), bump f9dc9dd
SGLANG_VLM_090_FROM = (0, 4, 4, 4)  # sglang #4754 (5cb552b, bump 35e0856): x 0.90, was x 0.95
SGLANG_VLM_ADJUST_FROM = (0, 4, 9, 3)  # sglang #6881 (3964b352c) / #8161, bump 01c000043
SGLANG_VLM_FROM = (0, 4, 9)  # sglang #7748 (14229cc): x 0.90 on the default only, bump ec5f9c6
SGLANG_GENERAL_FROM = (0, 5, 3, -98)  # 0.5.3rc2: sglang #10372 + #10975, bump 0b13cbb
SGLANG_NSA_08 = ((0, 5, 3, -98), (0, 5, 3, 1))  # [from, until): 0.8 for DeepSeek NSA (#11061)
SGLANG_GRAPH_BS_24_FROM = (0, 5, 4, 1)  # sglang #12124 (4caca1b), bump 55d75e1
SGLANG_NEWEST = (0, 5, 23, 0)  # v0.5.23 (after v0.5.6.post2: defaults_sglang_2026.py)
_V = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?(?:\.?post(\d+)|rc(\d+)|\.(\d+))?$")


@lru_cache(maxsize=256)  # a pure function of the string, read several times a plan
def sglang_version(text: str) -> tuple[int, int, int, int]:
    """'0.5.3rc2' -> (0, 5, 3, -98) (before 0.5.3, after 0.5.3rc0); '0.4.7.post1' -> (0, 4, 7,
    1); '0.5.6' -> (0, 5, 6, 0); a clear error otherwise."""
    m = _V.match(str(text).strip())
    if not m:
        raise ValueError(f"'version' must look like 0.5.3, 0.5.3rc2 or 0.4.7.post1: got {text!r}")
    a, b, c, post, rc, fourth = m.groups()
    n = int(post or fourth or 0) if rc is None else int(rc) - 100
    return int(a), int(b), int(c or 0), n


def release_name(v: tuple[int, ...]) -> str:
    base = ".".join(map(str, v[:3]))
    n = v[3] if len(v) > 3 else 0
    return base + (f".post{n}" if n > 0 else f"rc{n + 100}" if n < 0 else "")


def sglang_chunk_default(version: tuple[int, ...], gpu_memory_gib: float) -> int:
    """chunked_prefill_size when unset (module docstring)."""
    mib = round(gpu_memory_gib * 1024, 3)
    if version < SGLANG_RESERVE_FROM:
        return _sglang_chunk(gpu_memory_gib)
    if mib < 35 * 1024:
        return 4096 if 20 * 1024 <= mib and version >= sg26.SMALL_GPU_FROM else 2048
    if version >= SGLANG_GENERAL_FROM and mib < 60 * 1024:
        return 4096
    return 8192 if mib < 160 * 1024 else 16384


def sglang_graph_bs_default(
    version: tuple[int, ...], gpu_memory_gib: float, tp: int, max_running_requests=None
):
    """cuda_graph_max_bs when unset, where the mem_fraction_static rule reads it (v0.5.3rc2 on;
    None before: the reserve did not read it)."""
    if version < SGLANG_GENERAL_FROM:
        return None
    mib, small = round(gpu_memory_gib * 1024, 3), tp < 4
    if mib < 20 * 1024:
        bs = 8
    elif mib < 35 * 1024 and version >= sg26.SMALL_GPU_FROM:
        bs = 48 if small else 160
    elif mib < 35 * 1024:
        bs = (24 if version >= SGLANG_GRAPH_BS_24_FROM else 16) if small else 80
    elif mib < 60 * 1024:
        bs = 32 if small else 160
    else:
        bs = 256 if small and mib < 160 * 1024 else 512
    if version >= sg26.GRAPH_BS_MRR_CAP_FROM and max_running_requests is not None:
        bs = min(bs, max_running_requests)
    return bs


def sglang_mem_fraction_default(
    version: tuple[int, ...],
    tp: int,
    gpu_memory_gib: float = 80.0,
    pp: int = 1,
    *,
    dp: int = 1,
    dp_attention: bool = False,
    chunked_prefill_size: int | None = None,
    cuda_graph_max_bs: int | None = None,
    speculative_algorithm: str | None = None,
    **newer,
) -> float:
    """SGLang's mem_fraction_static when unset, as ServerArgs.__post_init__ of that release
    computes it (module docstring). chunked_prefill_size / cuda_graph_max_bs: as given, None for
    the release's default; `newer`: what releases after v0.5.6.post2 also read
    (defaults_sglang_2026.prefill_graph_extra_mib); `speculative_algorithm`: SGLang's, whose draft
    the reserve grows for (sglang_spec.reserve_mib, v0.4.7.post1 on). A clear error before v0.4.0
    and after the newest release read."""
    if not SGLANG_TP_TABLE[0] <= version <= SGLANG_NEWEST:
        raise ValueError(
            f"'mem_fraction_static' must be given for sglang {release_name(version)}: kvcalc knows the "
            f"defaults of 0.4.0 to {release_name(SGLANG_NEWEST)} only"
        )
    mem = round(gpu_memory_gib * 1024, 3)  # nvidia-smi memory.total, MiB
    if version >= SGLANG_GENERAL_FROM:  # _handle_gpu_memory_settings (0b13cbb .. 0.5.23)
        mrr = newer.pop("max_running_requests", None)
        chunk = chunked_prefill_size or sglang_chunk_default(version, gpu_memory_gib)
        bs = cuda_graph_max_bs or sglang_graph_bs_default(version, gpu_memory_gib, tp, mrr)
        reserved = 512 + max(chunk, 2048) * 1.5 + bs * 2 + tp * pp / 8 * 1024
        if dp_attention:
            reserved += bs * dp * 3
            if bs > 300:
                reserved += bs * dp * 1.5
        if version > sg26.AFTER_056:
            reserved += sg26.prefill_graph_extra_mib(
                version, chunk, pp, dp_attention=dp_attention, **newer
            )
        if mem > 60 * 1024:
            reserved = max(reserved, 10 * 1024)
        reserved += reserve_mib(speculative_algorithm, version)  # after the floor (0b13cbb on)
        return round((mem - reserved) / mem, 3)
    if version >= SGLANG_RESERVE_FROM:  # __post_init__ (f9dc9dd .. 86a32bb)
        n = tp * pp
        if mem < 35 * 1024:  # "T4, 4080" and "A10, L40, 4090, 5090": the same reserve
            reserved = (2.8 + n / 10) * 1024
        elif mem < 90 * 1024:  # "H100, A100"
            reserved = (9.5 + n / 2) * 1024
        elif mem < 160 * 1024:  # "H20", "H200"
            reserved = (12 + n / 2) * 1024
        else:  # "B200, MI300"
            reserved = 32 * 1024
        if dp_attention:
            reserved += 4 * 1024
        reserved += reserve_mib(speculative_algorithm, version)
        return round((mem - reserved) / mem, 3)
    n = tp * pp if version >= SGLANG_H200_RELAX_FROM else tp  # parallel_size from #5724
    table = next((f for at, f in ((16, 0.79), (8, 0.81), (4, 0.85), (2, 0.87)) if n >= at), 0.88)
    mem = gpu_memory_gib * 1024
    if version < SGLANG_GPU_MEM_FROM:
        return table
    if version < SGLANG_H200_RELAX_FROM:  # #5604: "(gpu_mem - 1024 * 13) / gpu_mem" above
        return table if mem <= 81920 else (mem - 1024 * 13) / mem
    frac = table if mem <= 81920 else 0.88
    if version >= SGLANG_B200_FROM and mem > 180 * 1000:
        return 0.79
    if mem > 96 * 1024:  # "15 GB + additional 3GB for cuda graph"
        return min(frac + 48 * 1024 * (1 - frac) / mem, (mem - 1024 * 18) / mem)
    return frac


def _sglang_chunk(gpu_memory_gib: float) -> int:
    """chunked_prefill_size when unset (0.4.0 - 0.4.7): 2048 on GPUs under 25 GiB, else 8192."""
    return 2048 if gpu_memory_gib < 25 else 8192


def sglang_model_checks(version, given: float | None, *, nsa: bool):
    """mem_fraction_static as the release forces it for this model, whatever was given: 0.8 for
    DeepSeek NSA in [SGLANG_NSA_08); None: no forced value (the caller takes `given` or the
    default, a multimodal model's scaled by sglang_vlm_default_scale / sglang_vlm_runner_scale)."""
    v = release_name(version)
    if nsa and SGLANG_NSA_08[0] <= version < SGLANG_NSA_08[1]:
        if given is not None and given != 0.8:
            raise ValueError(
                f"'mem_fraction_static' is set to 0.8 for DeepSeek NSA models by sglang {v} "
                f"(ServerArgs._handle_model_specific_adjustments): got {given}"
            )
        return 0.8
    return None


def sglang_vlm_default_scale(version, multimodal: bool, tower: tuple[int, int] | None) -> float:
    """The factor SGLang applies to a multimodal model's default mem_fraction_static (`tower`:
    its vision encoder's num_hidden_layers and hidden_size, needed from v0.4.9.post3): 1 before
    v0.4.9 (ModelRunner scales any fraction instead: sglang_vlm_runner_scale), 0.90 in v0.4.9 -
    v0.4.9.post2 (#7748), adjust_mem_fraction_for_vlm from v0.4.9.post3 (#6881)."""
    if not multimodal or version < SGLANG_VLM_FROM:
        return 1.0
    if version < SGLANG_VLM_ADJUST_FROM:
        return 0.90
    if tower is None:
        raise ValueError(
            f"'vision_tower' (its layers and width) is needed for a multimodal model's default "
            f"mem_fraction_static on sglang {release_name(version)}"
        )
    layers, width = tower
    ratio = layers * width**2 / (24 * 1024**2)  # against ViT-L/14
    return 0.95 * max(0.8, min(1.05, 1.0 - 0.1 * (ratio - 1.0)))


def sglang_vlm_runner_scale(version, multimodal: str | None) -> float:
    """The factor ModelRunner.__init__ applies to any mem_fraction_static of a multimodal model
    (model_runner.py `if self.is_multimodal: self.mem_fraction_static *= ...`): 0.95 from v0.4.0,
    0.90 from v0.4.4.post4 (#4754); 1 from v0.4.9 (#7748 moved it into the default)."""
    if not multimodal or version >= SGLANG_VLM_FROM:
        return 1.0
    return 0.90 if version >= SGLANG_VLM_090_FROM else 0.95
