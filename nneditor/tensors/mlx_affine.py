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

from nneditor.model.tensor import TensorRef
from nneditor.tensors.loaders import TensorLoader, apply_rest
from nneditor.tensors.slicing import Key, leading_rows

BITS = (2, 3, 4, 5, 6, 8)
#: rows decoded at once (bounds the bit-unpacking temporaries: 1,024 x 4,096 values)
_ROWS = 1024


class MLXAffineLoader(TensorLoader):
    def __init__(
        self, weight: TensorRef, scales: TensorRef, biases: TensorRef, bits: int, group: int
    ) -> None:
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


def affine_ref(
    name: str, weight: TensorRef, scales: TensorRef, biases: TensorRef, bits: int, group: int
) -> TensorRef | str:
    """The logical float32 [out, in] tensor of an MLX-quantized weight, or why not."""
    if bits not in BITS:
        return f"{name}: MLX {bits}-bit quantization is not one NNEditor decodes ({BITS})"
    if weight.dtype != "uint32" or len(weight.shape) != 2 or len(scales.shape) != 2:
        return f"{name}: not an MLX packed weight (uint32 [out, words]) with 2-D scales"
    rows, words = weight.shape
    cols = words * 32 // bits
    if scales.shape != (rows, cols // group) or biases.shape != scales.shape or cols % group:
        return (
            f"{name}: {rows} x {cols} values in groups of {group} do not match scales "
            f"{list(scales.shape)} and biases {list(biases.shape)}"
        )
    loader = MLXAffineLoader(weight, scales, biases, bits, group)
    info = {"mlx_quantization": {"bits": bits, "group_size": group, "packed": list(weight.shape)}}
    # (the key nneditor.artifacts.huggingface.mlx.INFO looks for)
    return TensorRef(
        name,
        "float32",
        (rows, cols),
        weight.nbytes,
        f"MLX affine {bits}-bit, groups of {group} (scales and biases beside it)",
        loader,
        offset=weight.offset,
        location=weight.location,
        info=info,
    )
