"""External tensor data: resolve, check and lazily verify files next to the model.

ONNX lets a tensor keep its bytes in another file (``data_location = EXTERNAL`` with
``external_data`` entries ``location``, ``offset``, ``length``, ``checksum``).

Invariants:
- A location is resolved only inside the model's folder: absolute paths and ``..`` components
  are refused before the file system is consulted; symlinks resolving outside are refused
  before the target is opened.
- At open, each referenced file is checked to exist and to be long enough for the tensor's
  range (one ``stat`` per file); nothing is read.
- One :class:`LazyFileSource` per external file is registered in ``Document.sources``; it maps
  the file on the first read only.
- A ``checksum`` (SHA-1 hex) is verified before the first read of the tensor. The ONNX spec
  describes it as the digest of the file; writers in the wild also use the digest of the
  tensor's own bytes, so either digest is accepted.
- Problems never fail the open: the tensor becomes unreadable and its read raises
  :class:`ArtifactError` with the sentence, which also goes to ``Document.notes``.
"""

from __future__ import annotations

import hashlib
import os
import threading
from dataclasses import dataclass
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import TYPE_CHECKING

from nneditor.errors import ArtifactError
from nneditor.io.source import ByteSource, FileSource
from nneditor.tensors.dtypes import stored_nbytes
from nneditor.tensors.loaders import TensorLoader
from nneditor.tensors.slicing import Key

if TYPE_CHECKING:
    import numpy as np
else:
    from nneditor.platform.lazy_numpy import np

_HASH_CHUNK = 16 * 1024 * 1024


class LazyFileSource(ByteSource):
    """A file that is memory-mapped on first use; its size is known from ``stat`` at open."""

    def __init__(self, path: Path, size: int, mtime_ns: int) -> None:
        self.path = path
        self._file = path
        self.label = str(path)
        self.size = size
        self.mtime_ns = mtime_ns
        self._inner: FileSource | None = None
        self._lock = threading.Lock()
        self.file_sha1: str | None = None

    def _open(self) -> FileSource:
        with self._lock:
            if self._inner is None:
                try:
                    inner = FileSource(self._file)
                except OSError as exc:
                    raise ArtifactError(
                        f"external data file cannot be read ({exc.strerror})", path=self.label
                    ) from exc
                if inner.size != self.size:
                    inner.close()
                    raise ArtifactError(
                        f"external data file changed size since the model was opened "
                        f"({self.size} -> {inner.size} bytes)",
                        path=self.label,
                        hint="reopen the model",
                    )
                self._inner = inner
            return self._inner

    def view(self, offset: int, length: int) -> memoryview:
        self.check_range(offset, length)
        return self._open().view(offset, length)

    def release(self, offset: int, length: int) -> None:
        inner = self._inner
        if inner is not None:
            inner.release(offset, length)

    def close(self) -> None:
        with self._lock:
            if self._inner is not None:
                self._inner.close()
                self._inner = None


@dataclass(slots=True)
class ExternalSpec:
    """Where an external tensor's bytes are, once checked."""

    source: LazyFileSource
    location: str
    offset: int
    length: int
    checksum: str | None


