"""Artifact identity: a cheap fingerprint at open, a full SHA-256 as a background job.

The fast identity (size, mtime, sampled BLAKE2 fingerprint of up to 16 spread 64 KiB windows)
is cheap for a 30 GB file and good enough to key caches and recovery journals; the full
SHA-256 is what revisions and exports record, computed by :func:`sha256_job`.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from nneditor.io.source import ByteSource
from nneditor.jobs import JobHandle

_WINDOW = 64 * 1024
_WINDOWS = 16


@dataclass(frozen=True, slots=True)
class Identity:
    size: int
    mtime_ns: int
    fingerprint: str

    def as_dict(self) -> dict[str, object]:
        return {"size": self.size, "mtime_ns": self.mtime_ns, "fingerprint": self.fingerprint}


def fast_identity(source: ByteSource, mtime_ns: int = 0) -> Identity:
    """Hash the size and a few evenly spread windows of the source."""
    h = hashlib.blake2b(digest_size=16)
    h.update(source.size.to_bytes(8, "little"))
    if source.size <= _WINDOW * _WINDOWS:
        h.update(source.view(0, source.size))
    else:
        step = (source.size - _WINDOW) // (_WINDOWS - 1)
        for i in range(_WINDOWS):
            h.update(source.view(i * step, _WINDOW))
    return Identity(source.size, mtime_ns, h.hexdigest())


def folder_identity(paths: list[Path]) -> Identity:
    """Identity of a folder artifact from its member files' sizes, mtimes and names."""
    h = hashlib.blake2b(digest_size=16)
    total = 0
    latest = 0
    for p in sorted(paths):
        st = os.stat(p)
        total += st.st_size
        latest = max(latest, st.st_mtime_ns)
        h.update(f"{p.name}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
    return Identity(total, latest, h.hexdigest())


def sha256_job(source: ByteSource, handle: JobHandle, chunk: int = 8 * 1024 * 1024) -> str:
    """Full SHA-256 of a source, reporting progress and honouring cancellation."""
    h = hashlib.sha256()
    done = 0
    while done < source.size:
        handle.check_cancelled()
        n = min(chunk, source.size - done)
        h.update(source.view(done, n))
        source.release(done, n)  # keep resident memory flat while hashing a large file
        done += n
        handle.progress(done, source.size)
    return h.hexdigest()
