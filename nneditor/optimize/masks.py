"""Pruning masks from ``.npy`` files, read without pickles and without trusting the header.

Invariants: the header is parsed with numpy's own reader (versions 1.0 and 2.0, header at
most 10,000 bytes); object dtypes are refused (``allow_pickle=False`` semantics); the shape
must equal the tensor's; the data the header promises must fit in the file *before* anything
is mapped; values are then read through a read-only memory map, never allocated up front.
Non-zero entries mean "keep".
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from numpy.lib import format as npy_format

from nneditor.errors import ArtifactError

_MAX_HEADER = 10_000


def _fail(
    path: Path, detail: str, offset: int | None = None, hint: str | None = None
) -> ArtifactError:
    return ArtifactError(detail, format="npy", path=str(path), offset=offset, hint=hint)


def load_mask(path: Path, shape: tuple[int, ...], tensor: str = "") -> np.ndarray:
    """A read-only view of the mask in ``path``, checked to have ``shape``."""
    path = Path(path)
    try:
        size = path.stat().st_size
        with path.open("rb") as fp:
            try:
                version = npy_format.read_magic(fp)
            except ValueError:
                raise _fail(
                    path,
                    "this is not a .npy file (it does not start with the \\x93NUMPY magic)",
                    0,
                    "save masks with numpy.save",
                ) from None
            if version not in ((1, 0), (2, 0)):
                raise _fail(
                    path, f".npy format version {version[0]}.{version[1]} is not supported", 6
                )
            reader = (
                npy_format.read_array_header_1_0
                if version == (1, 0)
                else npy_format.read_array_header_2_0
            )
            try:
                file_shape, fortran, dtype = reader(fp, max_header_size=_MAX_HEADER)
            except ValueError as exc:
                raise _fail(path, f"the .npy header cannot be read ({exc})", 8) from None
            data_offset = fp.tell()
    except OSError as exc:
        raise _fail(path, f"the mask file cannot be read ({exc.strerror or exc})") from None
    what = f" for tensor {tensor!r}" if tensor else ""
    if dtype.hasobject or dtype.kind not in "biuf":
        raise _fail(
            path,
            f"the mask{what} has dtype {dtype}; masks must be bool or numeric "
            "(object arrays would need pickle, which is never loaded)",
        )
    if tuple(file_shape) != tuple(shape):
        raise _fail(
            path,
            f"the mask{what} has shape {list(file_shape)} but the tensor has shape {list(shape)}",
            hint="save a mask with exactly the tensor's shape",
        )
    count = int(np.prod(file_shape, dtype=np.int64)) if file_shape else 1
    need = count * dtype.itemsize
    if data_offset + need > size:
        raise _fail(
            path,
            f"the file is truncated: the header promises {need} bytes of mask data after byte "
            f"{data_offset} but the file has {size} bytes",
            data_offset,
        )
    if count == 0:
        return np.zeros(shape, dtype=dtype)
    return np.memmap(
        path,
        dtype=dtype,
        mode="r",
        offset=data_offset,
        shape=tuple(file_shape),
        order="F" if fortran else "C",
    )
