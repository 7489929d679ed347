"""Writing tensor values to .npy (Qt-free).

Invariants:
- A whole tensor is streamed chunk by chunk into a memory-mapped .npy (bounded memory); a
  slice is read once with its key.
- The file appears only when complete: data goes to ``<name>.part`` and is renamed at the end;
  a cancelled or failed export removes the partial file.
- dtypes .npy cannot describe portably are converted and the result says so: extension floats
  (bfloat16, float8, float4, int4 ...) become float32 (int4/int2 -> int8/uint8), strings become
  fixed-width unicode.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from nneditor.analysis.chunks import iter_chunks
from nneditor.jobs.protocol import JobHandle
from nneditor.model.tensor import TensorRef
from nneditor.tensors.dtypes import numpy_dtype

CHUNK = 1 << 20


@dataclass(frozen=True)
class Exported:
    path: Path
    shape: tuple[int, ...]
    dtype: str
    converted_from: str = ""

    def describe(self) -> str:
        conv = f" (converted from {self.converted_from})" if self.converted_from else ""
        shape = "×".join(str(d) for d in self.shape) or "scalar"
        return f"Saved {shape} {self.dtype}{conv} to {self.path}"


def npy_dtype(dt: np.dtype) -> np.dtype | None:
    """The dtype to store ``dt`` as, or None to keep it (native numpy dtypes)."""
    dt = np.dtype(dt)
    if dt.kind == "O":
        return None  # decided per array (unicode of the longest string)
    if dt.isbuiltin == 1 or dt.kind in "US":
        return None
    if dt.kind in "iu":  # ml_dtypes int4/int2 containers
        return np.dtype(np.int8 if dt.kind == "i" else np.uint8)
    return np.dtype(np.float32)


def _portable(arr: np.ndarray) -> np.ndarray:
    if arr.dtype.kind == "O":
        return arr.astype(str)
    target = npy_dtype(arr.dtype)
    return arr if target is None else arr.astype(target)


def export_array(arr: np.ndarray, path: str | os.PathLike[str]) -> Exported:
    """Save ``arr`` (already in memory, e.g. a slice) as .npy."""
    path = Path(path)
    out = _portable(np.asarray(arr))
    conv = "" if out.dtype == arr.dtype else str(arr.dtype)
    tmp = path.with_name(path.name + ".part")
    try:
        with open(tmp, "wb") as fh:
            np.save(fh, out, allow_pickle=False)
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    return Exported(path, tuple(out.shape), str(out.dtype), conv)


def export_tensor(
    ref: TensorRef, path: str | os.PathLike[str], handle: JobHandle | None = None
) -> Exported:
    """Stream the whole tensor into ``path`` in chunks of ≤ ``CHUNK`` elements."""
    handle = handle or JobHandle()
    path = Path(path)
    if ref.dtype == "string" or not ref.shape or ref.size == 0:
        return export_array(ref.read(), path)
    src_dt = numpy_dtype(ref.dtype)
    dt = npy_dtype(src_dt) or src_dt
    tmp = path.with_name(path.name + ".part")
    total, done = ref.size, 0
    try:
        mm = np.lib.format.open_memmap(tmp, mode="w+", dtype=dt, shape=tuple(ref.shape))
        try:
            for key, n in iter_chunks(tuple(ref.shape), CHUNK):
                handle.check_cancelled()
                mm[key] = ref.read(key).astype(dt, copy=False)
                done += n
                handle.progress(done, total, "export")
            mm.flush()
        finally:
            del mm
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    return Exported(path, tuple(ref.shape), str(dt), "" if dt == src_dt else ref.dtype)
