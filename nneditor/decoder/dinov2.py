"""DINOv2 (facebook/dinov2-small/-base/-large/-giant: Dinov2Model,
Dinov2ForImageClassification) as ViT's blocks (decoder/vit.py) with three differences:

- layer scale: a learned vector (``blk.N.ls1`` / ``ls2``) multiplies the attention's and the
  feed-forward's output before each residual add (forward._block);
- the position table is stored for config.image_size (518: 37x37 patches) and resized to the
  image's patch grid with torch's bicubic interpolation (align_corners=False, no antialias),
  as transformers' Dinov2Embeddings.interpolate_pos_encoding does: :func:`positions`;
- the image classifier reads the class token beside the mean of the patch tokens
  (classify.py's ``cls_mean`` pooling).

The giant's SwiGLU feed-forward (use_swiglu_ffn) is stored as one [gate; up] matrix
(mlp.weights_in), run as Phi-3's fused_gate_up with SiLU. The mask token is used in
pre-training only and is listed, not run.
"""

from __future__ import annotations

import numpy as np

F32 = np.float32
#: torch's cubic convolution coefficient (upsample_bicubic2d)
_A = -0.75


def _cubic_weights(t: np.ndarray) -> np.ndarray:
    """[n, 4]: the weights of the four taps around each source coordinate's fraction ``t``."""
    a = _A

    def near(x: np.ndarray) -> np.ndarray:  # |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x: np.ndarray) -> np.ndarray:  # 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    return np.stack([far(t + 1), near(t), near(1 - t), far(2 - t)], axis=-1)


def _resize_matrix(size_in: int, size_out: int) -> np.ndarray:
    """[size_out, size_in]: bicubic resampling along one axis as torch computes it for a given
    output size and align_corners=False: the source coordinate (dst + 0.5) * in / out - 0.5,
    unclamped, and each tap's index clamped to the border."""
    scale = size_in / size_out
    src = (np.arange(size_out, dtype=np.float64) + 0.5) * scale - 0.5
    first = np.floor(src)
    weights = _cubic_weights(src - first)
    taps = np.clip(first[:, None].astype(np.int64) + np.arange(-1, 3), 0, size_in - 1)
    m = np.zeros((size_out, size_in))
    np.add.at(m, (np.repeat(np.arange(size_out), 4), taps.ravel()), weights.ravel())
    return m


def bicubic_resize(x: np.ndarray, height: int, width: int) -> np.ndarray:
    """``x`` [channels, h, w] resized to [channels, height, width] as
    ``torch.nn.functional.interpolate(mode="bicubic", align_corners=False)`` does (float32)."""
    rows = _resize_matrix(x.shape[1], height)
    cols = _resize_matrix(x.shape[2], width)
    out = np.einsum("hi,cij,wj->chw", rows, x.astype(np.float64), cols, optimize=True)
    return out.astype(F32)


def positions(table: np.ndarray, grid: int, rows: int, cols: int) -> np.ndarray:
    """The position table [1 + grid * grid, hidden] for an image of ``rows`` x ``cols``
    patches: the class token's row, then the patches' rows resized bicubically from the stored
    grid (unchanged when the image's grid is the stored one)."""
    if (rows, cols) == (grid, grid):
        return table
    hidden = table.shape[-1]
    patches = table[1:].reshape(grid, grid, hidden).transpose(2, 0, 1)
    resized = bicubic_resize(patches.astype(F32), rows, cols)
    return np.concatenate([table[:1], resized.transpose(1, 2, 0).reshape(-1, hidden)])
