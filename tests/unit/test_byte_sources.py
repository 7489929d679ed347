"""Byte sources: small reads copy through the file descriptor, large ones view the map; both
give the file's bytes, bounds-checked, through sub-ranges too."""

from __future__ import annotations

import mmap
import os

import numpy as np
import pytest

from nneditor.errors import ArtifactError
from nneditor.io.source import SMALL_READ, open_source


@pytest.fixture
def data_file(tmp_path):  # noqa: ANN001, ANN201
    data = np.random.default_rng(3).integers(0, 256, 3 * mmap.PAGESIZE + 123, dtype=np.uint8)
    path = tmp_path / "blob.bin"
    path.write_bytes(data.tobytes())
    return path, data.tobytes()


@pytest.mark.parametrize(
    ("offset", "length"),
    [(0, 1), (7, 4), (mmap.PAGESIZE - 3, 9), (100, SMALL_READ), (5, SMALL_READ + 1), (0, 0)],
)
def test_reads_equal_the_files_bytes(data_file, offset: int, length: int) -> None:  # noqa: ANN001
    path, data = data_file
    src = open_source(path)
    try:
        assert src.read(offset, length) == data[offset : offset + length]
        sub = src.sub(50, 2 * mmap.PAGESIZE)
        assert (
            sub.read(offset // 2, length // 2)
            == data[50 + offset // 2 : 50 + offset // 2 + length // 2]
        )
    finally:
        src.close()


def test_reads_past_the_end_are_refused(data_file) -> None:  # noqa: ANN001
    path, data = data_file
    src = open_source(path)
    try:
        with pytest.raises(ArtifactError, match="runs past the end"):
            src.read(len(data) - 2, 3)
        with pytest.raises(ArtifactError, match="runs past the end"):
            src.sub(0, 10).read(8, 3)
    finally:
        src.close()


def _mapped_kib(path) -> int:  # noqa: ANN001
    """Resident KiB of this process's mappings of ``path`` (Linux /proc/self/smaps)."""
    total, inside = 0, False
    with open("/proc/self/smaps") as fh:
        for line in fh:
            head = line.split()
            if "-" in head[0] and len(head) >= 5:  # a mapping's header line
                inside = line.rstrip().endswith(str(path))
            elif inside and head[0] == "Rss:":
                total += int(head[1])
    return total


@pytest.mark.skipif(
    not (hasattr(os, "pread") and os.path.exists("/proc/self/smaps")), reason="Linux only"
)
def test_small_reads_leave_the_maps_pages_unmapped(tmp_path) -> None:  # noqa: ANN001
    """Scalars spread through a large model must not pull the map's pages into the resident
    set (fault-around maps 64 KiB or more per touched page); viewing them does (the control)."""
    path = tmp_path / "big.bin"
    path.write_bytes(os.urandom(32 << 20))  # in the page cache after writing
    src = open_source(path)
    try:
        step = (32 << 20) // 256
        for i in range(256):
            src.read(i * step + 5, 8)
        assert _mapped_kib(path) < 64
        for i in range(256):
            bytes(src.view(i * step + 5, 8))
        assert _mapped_kib(path) > 1024
    finally:
        src.close()
