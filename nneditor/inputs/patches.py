"""The flattened-patch profile of Qwen2-VL / Qwen2.5-VL / Qwen3-VL vision inputs.

Their vision encoders take ``pixel_values`` as a [patches, C x T x P x P] matrix (each row one
P x P patch of T frames, RGB) beside ``image_grid_thw`` = [[t, h, w]], the patch grid whose
product is the row count; h and w must be multiples of the spatial merge size (2), which
joins 2 x 2 patches into one token. Random rows with a grid that does not multiply out (or an
odd one) fail inside the model, so an input plan that recognises the pair fixes both: a grid
close to square that matches a fixed patch count, or 16 x 16 patches (a 224 x 224 image at
P = 14) when the count is open.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

#: an nneditor.inputs.spec.InputSpec (spec.py calls this module, so it is not imported here)
InputSpec = Any

MERGE = 2
#: values per flattened patch -> (channels, frames, patch side, the models that use it)
PROFILES = {
    3 * 2 * 14 * 14: (3, 2, 14, "Qwen2-VL / Qwen2.5-VL"),
    3 * 2 * 16 * 16: (3, 2, 16, "Qwen3-VL"),
}
#: the grid side used when the patch count is open (16 x 16 patches: 224 px at P = 14)
DEFAULT_SIDE = 16


def grid_for(patches: int) -> tuple[int, int] | None:
    """(h, w), both multiples of :data:`MERGE`, with h x w = ``patches`` and h <= w as close
    to square as possible; None when no such grid exists."""
    best = None
    for h in range(MERGE, math.isqrt(patches) + 1, MERGE):
        if patches % h == 0 and (patches // h) % MERGE == 0:
            best = (h, patches // h)
    return best


def apply_patch_profile(
    specs: list[InputSpec], dims: Mapping[str, int], shapes: Mapping[str, tuple[int, ...]]
) -> list[InputSpec]:
    """``specs`` with a recognised pixel_values / image_grid_thw pair given the profile."""
    by_name = {s.name: s for s in specs}
    pixels, grid = by_name.get("pixel_values"), by_name.get("image_grid_thw")
    if pixels is None or grid is None or pixels.problem or grid.problem:
        return specs
    declared = pixels.declared_shape
    if declared is None or len(declared) != 2 or not isinstance(declared[1], int):
        return specs
    profile = PROFILES.get(declared[1])
    gshape = grid.declared_shape
    if profile is None or gshape is None or len(gshape) != 2 or gshape[1] != 3:
        return specs
    channels, frames, side, models = profile
    images = grid.shape[0] if grid.shape else 1
    rows = declared[0]
    fixed = isinstance(rows, int) and rows > 0
    if pixels.name in shapes:
        rows, fixed = shapes[pixels.name][0], True
    elif isinstance(rows, str) and rows in dims:
        rows, fixed = dims[rows], True
    if fixed:
        assert isinstance(rows, int)
        hw = grid_for(rows // images) if rows % images == 0 else None
        if hw is None:
            problem = (
                f"input {pixels.name!r} has {rows} patches, which no {MERGE}-aligned h x w grid "
                f"multiplies to; set another count (e.g. --shape {pixels.name}="
                f"{DEFAULT_SIDE**2}x{declared[1]})"
            )
            return [replace(s, problem=problem) if s is pixels else s for s in specs]
    else:
        hw = (DEFAULT_SIDE, DEFAULT_SIDE)
    h, w = hw
    count = h * w
    note = (
        f"input {pixels.name!r} holds flattened {side} x {side} patches ({models}: {channels} "
        f"channels x {frames} frames x {side} x {side} = {declared[1]} values each): a grid of "
        f"1 x {h} x {w} = {count} patches{'' if fixed else ' (the count is open)'}, random "
        "pixel values"
    )
    pixel_spec = replace(
        pixels,
        shape=(count * images, declared[1]),
        role="patches",
        assumptions=(*[a for a in pixels.assumptions if "axis 0" not in a], note),
    )
    grid_spec = replace(
        grid,
        shape=(images, 3),
        role="grid_thw",
        values=(1, h, w) * images,
        assumptions=(
            *grid.assumptions,
            f"input {grid.name!r} set to [[1, {h}, {w}]]: the patch grid of {pixels.name!r}",
        ),
    )
    return [pixel_spec if s is pixels else grid_spec if s is grid else s for s in specs]


#: The vision input NNEditor's Qwen2-VL / Qwen2.5-VL / Qwen3-VL graphs declare
#: (semantic/modality_graphs.py): one image of 4 x 4 patches (56 px at 14-pixel patches, 64 px
#: at 16), 2 frames: 16 patch rows, merged 2 x 2 into 4 image tokens
QWEN_VL_GRID = (1, 4, 4)
QWEN_VL_TYPES = ("qwen2_vl", "qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe")


def qwen_vl_image_tokens(config: Mapping[str, Any]) -> int:
    """Image placeholder tokens of the declared image: patches / (spatial merge size)^2."""
    merge = int((config.get("vision_config") or {}).get("spatial_merge_size", MERGE))
    t, h, w = QWEN_VL_GRID
    return t * h * w // (merge * merge)
