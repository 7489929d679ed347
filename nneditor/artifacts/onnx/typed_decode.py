"""Decode TensorProto typed fields (float_data, int32_data, ...) and 6-bit packed floats.

ONNX stores values outside ``raw_data`` in a handful of repeated fields whose meaning depends
on the tensor's data type (the int32_data field carries fp16/bf16 bit patterns, fp8 codes,
bools, 8/16-bit integers and packed int4/int2 bytes). Decoding follows the ONNX spec and runs
only when a tensor is read.

Invariants:
- Only the recorded segment ranges are read; the element count is checked against the declared
  shape before the result is returned, with a sentence naming the tensor when they differ.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nneditor.artifacts.onnx import wire_index as w
from nneditor.artifacts.onnx.elem_types import FIELD_NAMES, typed_field_of
from nneditor.artifacts.onnx.tensor_index import Segment
from nneditor.errors import ArtifactError
from nneditor.io.source import ByteSource
from nneditor.tensors.dtypes import SUB_BYTE_BITS, numpy_dtype
from nneditor.tensors.loaders import codes_to_dtype, unpack_bits

if TYPE_CHECKING:
    import numpy as np
else:
    from nneditor.platform.lazy_numpy import np

_FIXED: dict[int, str] = {4: "<f4", 10: "<f8"}  # numpy spellings
_BYTE_CODES = {
    "bool",
    "float8_e4m3fn",
    "float8_e4m3fnuz",
    "float8_e5m2",
    "float8_e5m2fnuz",
    "float8_e8m0fnu",
}
_HALF_WORDS = {"float16", "bfloat16", "int16", "uint16"}


def stored_elements(dtype: str, count: int) -> int:
    """How many entries of the typed field a tensor of ``count`` elements needs."""
    if dtype in ("complex64", "complex128"):
        return 2 * count
    if dtype in SUB_BYTE_BITS and SUB_BYTE_BITS[dtype] in (2, 4):
        per = 8 // SUB_BYTE_BITS[dtype]
        return (count + per - 1) // per
    return count


def decode_typed(
    source: ByteSource, segments: list[Segment], dtype: str, count: int, label: str
) -> np.ndarray:
    """Values of a tensor stored in the typed field for ``dtype`` (flat, ``count`` elements)."""
    field = typed_field_of(dtype)
    need = stored_elements(dtype, count)
    try:
        if field in _FIXED:
            stored = _fixed_values(source, segments, np.dtype(_FIXED[field]))
        else:
            stored = _varint_values(source, segments)
    except ArtifactError as exc:
        raise ArtifactError(f"tensor {label!r}: {exc.detail}; the file is corrupt") from None
    if stored.size != need:
        raise ArtifactError(
            f"tensor {label!r}: the stored bytes do not match the declared shape: "
            f"{FIELD_NAMES[field]} holds {stored.size} values but {dtype} x {count} "
            f"needs {need}"
        )
    return _convert(stored, dtype, count)


def _fixed_values(source: ByteSource, segments: list[Segment], dt: np.dtype[Any]) -> np.ndarray:
    parts = []
    for seg in segments:
        raw = np.frombuffer(source.view(seg.offset, seg.length), dtype=np.uint8)
        if seg.packed:
            parts.append(raw.view(dt).copy())
        else:
            recs = raw.reshape(-1, 1 + dt.itemsize)[:, 1:]
            parts.append(np.ascontiguousarray(recs).view(dt).reshape(-1))
    return np.concatenate(parts) if parts else np.zeros(0, dt)


def _varint_values(source: ByteSource, segments: list[Segment]) -> np.ndarray:
    parts = []
    for seg in segments:
        raw = np.frombuffer(source.view(seg.offset, seg.length), dtype=np.uint8)
        values = w.decode_varints(raw)
        parts.append(values if seg.packed else values[1::2])
    return np.concatenate(parts) if parts else np.zeros(0, np.uint64)


def _convert(stored: np.ndarray, dtype: str, count: int) -> np.ndarray:
    """Map the typed field's entries to values of ``dtype`` (see the ONNX TensorProto docs)."""
    if dtype in ("float32", "float64"):
        return stored
    if dtype == "complex64":
        return stored.astype("<f4").view(np.complex64)
    if dtype == "complex128":
        return stored.astype("<f8").view(np.complex128)
    if dtype == "int64":
        return stored.view(np.int64)
    if dtype in ("uint64", "uint32"):
        return stored.astype(numpy_dtype(dtype))
    low = (stored & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    if dtype == "int32":
        return low.view(np.int32)
    if dtype in _HALF_WORDS:
        return low.astype(np.uint16).view(numpy_dtype(dtype))
    if dtype in ("int8", "uint8"):
        return low.astype(np.uint8).view(numpy_dtype(dtype))
    if dtype in _BYTE_CODES:
        return low.astype(np.uint8).view(numpy_dtype(dtype))
    if dtype in ("float6_e2m3fn", "float6_e3m2fn"):
        return (low.astype(np.uint8) & 0x3F).view(numpy_dtype(dtype))
    if dtype in SUB_BYTE_BITS:
        codes = unpack_bits(low.astype(np.uint8), SUB_BYTE_BITS[dtype])[:count]
        return codes_to_dtype(codes, dtype)
    raise ArtifactError(f"values of type {dtype} cannot be stored in int32_data")


def decode_strings(source: ByteSource, ranges: list[tuple[int, int]]) -> np.ndarray:
    """string_data entries as an object array of str (UTF-8, undecodable bytes replaced)."""
    out = np.empty(len(ranges), dtype=object)
    for i, (pos, n) in enumerate(ranges):
        out[i] = bytes(source.view(pos, n)).decode("utf-8", "replace")
    return out


def unpack6(raw: np.ndarray, skip: int, count: int) -> np.ndarray:
    """6-bit codes from an LSB-first bit stream (4 codes per 3 bytes), starting at code ``skip``."""
    groups = (raw.size + 2) // 3
    padded = np.zeros(groups * 3, dtype=np.uint8)
    padded[: raw.size] = raw
    b = padded.reshape(-1, 3)
    codes = np.empty((groups, 4), dtype=np.uint8)
    codes[:, 0] = b[:, 0] & 0x3F
    codes[:, 1] = (b[:, 0] >> 6) | ((b[:, 1] & 0x0F) << 2)
    codes[:, 2] = (b[:, 1] >> 4) | ((b[:, 2] & 0x03) << 4)
    codes[:, 3] = b[:, 2] >> 2
    return codes.reshape(-1)[skip : skip + count]
