"""Float8 weights with a scale per block, as "fp8"-quantized checkpoints store them (Qwen3's and
DeepSeek's official FP8 releases: ``weight`` in float8_e4m3fn and ``weight_scale_inv``, one
float32 per ``block_rows`` x ``block_cols`` block, the last blocks possibly partial). A value
is ``float(weight) * scale``. The loader reads rows of the logical float32 matrix, decoding
only the rows asked for (ml_dtypes widens the float8 values through the stored loader).
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from nneditor.tensors.loaders import TensorLoader, apply_rest
from nneditor.tensors.slicing import Key, leading_rows

#: rows decoded at once (bounds the temporaries: 1,024 x 8,192 float32 is 32 MB)
_ROWS = 1024


class Rows(Protocol):
    """A stored tensor read by a leading-row range ("a:b"), as a TensorRef is."""

    def read(self, key: str) -> np.ndarray: ...


class BlockScaledLoader(TensorLoader):
    def __init__(self, weight: Rows, scale: Rows, block: tuple[int, int]) -> None:
        self.weight, self.scale, self.block = weight, scale, block

    def read(self, shape: tuple[int, ...], key: Key | None) -> np.ndarray:
        rows, cols = shape
        r0, r1 = (0, rows) if key is None else leading_rows(key, shape)
        out = np.empty((r1 - r0, cols), np.float32)
        step = max(self.block[0], _ROWS // self.block[0] * self.block[0])
        for a in range(r0, r1, step):
            b = min(r1, a + step)
            out[a - r0 : b - r0] = self._rows(a, b, cols)
        return out if key is None else apply_rest(out, key, r0)

    def _rows(self, a: int, b: int, cols: int) -> np.ndarray:
        br, bc = self.block
        values = np.asarray(self.weight.read(f"{a}:{b}"), dtype=np.float32)
        scales = np.asarray(self.scale.read(f"{a // br}:{(b - 1) // br + 1}"), np.float32)
        scales = scales.reshape(scales.shape[0], -1)  # a whole-tensor scale is stored as [1]
        per_row = np.repeat(scales, br, axis=0)[a - a // br * br : b - a // br * br]
        per_value = np.repeat(per_row, bc, axis=1)[:, :cols]
        values *= per_value
        return values
