"""Byte sources with bounded range reads.

A :class:`ByteSource` is a read-only window of bytes: a whole file (memory-mapped), a range of
another source (a stored zip member, a tensor's data), or bytes in memory (tests, decompressed
members). Readers only ever ask for ranges; they never read a whole file at once.

Invariants:
- A source never writes to the underlying file (maps are opened read-only).
- ``read``/``view`` refuse ranges outside ``[0, size)`` with an :class:`ArtifactError` naming
  the offset, so a length field pointing past the end cannot cause a huge allocation.
"""

from __future__ import annotations

import contextlib
import mmap
import os
from pathlib import Path

from nneditor.errors import ArtifactError

#: reads up to this size copy through the file descriptor (``pread``) instead of the map: one
#: touched page of a mapping makes the kernel map its cached neighbours too (fault-around), so
#: thousands of scalar constants spread through a 1.5 GB model would add ~100 MB of resident
#: file pages
SMALL_READ = 4096


class ByteSource:
    """Abstract read-only byte range."""

    size: int
    path: Path | None
    label: str

    def view(self, offset: int, length: int) -> memoryview:
        """Zero-copy view of ``length`` bytes at ``offset`` (bounds-checked)."""
        raise NotImplementedError

    def read(self, offset: int, length: int) -> bytes:
        """Copy of ``length`` bytes at ``offset`` (bounds-checked)."""
        return bytes(self.view(offset, length))

    def check_range(self, offset: int, length: int, what: str = "data") -> None:
        if offset < 0 or length < 0 or offset + length > self.size:
            raise ArtifactError(
                f"{what} of {length} bytes at offset {offset} runs past the end of the "
                f"{self.size}-byte file; the file is truncated or corrupt",
                path=self.label,
                offset=offset,
            )

    def sub(self, offset: int, length: int, label: str | None = None) -> SubSource:
        self.check_range(offset, length)
        return SubSource(self, offset, length, label)

    def close(self) -> None:  # pragma: no cover - default no-op
        pass

    def release(self, offset: int, length: int) -> None:
        """Hint that ``[offset, offset + length)`` is not needed soon. Memory-mapped files drop
        those pages from this process's resident set (the OS page cache keeps them and a later
        read maps them again); other sources ignore it. Used by streaming jobs."""


class MemorySource(ByteSource):
    """Bytes held in memory (tests, small decompressed zip members)."""

    def __init__(self, data: bytes | bytearray | memoryview, label: str = "<memory>") -> None:
        self._data = memoryview(data).cast("B") if not isinstance(data, bytes) else memoryview(data)
        self.size = len(self._data)
        self.path = None
        self.label = label

    def view(self, offset: int, length: int) -> memoryview:
        self.check_range(offset, length)
        return self._data[offset : offset + length]


class FileSource(ByteSource):
    """A whole file, memory-mapped read-only. Empty files are supported (no map)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.label = str(path)
        self._fh = open(self.path, "rb")  # noqa: SIM115 - kept open for the map's lifetime
        try:
            st = os.fstat(self._fh.fileno())
            self.size = st.st_size
            self.mtime_ns = st.st_mtime_ns
            self._map: mmap.mmap | None = None
            self._mv: memoryview | None = None
            if self.size:
                self._map = mmap.mmap(self._fh.fileno(), 0, access=mmap.ACCESS_READ)
                self._mv = memoryview(self._map)
        except Exception:
            self._fh.close()
            raise

    def view(self, offset: int, length: int) -> memoryview:
        self.check_range(offset, length)
        if self._mv is None:
            if length and self._fh.closed:
                raise ValueError(f"{self.label} was closed; reopen the document to read it")
            return memoryview(b"")
        return self._mv[offset : offset + length]

    def read(self, offset: int, length: int) -> bytes:
        if length > SMALL_READ or not hasattr(os, "pread") or self._fh.closed:
            return bytes(self.view(offset, length))
        self.check_range(offset, length)
        data = os.pread(self._fh.fileno(), length, offset)
        return data if len(data) == length else bytes(self.view(offset, length))

    def release(self, offset: int, length: int) -> None:
        if self._map is None or not hasattr(mmap, "MADV_DONTNEED"):
            return
        page = mmap.PAGESIZE
        start = -(-max(0, offset) // page) * page
        end = min(self.size, offset + length) // page * page
        if end > start:
            self._map.madvise(mmap.MADV_DONTNEED, start, end - start)

    def close(self) -> None:
        # Views handed out keep the map alive; closing is best effort.
        self._mv = None
        if self._map is not None:
            with contextlib.suppress(BufferError):  # a live numpy view still uses it
                self._map.close()
            self._map = None
        self._fh.close()


class SubSource(ByteSource):
    """A byte range of another source (e.g. a stored zip member or a tensor's bytes)."""

    def __init__(
        self, parent: ByteSource, offset: int, length: int, label: str | None = None
    ) -> None:
        parent.check_range(offset, length)
        self.parent = parent
        self.base = offset
        self.size = length
        self.path = parent.path
        self.label = label or parent.label

    def view(self, offset: int, length: int) -> memoryview:
        self.check_range(offset, length)
        return self.parent.view(self.base + offset, length)

    def read(self, offset: int, length: int) -> bytes:
        self.check_range(offset, length)
        return self.parent.read(self.base + offset, length)

    def release(self, offset: int, length: int) -> None:
        start, end = max(0, offset), min(self.size, offset + length)
        if end > start:
            self.parent.release(self.base + start, end - start)

    def absolute_offset(self, offset: int) -> int:
        """Offset in the outermost file, for display and hex views."""
        parent = self.parent
        if isinstance(parent, SubSource):
            return parent.absolute_offset(self.base + offset)
        return self.base + offset


def is_file(path: Path) -> bool:
    """``path.is_file()``, but False where the name cannot even be looked up: an index or a
    manifest can name a file longer than the file system allows ("File name too long")."""
    try:
        return path.is_file()
    except OSError:
        return False


def open_source(path: str | os.PathLike[str]) -> FileSource:
    """Open a file as a memory-mapped source, with a readable error if it cannot be read."""
    p = Path(path)
    try:
        if not p.exists():
            raise ArtifactError("no such file or folder", path=str(p), hint="check the path")
        if p.is_dir():
            raise ArtifactError("is a folder, not a file", path=str(p))
        return FileSource(p)
    except PermissionError as exc:
        raise ArtifactError("permission denied", path=str(p)) from exc
    except OSError as exc:
        raise ArtifactError(f"cannot be read ({exc.strerror})", path=str(p)) from exc
