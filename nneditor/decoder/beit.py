"""BEiT (microsoft/beit-base-patch16-224 and its fine-tunes: BeitModel,
BeitForImageClassification) and data2vec-vision, which shares its architecture, as ViT's
blocks (decoder/vit.py) with four differences:

- a learned relative-position bias added to every layer's attention scores: a table of
  (2h - 1)(2w - 1) + 3 rows by heads (the last three: class token to patch, patch to class
  token, class token to itself), read through a fixed index over the h x w window of patches
  and the class token, computed here as transformers' BeitRelativePositionBias does; one table
  per layer (``blk.N.attn_rel_b``, use_relative_position_bias) or one shared by every layer
  (``rel_pos_b``, use_shared_relative_position_bias), summed where both are stored. The
  releases add no absolute positions (use_absolute_position_embeddings false);
- layer scale (lambda_1, lambda_2) on both halves: DINOv2's ``ls1`` / ``ls2`` (forward._block);
- the key projection has no bias (the query and value do);
- the classifier reads the mean of the patch tokens (the class token left out) through the
  pooler's LayerNorm (``cls_norm``; classify.py's ``patch_mean`` pooling) when
  use_mean_pooling, with no final LayerNorm; else the class token after the final LayerNorm.

The tables are indexed for the window of config.image_size, the size the releases' image
processors resize to; another image size (transformers resizes the tables bilinearly) is
refused. The mask token is used in pre-training only and is listed, not run; the
masked-image-modelling, segmentation and backbone classes are refused by name.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from nneditor.decoder.classify import classifier_head
from nneditor.decoder.config import DecoderConfig, DecoderUnsupported
from nneditor.decoder.vision import PIXELS_NOTE, Vision, encoder_fields, image_and_patch

F32 = np.float32
#: model_type -> the name sentences use
MODEL_TYPES = {"beit": "BEiT", "data2vec-vision": "data2vec-vision"}
#: tensors of heads the decoder does not run (masked image modelling, segmentation, backbone)
_OTHER_HEADS = ("lm_head.", "decode_head.", "auxiliary_head.", "fpn")


def refuse_layouts(config: Mapping[str, Any], tensor_names: Sequence[str]) -> None:
    """Refuse BEiT's classes the decoder does not run, by name, before their tensors are
    read as a classifier's."""
    kind = MODEL_TYPES[str(config.get("model_type"))]
    other = next((n for n in tensor_names if n.startswith(_OTHER_HEADS)), None)
    if other is not None:
        classes = ", ".join(str(a) for a in config.get("architectures") or []) or "this class"
        raise DecoderUnsupported(
            f"this {kind} snapshot ({classes}) carries a head the NumPy decoder does not run "
            f"(tensor {other!r}: masked image modelling, semantic segmentation or a backbone's "
            "feature pyramid); it runs the image classifier and the base model"
        )
    size = config.get("image_size") or 224
    if isinstance(size, (list, tuple)) and len(set(size)) != 1:
        raise DecoderUnsupported(f"this {kind}'s image size {list(size)} is not square")


def from_hf(config: Mapping[str, Any], common: dict[str, Any]) -> DecoderConfig:
    kind = MODEL_TYPES[str(config.get("model_type"))]
    act = str(config.get("hidden_act") or "gelu")
    if act != "gelu":
        raise DecoderUnsupported(f"{kind} activation {act!r} is not implemented")
    size, patch = image_and_patch(config, kind)
    names = common["names"]
    mean = bool(config.get("use_mean_pooling", True))
    classifier = None
    if "cls_out.weight" in names:
        classifier = replace(
            classifier_head(config, names), pooling="patch_mean" if mean else "first"
        )
        _check_pooling(kind, mean, names)
    side = size // patch
    return DecoderConfig(
        **common,
        **encoder_fields(common),
        norm_eps=float(config.get("layer_norm_eps") or 1e-12),
        activation="gelu",
        classifier=classifier,
        vision=Vision(size, patch, int(config.get("num_channels") or 3), relative=True),
        notes=(
            PIXELS_NOTE,
            f"the relative-position bias is indexed for the {side}x{side} window of patches "
            f"of {size}x{size} images (the class token beside them)",
        ),
    )


def _check_pooling(kind: str, mean: bool, names: Mapping[str, str]) -> None:
    """The classifier's LayerNorm where use_mean_pooling says it is: the pooler's for the
    patches' mean (no final LayerNorm), the final one for the class token."""
    want, other = ("cls_norm", "output_norm") if mean else ("output_norm", "cls_norm")
    stored = {"cls_norm": "the pooler's LayerNorm", "output_norm": "the final LayerNorm"}
    if f"{want}.weight" not in names or f"{other}.weight" in names:
        raise DecoderUnsupported(
            f"this {kind} states use_mean_pooling {str(mean).lower()}, whose classifier reads "
            f"{stored[want]} alone, but the snapshot "
            + ("lacks it" if f"{want}.weight" not in names else f"stores {stored[other]} too")
        )


def relative_position_index(rows: int, cols: int) -> np.ndarray:
    """[1 + rows * cols, 1 + rows * cols]: the table row each (query, key) pair reads, as
    transformers' BeitRelativePositionBias.generate_relative_position_index computes it."""
    distances = (2 * rows - 1) * (2 * cols - 1) + 3
    grid = np.stack(np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")).reshape(2, -1)
    rel = (grid[:, :, None] - grid[:, None, :]).transpose(1, 2, 0)  # [n, n, (dy, dx)]
    index = np.zeros((rows * cols + 1,) * 2, np.int64)
    index[1:, 1:] = (rel[..., 0] + rows - 1) * (2 * cols - 1) + rel[..., 1] + cols - 1
    index[0, :] = distances - 3  # the class token to a patch
    index[:, 0] = distances - 2  # a patch to the class token
    index[0, 0] = distances - 1  # the class token to itself
    return index


def _bias(w: Any, cfg: DecoderConfig, key: str) -> np.ndarray:  # noqa: ANN401 - Weights
    """[heads, positions, positions]: the table ``key`` read through the window's index."""
    assert cfg.vision is not None
    side = cfg.vision.size // cfg.vision.patch
    table = w.get(key)
    rows = (2 * side - 1) ** 2 + 3
    if table.shape != (rows, cfg.n_heads):
        raise DecoderUnsupported(
            f"the relative-position table {cfg.names[key]!r} is {list(table.shape)}, not "
            f"[{rows}, {cfg.n_heads}] (a {side}x{side} window of patches and {cfg.n_heads} heads)"
        )
    index = relative_position_index(side, side)
    return np.ascontiguousarray(table[index].transpose(2, 0, 1), dtype=F32)


def shared_bias(w: Any, cfg: DecoderConfig) -> np.ndarray | None:  # noqa: ANN401 - Weights
    """The bias every layer adds (use_shared_relative_position_bias), None without one."""
    return _bias(w, cfg, "rel_pos_b.weight") if w.has("rel_pos_b.weight") else None


def layer_bias(
    w: Any,  # noqa: ANN401 - weights.Weights
    cfg: DecoderConfig,
    i: int,
    shared: np.ndarray | None,
) -> np.ndarray | None:
    """Layer ``i``'s bias: its own table's, plus the shared one where both are stored."""
    key = f"blk.{i}.attn_rel_b.weight"
    if not w.has(key):
        return shared
    own = _bias(w, cfg, key)
    return own if shared is None else (own + shared).astype(F32)
