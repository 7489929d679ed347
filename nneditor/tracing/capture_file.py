"""One capture file per trace: ``values.safetensors``, written while the run produces values.

Creating one file per value cost more than the run itself on a model with hundreds of values
(861 files for an OCR recognizer), so captures share one file in the safetensors layout: an
8-byte little-endian header length, a JSON header mapping each name to dtype, shape and
``data_offsets`` (relative to the end of the header), then the data. Any safetensors reader
(``safetensors.numpy.load_file``) and NNEditor itself open it; the manifest keeps the absolute
``offset`` of each value so NNEditor maps one value without parsing the header.

The safetensors library writes whole dicts of arrays at once; captures arrive one by one, from
writer threads, and must not be held in memory, hence this writer:

- The header's size is reserved before the first value (from the registered names, generously;
  safetensors allows the header to be padded with spaces). Values are appended in the order
  they are allocated, with no holes (the layout forbids them), and written with ``os.pwrite`` (seek + write under a lock where
  there is none: Windows)
  at their own offsets, so threads write in parallel without sharing a file position.
- :meth:`CaptureFile.finish` writes the header. If it outgrew the reservation (late values with
  long names or many dimensions), the data is moved once behind a larger header; the offsets
  recorded in the manifest are updated by the caller from :meth:`CaptureFile.finish`'s result.
- Arrays safetensors cannot describe (strings, complex numbers, big-endian data) are not
  accepted (:func:`st_dtype` returns None); the store writes those as separate ``.npy`` files.

Reading (:func:`read_value`) is shared by every consumer of a trace folder (window, CLI, diff,
scripts): a record with ``offset`` is a slice of the container, one without is a ``.npy``.
"""

from __future__ import annotations

import contextlib
import json
import os
import struct
import threading
from pathlib import Path
from typing import Any

import numpy as np

CONTAINER = "values.safetensors"

_ST_DTYPES = {
    "bool": "BOOL",
    "uint8": "U8",
    "int8": "I8",
    "uint16": "U16",
    "int16": "I16",
    "uint32": "U32",
    "int32": "I32",
    "uint64": "U64",
    "int64": "I64",
    "float16": "F16",
    "float32": "F32",
    "float64": "F64",
}
#: Per value: the JSON around name, dtype, shape and two offsets, with room for 8 dimensions.
_ENTRY_RESERVE = 160
_MIN_RESERVE = 4096


def st_dtype(arr: np.ndarray) -> str | None:
    """The safetensors dtype code of ``arr``, or None when the layout cannot hold it."""
    dt = arr.dtype
    if dt.byteorder == ">" or (dt.byteorder == "=" and not _LITTLE):
        return None
    return _ST_DTYPES.get(dt.name)


_LITTLE = np.little_endian
_HAS_PWRITE = hasattr(os, "pwrite") and hasattr(os, "pread")


