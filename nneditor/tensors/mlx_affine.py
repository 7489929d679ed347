"""MLX's affine quantization, as mlx-community snapshots store it (``mlx_lm convert -q``).

A quantized ``Linear``/``Embedding`` keeps three tensors: ``weight`` (uint32 words packing
``bits``-bit integers as one little-endian bit stream per row), and per group of
``group_size`` values along a row ``scales`` and ``biases``; a value is
``scale * q + bias``. This loader reads rows of the logical [out, in] float32 matrix, decoding
only the words of the rows asked for. Hand-written because the only library that decodes it,
``mlx``, is a whole array framework (and exact here: the same float32 multiply-add).
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from nneditor.tensors.loaders import TensorLoader, apply_rest
from nneditor.tensors.slicing import Key, leading_rows

BITS = (2, 3, 4, 5, 6, 8)
#: rows decoded at once (bounds the bit-unpacking temporaries: 1,024 x 4,096 values)
_ROWS = 1024


class Rows(Protocol):
    """A stored tensor read by a leading-row range ("a:b"), as a TensorRef is."""

    def read(self, key: str) -> np.ndarray: ...


class MLXAffineLoader(TensorLoader):
    def __init__(self, weight: Rows, scales: Rows, biases: Rows, bits: int, group: int) -> None:
        self.weight, self.scales, self.biases = weight, scales, biases
        self.bits, self.group = bits, group

    def read(self, shape: tuple[int, ...], key: Key | None) -> np.ndarray:
        rows, cols = shape
        r0, r1 = (0, rows) if key is None else leading_rows(key, shape)
        out = np.empty((r1 - r0, cols), np.float32)
        for a in range(r0, r1, _ROWS):
            b = min(r1, a + _ROWS)
            out[a - r0 : b - r0] = self._rows(a, b, cols)
        return out if key is None else apply_rest(out, key, r0)

    def _rows(self, a: int, b: int, cols: int) -> np.ndarray:
        words = np.ascontiguousarray(self.weight.read(f"{a}:{b}"), dtype="<u4")
        bits = np.unpackbits(words.view(np.uint8), axis=-1, bitorder="little")
        bits = bits[:, : cols * self.bits].reshape(b - a, cols, self.bits)
        weights = (np.uint32(1) << np.arange(self.bits, dtype=np.uint32)).astype(np.uint32)
        q = (bits.astype(np.uint32) * weights).sum(-1, dtype=np.uint32).astype(np.float32)
        groups = q.reshape(b - a, cols // self.group, self.group)
        scales = np.asarray(self.scales.read(f"{a}:{b}"), np.float32)[:, :, None]
        biases = np.asarray(self.biases.read(f"{a}:{b}"), np.float32)[:, :, None]
        groups *= scales
        groups += biases
        return groups.reshape(b - a, cols)
