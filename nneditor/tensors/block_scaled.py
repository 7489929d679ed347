"""Float8 weights with a scale per block, as "fp8"-quantized checkpoints store them (Qwen3's and
DeepSeek's official FP8 releases: ``weight`` in float8_e4m3fn and ``weight_scale_inv``, one
float32 per ``block_rows`` x ``block_cols`` block, the last blocks possibly partial). A value
is ``float(weight) * scale``. The loader reads rows of the logical float32 matrix, decoding
only the rows asked for (ml_dtypes widens the float8 values through the stored loader).
"""

from __future__ import annotations

import numpy as np

from nneditor.tensors.loaders import RowDecoder, Rows


class BlockScaledLoader(RowDecoder):
    def __init__(self, weight: Rows, scale: Rows, block: tuple[int, int]) -> None:
        self.weight, self.scale, self.block = weight, scale, block

    def decode_rows(self, a: int, b: int, cols: int) -> np.ndarray:
        br, bc = self.block
        values = np.asarray(self.weight.read(f"{a}:{b}"), dtype=np.float32)
        scales = np.asarray(self.scale.read(f"{a // br}:{(b - 1) // br + 1}"), np.float32)
        scales = scales.reshape(scales.shape[0], -1)  # a whole-tensor scale is stored as [1]
        per_row = np.repeat(scales, br, axis=0)[a - a // br * br : b - a // br * br]
        per_value = np.repeat(per_row, bc, axis=1)[:, :cols]
        values *= per_value
        return values
