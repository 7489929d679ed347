"""What an approval is bound to: model identity, inputs digest and tracer identity.

Invariants:

- ``inputs_digest`` is SHA-256 over, for every input in name order: the name, the dtype in
  little-endian form, the shape, and the C-order little-endian bytes. Equal digests mean
  equal feeds, whatever the arrays' memory layout.
- ``model_identity`` is recomputed from the files on disk (fast identity of the model plus size
  and mtime of every external-data file it names), never trusted from a cached document.
- The tracer identity names the backend, its library version and a fingerprint of NNEditor's
  tracing code, so upgrading either invalidates earlier approvals.
"""

from __future__ import annotations

import functools
import hashlib
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from nneditor.io.identity import fast_identity, folder_identity
from nneditor.io.source import open_source

_CHUNK = 16 * 1024 * 1024


def inputs_digest(arrays: Mapping[str, np.ndarray]) -> str:
    """SHA-256 over names, dtypes, shapes and bytes of a feed (see module invariants)."""
    h = hashlib.sha256()
    for name in sorted(arrays):
        arr = arrays[name]
        le = arr.dtype.newbyteorder("<") if arr.dtype.byteorder not in ("|", "=") else arr.dtype
        h.update(f"{name}\0{le.str}\0{list(arr.shape)}\0".encode())
        flat = np.ascontiguousarray(arr, dtype=le).reshape(-1)
        raw = flat.view(np.uint8) if flat.dtype.itemsize else flat
        for start in range(0, raw.size, _CHUNK):
            h.update(raw[start : start + _CHUNK].tobytes())
    return h.hexdigest()


@dataclass(frozen=True)
class ModelIdentity:
    """The model's files as they are on disk now."""

    path: str
    size: int
    mtime_ns: int
    fingerprint: str
    external: tuple[tuple[str, int, int], ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "size": self.size,
            "mtime_ns": self.mtime_ns,
            "fingerprint": self.fingerprint,
            "external": [list(e) for e in self.external],
        }

    def token(self) -> str:
        ext = ";".join(f"{n}:{s}:{m}" for n, s, m in self.external)
        return f"{self.size}:{self.mtime_ns}:{self.fingerprint}|{ext}"


def model_identity(path: str | os.PathLike[str], external: Iterable[str] = ()) -> ModelIdentity:
    """Identity of a model file and the external-data files (relative to its folder), or of a
    folder artifact (a Hugging Face snapshot) from the files directly inside it."""
    p = Path(path).resolve()
    if p.is_dir():
        folder = folder_identity([f for f in p.iterdir() if f.is_file()])
        return ModelIdentity(str(p), folder.size, folder.mtime_ns, folder.fingerprint)
    src = open_source(p)
    try:
        st = os.stat(p)
        ident = fast_identity(src, st.st_mtime_ns)
    finally:
        src.close()
    ext = []
    for name in sorted(set(external)):
        try:
            est = os.stat(p.parent / name)
            ext.append((name, est.st_size, est.st_mtime_ns))
        except OSError:
            ext.append((name, -1, -1))
    return ModelIdentity(str(p), ident.size, ident.mtime_ns, ident.fingerprint, tuple(ext))


@functools.cache
def code_fingerprint() -> str:
    """SHA-256 (first 16 hex digits) of NNEditor's tracing and decoder sources."""
    here = Path(__file__).resolve().parent
    h = hashlib.sha256()
    for f in [*sorted(here.glob("*.py")), *sorted((here.parent / "decoder").glob("*.py"))]:
        h.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:16]


@dataclass(frozen=True)
class TracerIdentity:
    """Backend name, the version of the library that runs it and the code fingerprint."""

    backend: str
    version: str
    code: str

    def token(self) -> str:
        return f"{self.backend} {self.version} code {self.code}"

    def as_dict(self) -> dict[str, str]:
        return {"backend": self.backend, "version": self.version, "code": self.code}
