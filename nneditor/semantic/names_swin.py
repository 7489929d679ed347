"""Swin Transformer image classifiers of Hugging Face snapshots (SwinForImageClassification,
SwinModel; Swinv2's): their tensor names as the synthesized graph (checkpoint_swin.py) and the
NumPy decoder (decoder/swin.py) read them.

Blocks are numbered across the stages (``blk.{i}``, i counting every stage's blocks in order),
as a transformer's layers are; ``stages`` says which stage each belongs to.

``stem.conv`` and ``stem.norm`` (the patch embedding's convolution and LayerNorm),
``pos_embd`` (absolute positions, where use_absolute_embeddings stored them); each block's
``attn_norm`` (layernorm_before), ``attn_q``, ``attn_k``, ``attn_v``, ``attn_out``,
``attn_rel_b`` (the relative-position bias table), ``ffn_norm`` (layernorm_after),
``ffn_up`` and ``ffn_down``; Swinv2's ``attn_logit_scale`` and its continuous position bias
MLP ``attn_cpb_0`` / ``attn_cpb_2`` in place of the table; ``merge.{s}.norm`` and
``merge.{s}.reduce`` (stage s's patch merging); ``output_norm`` (the final LayerNorm) and
``cls_out`` (the classifier). The releases' names and the ones transformers 5 keeps in memory
(``q_proj``, ``mlp.fc1``, ...) are both read; the relative-position index buffers that older
releases stored are computed, not read.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from nneditor.semantic.image_builder import StagedNames

#: the families whose names are read here: model_type -> the name sentences use
SWIN_FAMILIES = {"swin": "Swin", "swinv2": "Swinv2"}

_TOP = {
    "embeddings.patch_embeddings.projection.weight": "stem.conv.weight",
    "embeddings.patch_embeddings.projection.bias": "stem.conv.bias",
    "embeddings.norm.weight": "stem.norm.weight",
    "embeddings.norm.bias": "stem.norm.bias",
    "embeddings.position_embeddings": "pos_embd.weight",
    "layernorm.weight": "output_norm.weight",
    "layernorm.bias": "output_norm.bias",
    "classifier.weight": "cls_out.weight",
    "classifier.bias": "cls_out.bias",
}
_MERGE = re.compile(r"^encoder\.layers\.(\d+)\.downsample\.(norm|reduction)\.(weight|bias)$")
_BLOCK = re.compile(r"^encoder\.layers\.(\d+)\.blocks\.(\d+)\.(.+)\.(weight|bias)$")
_BLOCK_PARAM = re.compile(
    r"^encoder\.layers\.(\d+)\.blocks\.(\d+)\.attention\.(?:self\.|relative_position_bias\.)?(\w+)$"
)
_PART = {
    "layernorm_before": "attn_norm",
    "attention.self.query": "attn_q",
    "attention.q_proj": "attn_q",
    "attention.self.key": "attn_k",
    "attention.k_proj": "attn_k",
    "attention.self.value": "attn_v",
    "attention.v_proj": "attn_v",
    "attention.output.dense": "attn_out",
    "attention.o_proj": "attn_out",
    "layernorm_after": "ffn_norm",
    "intermediate.dense": "ffn_up",
    "mlp.fc1": "ffn_up",
    "output.dense": "ffn_down",
    "mlp.fc2": "ffn_down",
    "attention.self.continuous_position_bias_mlp.0": "attn_cpb_0",
    "attention.self.continuous_position_bias_mlp.2": "attn_cpb_2",
}
#: parameters stored without a .weight suffix
_PARAMS = {
    "relative_position_bias_table": "attn_rel_b.weight",
    "logit_scale": "attn_logit_scale.weight",
}
#: buffers older releases stored, computed from the window instead
_BUFFERS = ("relative_position_index", "relative_coords_table")


SwinNames = StagedNames  # (image_builder.py: the names of a staged network)


def swin_names(model_type: str, names: Iterable[str]) -> SwinNames:
    """A Swin's (or Swinv2's) tensor names mapped to the keys above."""
    prefix = f"{model_type}."
    blocks: dict[tuple[int, int], dict[str, str]] = {}
    mapped: dict[str, str] = {}
    unplaced: list[str] = []
    for name in names:
        inner = name.removeprefix(prefix)
        if inner.endswith(_BUFFERS):
            continue
        if inner in _TOP:
            mapped[_TOP[inner]] = name
            continue
        merge = _MERGE.match(inner)
        if merge:
            part = "norm" if merge[2] == "norm" else "reduce"
            mapped[f"merge.{merge[1]}.{part}.{merge[3]}"] = name
            continue
        m = _BLOCK.match(inner)
        key = f"{_PART[m[3]]}.{m[4]}" if m and m[3] in _PART else None
        if key is None:
            m = _BLOCK_PARAM.match(inner)
            key = _PARAMS.get(m[3]) if m else None
        if m is None or key is None:
            unplaced.append(name)
            continue
        blocks.setdefault((int(m[1]), int(m[2])), {})[key] = name
    order = sorted(blocks)
    for i, at in enumerate(order):
        mapped.update({f"blk.{i}.{key}": name for key, name in blocks[at].items()})
    return SwinNames(mapped, tuple(s for s, _ in order), tuple(unplaced))


# ---------------------------------------------------------------------------------- geometry


def patch_grid(height: int, width: int, patch: int) -> tuple[int, int]:
    """The patch embedding's grid: the image padded at the bottom and right to whole patches."""
    return -(-height // patch), -(-width // patch)


def stage_grids(grid: tuple[int, int], stages: int) -> list[tuple[int, int]]:
    """Each stage's grid of tokens: patch merging halves it, an odd side padded by one."""
    grids = [grid]
    for _ in range(stages - 1):
        h, w = grids[-1]
        grids.append(((h + 1) // 2, (w + 1) // 2))
    return grids


def block_window(grid: tuple[int, int], window: int, shifted: bool) -> tuple[int, int]:
    """(window, shift) of a block on ``grid``: ``window`` and, on every other block, half of it
    as the cyclic shift; a grid whose shorter side is no longer than the window is one window
    of that side, unshifted (as transformers' SwinLayer sets them)."""
    if min(grid) <= window:
        return min(grid), 0
    return window, window // 2 if shifted else 0
