"""Kimi K2.5's `vision_config` (MoonViT + its patch-merger projector) -> ModelSpec.vision.

The released config.json names the tower with the remote-code keys vLLM reads
(transformers_utils/configs/kimi_k25.py: vt_hidden_size, vt_intermediate_size,
vt_num_hidden_layers, vt_num_attention_heads, init_pos_emb_height / _width); transformers 5.x's
Kimi_K25VisionConfig names them hidden_size, ... pos_emb_height and defaults to the released
values (1152, 4304, 27 layers, 16 heads, patch 14, a 64 x 64 position grid, a 2 x 2 merge
kernel). Either spelling is read, the remote-code one first. What would change a count kvcalc
does not model is refused by name: a position embedding other than divided_fixed, a merger other
than sd2_tpool / patchmerger (Kimi K3's patchmergerv2), a non-square merge kernel, and a
projector LayerNorm (projection_hidden_size / mm_hidden_size) narrower or wider than the tower.
"""

from __future__ import annotations

from calc.hf.reader import _Config


def moonvit_fields(outer: dict, vc: dict, cfg: _Config) -> dict:
    hidden = cfg.int("vt_hidden_size", "hidden_size", default=1152)
    for key, want in (
        ("pos_emb_type", "divided_fixed"),
        ("merge_type", "sd2_tpool"),
        ("mm_projector_type", "patchmerger"),
    ):
        if vc.get(key, want) != want:
            raise cfg.fail(key, f"must be {want!r} (the only one modelled)")
    kernel = vc.get("merge_kernel_size", [2, 2])
    ok = isinstance(kernel, list | tuple) and len(kernel) == 2
    if not (ok and kernel[0] == kernel[1] and isinstance(kernel[0], int) and kernel[0] > 0):
        raise cfg.fail("merge_kernel_size", "must be a square [k, k] of positive integers")
    wrapper = _Config(outer, cfg.origin.removesuffix(": vision_config"), "kimi_k25")
    norm = wrapper.int("projection_hidden_size", default=None, nullable=True)
    if norm is None:
        norm = cfg.int("mm_hidden_size", default=hidden)
    if norm != hidden:
        raise wrapper.fail(
            "projection_hidden_size", f"(the projector's LayerNorm) must equal {hidden}"
        )
    height = cfg.int("init_pos_emb_height", "pos_emb_height", default=64)
    width = cfg.int("init_pos_emb_width", "pos_emb_width", default=64)
    return {
        "kind": "moonvit",
        "hidden_size": hidden,
        "intermediate_size": cfg.int("vt_intermediate_size", "intermediate_size", default=4304),
        "num_hidden_layers": cfg.int("vt_num_hidden_layers", "num_hidden_layers", default=27),
        "num_attention_heads": cfg.int("vt_num_attention_heads", "num_attention_heads", default=16),
        "patch_size": cfg.int("patch_size", default=14),
        "spatial_merge_size": kernel[0],
        "num_position_embeddings": height * width,
    }