class ExternalData:
    """Resolves ``external_data`` entries against the model folder, one source per file."""

    def __init__(self, model_path: Path, sources: list[ByteSource]) -> None:
        self.base = Path(os.path.abspath(model_path)).parent
        self._base_real = self.base.resolve()
        self._sources = sources
        self._files: dict[Path, LazyFileSource] = {}

    @property
    def files(self) -> list[LazyFileSource]:
        return list(self._files.values())

    def resolve(self, entries: dict[str, str], dtype: str, count: int, label: str) -> ExternalSpec:
        """Check one tensor's external data; raises ArtifactError with the reason."""
        location = entries.get("location", "")
        if not location:
            raise ArtifactError(f"tensor {label!r} is marked external but names no location")
        if dtype == "string":
            raise ArtifactError(f"tensor {label!r}: string tensors cannot use external data")
        source = self._file(location, label)
        offset = _int_entry(entries, "offset", 0, label)
        need = stored_nbytes(dtype, count)
        length = _int_entry(entries, "length", need, label)
        if length != need:
            raise ArtifactError(
                f"tensor {label!r}: the stored bytes do not match the declared shape: "
                f"external data length is {length} bytes but {dtype} x {count} needs {need}"
            )
        if offset + length > source.size:
            raise ArtifactError(
                f"tensor {label!r}: external file {location!r} is {source.size} bytes but the "
                f"tensor needs bytes {offset}..{offset + length}; the file is too short",
                hint="copy the complete external data file next to the model",
            )
        checksum = entries.get("checksum") or None
        return ExternalSpec(source, location, offset, length, checksum)

    def _file(self, location: str, label: str) -> LazyFileSource:
        rel = _safe_relative(location, label)
        candidate = self.base / rel
        real = candidate.resolve()
        if not real.is_relative_to(self._base_real):
            raise ArtifactError(
                f"tensor {label!r}: external data {location!r} resolves outside the model's "
                "folder (through a symbolic link); NNEditor refuses to read it"
            )
        cached = self._files.get(real)
        if cached is not None:
            return cached
        try:
            st = real.stat()
        except OSError:
            raise ArtifactError(
                f"tensor {label!r}: external data file {location!r} is missing",
                hint=f"put it in {self.base}",
            ) from None
        if not real.is_file():
            raise ArtifactError(f"tensor {label!r}: external data {location!r} is not a file")
        source = LazyFileSource(real, st.st_size, st.st_mtime_ns)
        self._files[real] = source
        self._sources.append(source)
        return source


def _safe_relative(location: str, label: str) -> PurePosixPath:
    if "\x00" in location:
        raise ArtifactError(f"tensor {label!r}: external data location contains a NUL byte")
    win = PureWindowsPath(location)
    if location.startswith(("/", "\\")) or win.drive or win.is_absolute():
        raise ArtifactError(
            f"tensor {label!r}: external data location {location!r} is an absolute path; "
            "NNEditor only reads external data inside the model's folder"
        )
    parts = PurePosixPath(location.replace("\\", "/")).parts
    if ".." in parts:
        raise ArtifactError(
            f"tensor {label!r}: external data location {location!r} leaves the model's folder "
            "('..'); NNEditor only reads external data inside the model's folder"
        )
    return PurePosixPath(*parts) if parts else PurePosixPath(".")


def _int_entry(entries: dict[str, str], key: str, default: int, label: str) -> int:
    text = entries.get(key)
    if text is None or text == "":
        return default
    try:
        value = int(text)
    except ValueError:
        raise ArtifactError(
            f"tensor {label!r}: external data {key} {text!r} is not a whole number"
        ) from None
    if value < 0:
        raise ArtifactError(f"tensor {label!r}: external data {key} {value} is negative")
    return value


class ChecksumLoader(TensorLoader):
    """Verifies an external tensor's SHA-1 checksum before delegating its first read."""

    def __init__(self, inner: TensorLoader, spec: ExternalSpec, label: str) -> None:
        self.inner = inner
        self.spec = spec
        self.label = label
        self._verified = False
        self._lock = threading.Lock()

    def read(self, shape: tuple[int, ...], key: Key | None) -> np.ndarray:
        if not self._verified:
            with self._lock:
                if not self._verified:
                    self._verify()
                    self._verified = True
        return self.inner.read(shape, key)

    def _verify(self) -> None:
        expected = (self.spec.checksum or "").strip().lower()
        src = self.spec.source
        if _sha1(src, self.spec.offset, self.spec.length) == expected:
            return
        if src.file_sha1 is None:
            src.file_sha1 = _sha1(src, 0, src.size)
        if src.file_sha1 == expected:
            return
        raise ArtifactError(
            f"tensor {self.label!r}: external data in {self.spec.location!r} does not match "
            f"its SHA-1 checksum {expected}; the file was changed or damaged",
            path=src.label,
        )


def _sha1(source: ByteSource, offset: int, length: int) -> str:
    h = hashlib.sha1(usedforsecurity=False)
    done = 0
    while done < length:
        n = min(_HASH_CHUNK, length - done)
        h.update(source.view(offset + done, n))
        done += n
    return h.hexdigest()
