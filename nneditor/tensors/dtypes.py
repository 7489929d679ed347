"""Logical dtypes and their numpy equivalents.

NNEditor names dtypes with lowercase numpy-style names ("float32", "bfloat16",
"float8_e4m3fn", "int4", "string", "complex64"). Types numpy lacks come from ml_dtypes.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
else:
    from nneditor.platform.lazy_numpy import np

#: the types numpy lacks, from ml_dtypes (imported on first need: 5 ms a process otherwise,
#: which a look at a float model never needs). int4/uint4 map to ml_dtypes' 1-byte containers;
#: their *storage* is packed two per byte, see tensors.packed.
_ML_DTYPES = (
    "bfloat16",
    "float8_e4m3fn",
    "float8_e4m3fnuz",
    "float8_e5m2",
    "float8_e5m2fnuz",
    "float8_e8m0fnu",
    "float4_e2m1fn",
    "float6_e2m3fn",
    "float6_e3m2fn",
    "int4",
    "uint4",
    "int2",
    "uint2",
)

# name -> numpy's spelling of its dtype (little-endian storage), with its stored bits: the
# bits are known without numpy, which a look at a model's names and shapes never imports
_STANDARD: dict[str, tuple[str, int]] = {
    "float32": ("<f4", 32),
    "float64": ("<f8", 64),
    "float16": ("<f2", 16),
    "int8": ("i1", 8),
    "uint8": ("u1", 8),
    "int16": ("<i2", 16),
    "uint16": ("<u2", 16),
    "int32": ("<i4", 32),
    "uint32": ("<u4", 32),
    "int64": ("<i8", 64),
    "uint64": ("<u8", 64),
    "bool": ("?", 8),
    "complex64": ("<c8", 64),
    "complex128": ("<c16", 128),
    "string": ("O", 0),
}

# name -> numpy dtype, built on first need; _ML_DTYPES join it on theirs
_NUMPY: dict[str, np.dtype] = {}


def _numpy_table() -> dict[str, np.dtype]:
    if not _NUMPY:
        _NUMPY.update((name, np.dtype(spelled)) for name, (spelled, _) in _STANDARD.items())
    return _NUMPY


#: dtypes stored with fewer than 8 bits per element, packed low nibble/bits first. The 6-bit
#: floats form an LSB-first bit stream (4 codes in 3 bytes), which PackedLoader does not unpack.
SUB_BYTE_BITS: dict[str, int] = {
    "int4": 4,
    "uint4": 4,
    "float4_e2m1fn": 4,
    "int2": 2,
    "uint2": 2,
    "float6_e2m3fn": 6,
    "float6_e3m2fn": 6,
}


def _add_ml_dtypes() -> None:
    import ml_dtypes

    table = _numpy_table()
    for name in _ML_DTYPES:
        table.setdefault(name, np.dtype(getattr(ml_dtypes, name)))


def numpy_dtype(name: str) -> np.dtype:
    """The numpy dtype used for decoded values of logical dtype ``name``."""
    found = _numpy_table().get(name)
    if found is not None:
        return found
    if name in _ML_DTYPES:
        _add_ml_dtypes()
        return _NUMPY[name]
    raise ValueError(f"unknown dtype {name!r}")


#: stored bits of ml_dtypes' whole-byte types (known without importing it)
_ML_BITS = {
    name: 16 if name == "bfloat16" else 8 for name in _ML_DTYPES if name not in SUB_BYTE_BITS
}


def itemsize_bits(name: str) -> int:
    """Stored bits per element (string has no fixed size: returns 0)."""
    if name in SUB_BYTE_BITS:
        return SUB_BYTE_BITS[name]
    if name in _ML_BITS:
        return _ML_BITS[name]
    if name in _STANDARD:
        return _STANDARD[name][1]
    raise ValueError(f"unknown dtype {name!r}")


def stored_nbytes(name: str, count: int) -> int:
    """Bytes needed to store ``count`` elements of ``name`` densely."""
    bits = itemsize_bits(name)
    return (count * bits + 7) // 8


def dtype_name(dt: np.dtype) -> str:
    """Inverse of :func:`numpy_dtype` for decoded arrays."""
    dt = np.dtype(dt)
    if dt.kind == "V" and "ml_dtypes" in sys.modules:  # (ml_dtypes' types are "V"s)
        _add_ml_dtypes()
    for name, candidate in _numpy_table().items():
        if candidate == dt and name != "string":
            return name
    if dt.kind in "OUS":
        return "string"
    return str(dt)