class CaptureFile:
    """Appends arrays to one safetensors-layout file; thread-safe allocation."""

    def __init__(self, path: Path, names: list[str]) -> None:
        self.path = path
        reserve = sum(len(json.dumps(n)) + _ENTRY_RESERVE for n in names)
        reserve = max(_MIN_RESERVE, reserve + reserve // 4)
        self.reserve = (reserve + 63) // 64 * 64 - 8  # data starts 64-byte aligned
        # O_BINARY: Windows would translate newlines in a file opened without it
        flags = os.O_RDWR | os.O_CREAT | os.O_TRUNC | getattr(os, "O_BINARY", 0)
        self._fd = os.open(path, flags, 0o644)
        self._end = 0  # data bytes allocated so far
        self._entries: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._io_lock = threading.Lock()

    @property
    def data_start(self) -> int:
        return 8 + self.reserve

    def allocate(self, name: str, arr: np.ndarray) -> int:
        """Reserve room for ``arr`` (a dtype :func:`st_dtype` accepts); the absolute offset."""
        code = st_dtype(arr)
        if code is None:
            raise ValueError(f"{arr.dtype} cannot be stored in a safetensors file")
        n = int(arr.nbytes)
        with self._lock:
            start = self._end
            self._end += n
            self._entries[name] = {
                "dtype": code,
                "shape": [int(d) for d in arr.shape],
                "data_offsets": [start, start + n],
            }
        return self.data_start + start

    def write(self, offset: int, arr: np.ndarray, chunk_bytes: int) -> None:
        """Write a C-contiguous ``arr`` at ``offset`` (from :meth:`allocate`), in chunks."""
        if arr.size == 0:
            return
        raw = memoryview(arr.reshape(-1).view(np.uint8).data)
        step = max(int(chunk_bytes), 1)
        for start in range(0, len(raw), step):
            part = raw[start : start + step]
            done = 0
            while done < len(part):  # pwrite may write less than asked (signals, quotas)
                done += self._pwrite(part[done:], offset + start + done)

    def finish(self) -> int:
        """Write the header and close; returns how far every offset moved (0 normally)."""
        with self._lock:
            header = dict(self._entries)
        header["__metadata__"] = {"format": "nneditor-trace-values"}
        text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        try:
            if len(text) <= self.reserve:
                self._pwrite_all(
                    struct.pack("<Q", self.reserve) + text.ljust(self.reserve, b" "), 0
                )
                os.ftruncate(self._fd, self.data_start + self._end)
                return 0
            return self._grow(text)
        finally:
            self.abort()

    def _pwrite(self, data: memoryview | bytes, offset: int) -> int:
        if _HAS_PWRITE:
            return os.pwrite(self._fd, data, offset)
        with self._io_lock:  # Windows has no pwrite: seek and write under one lock
            os.lseek(self._fd, offset, os.SEEK_SET)
            return os.write(self._fd, data)

    def _pwrite_all(self, data: bytes, offset: int) -> None:
        done = 0
        while done < len(data):
            done += self._pwrite(memoryview(data)[done:], offset + done)

    def _pread(self, size: int, offset: int) -> bytes:
        if _HAS_PWRITE:
            return os.pread(self._fd, size, offset)
        with self._io_lock:
            os.lseek(self._fd, offset, os.SEEK_SET)
            return os.read(self._fd, size)

    def abort(self) -> None:
        fd, self._fd = self._fd, -1
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)

    def _grow(self, text: bytes) -> int:
        """Move the data behind a header larger than the reservation (rare: one extra copy)."""
        size = (8 + len(text) + 63) // 64 * 64 - 8
        tmp = self.path.with_name(self.path.name + ".part")
        with open(tmp, "wb") as out:
            out.write(struct.pack("<Q", size))
            out.write(text.ljust(size, b" "))
            pos, end, step = self.data_start, self.data_start + self._end, 16 * 2**20
            while pos < end:
                block = self._pread(min(step, end - pos), pos)
                if not block:
                    raise OSError(f"{self.path} ended early while its header was rewritten")
                out.write(block)
                pos += len(block)
        self.abort()  # closed first: Windows cannot replace a file that is open
        os.replace(tmp, self.path)
        return size - self.reserve


class CaptureReadError(Exception):
    """A capture cannot be read; the message is a sentence naming the file."""


def read_value(folder: Path, rec: dict[str, Any], mmap: bool = True) -> np.ndarray:
    """The stored array of a manifest record (memory-mapped unless ``mmap`` is False).

    A flat prefix for a partial capture (``stored_shape``); widened dtypes come back widened
    (``stored_dtype``). The file must lie inside ``folder``."""
    rel = rec.get("file")
    if not rel or rec.get("status") not in ("captured", "partial"):
        why = rec.get("reason") or "it was not captured"
        raise CaptureReadError(f"{rec.get('name')!r} has no captured values: {why}")
    path = (folder / str(rel)).resolve()
    if folder.resolve() not in path.parents:
        raise CaptureReadError(f"the manifest of {folder} names a file outside the trace: {rel}")
    try:
        if "offset" not in rec:
            return np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)
        dtype = np.dtype(str(rec.get("stored_dtype") or rec["dtype"]))
        shape = tuple(int(d) for d in (rec.get("stored_shape") or rec["shape"]))
        offset = int(rec["offset"])
        count = int(np.prod(shape, dtype=np.int64))
        if offset + count * dtype.itemsize > path.stat().st_size:
            raise CaptureReadError(
                f"the capture file {path} is shorter than the manifest says (value "
                f"{rec.get('name')!r}); the trace was damaged or is still being written"
            )
        if count == 0:
            return np.zeros(shape, dtype)
        if mmap:
            return np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=shape)
        with open(path, "rb") as fh:
            fh.seek(offset)
            return np.fromfile(fh, dtype=dtype, count=count).reshape(shape)
    except CaptureReadError:
        raise
    except (OSError, ValueError, TypeError, KeyError) as exc:
        raise CaptureReadError(f"the capture file {path} cannot be read ({exc})") from None
