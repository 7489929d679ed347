"""MLX's affine quantization, as mlx-community snapshots store it (``mlx_lm convert -q``).

A quantized ``Linear``/``Embedding`` keeps three tensors: ``weight`` (uint32 words packing
``bits``-bit integers as one little-endian bit stream per row), and per group of
``group_size`` values along a row ``scales`` and ``biases``; a value is
``scale * q + bias``. This loader reads rows of the logical [out, in] float32 matrix, decoding
only the words of the rows asked for. Hand-written because the only library that decodes it,
``mlx``, is a whole array framework (and exact here: the same float32 multiply-add).
"""

from __future__ import annotations

import numpy as np

from nneditor.tensors.loaders import ROW_DECODE_VALUES, AffineMatrix, RowDecoder, Rows

BITS = (2, 3, 4, 5, 6, 8)


class MLXAffineLoader(RowDecoder):
    def __init__(self, weight: Rows, scales: Rows, biases: Rows, bits: int, group: int) -> None:
        self.weight, self.scales, self.biases = weight, scales, biases
        self.bits, self.group = bits, group

    def _codes(self, words: np.ndarray, cols: int, out: np.ndarray) -> np.ndarray:
        """The integers of [rows, words] packed words, into float32 ``out`` [rows, cols]."""
        rows = words.shape[0]
        data = words.view(np.uint8)
        if 8 % self.bits == 0:  # 2, 4, 8 bits: whole values per byte, lowest bits first
            per = 8 // self.bits
            shifts = (np.arange(per, dtype=np.uint8) * self.bits)[None, None, :]
            mask = np.uint8((1 << self.bits) - 1)
            codes = (data[:, :, None] >> shifts) & mask
            np.copyto(out, codes.reshape(rows, -1)[:, :cols], casting="unsafe")
            return out
        bits = np.unpackbits(data, axis=-1, bitorder="little")  # 3, 5, 6 bits: one stream
        bits = bits[:, : cols * self.bits].reshape(rows, cols, self.bits)
        place = (np.uint32(1) << np.arange(self.bits, dtype=np.uint32)).astype(np.uint32)
        np.copyto(out, (bits.astype(np.uint32) * place).sum(-1, dtype=np.uint32), casting="unsafe")
        return out

    def _scaled_rows(self, a: int, b: int, cols: int, out: np.ndarray) -> np.ndarray:
        """Rows [a, b) as ``scale * q`` into ``out`` [b - a, cols]; returns their biases
        [b - a, cols // group]."""
        words = np.ascontiguousarray(self.weight.read(f"{a}:{b}"), dtype="<u4")
        groups = self._codes(words, cols, out).reshape(b - a, cols // self.group, self.group)
        groups *= np.asarray(self.scales.read(f"{a}:{b}"), np.float32)[:, :, None]
        return np.asarray(self.biases.read(f"{a}:{b}"), np.float32)

    def decode_rows(self, a: int, b: int, cols: int) -> np.ndarray:
        out = np.empty((b - a, cols), np.float32)
        biases = self._scaled_rows(a, b, cols, out)
        out.reshape(b - a, cols // self.group, self.group)[...] += biases[:, :, None]
        return out

    def read_affine(self, shape: tuple[int, ...]) -> AffineMatrix | None:
        rows, cols = shape
        scaled = np.empty((rows, cols), np.float32)
        offsets = np.empty((rows, cols // self.group), np.float32)
        step = max(1, ROW_DECODE_VALUES // max(cols, 1))
        for a in range(0, rows, step):
            b = min(rows, a + step)
            offsets[a:b] = self._scaled_rows(a, b, cols, scaled[a:b])
        return AffineMatrix(scaled, offsets, self.group)
