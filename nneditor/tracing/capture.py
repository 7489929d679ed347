"""The capture store: every value in one ``values.safetensors`` (see :mod:`capture_file`) plus
manifest.json, within a byte budget; ``layout="npy"`` writes one .npy per value instead.

Invariants:

- Values are written in chunks of ``chunk_bytes`` by a few writer threads (file creation and
  page-cache copies overlap); at most ``2 x writers`` writes are in flight, and a value's array
  is released as soon as its file is written, so memory does not grow with the captures.
  :meth:`flush` waits for every write and re-raises the first failure (the run then fails).
- The budget counts array data bytes. A value that fits is "captured"; the first value that
  does not fit is stored as a flat (C-order) prefix of whole elements, status "partial", with
  its original shape in the record; every later value is "dropped" with the reason. A budget
  hit makes the whole trace partial, and the manifest says so.
- Every registered value appears in the manifest exactly once, with status captured, partial
  or dropped and a reason for anything not fully captured.
- Values numpy cannot store without pickle (ml_dtypes floats, sub-byte ints, strings) are
  widened to float32 / int8 / uint8 / unicode and the record names the original dtype.
- A record of a value in the container has ``file`` = ``values.safetensors`` and the absolute
  byte ``offset`` of its data; values the container cannot hold (strings, complex numbers) get
  their own .npy under ``values/``; a graph input refers to its file under ``inputs/``.
  Readers go through :func:`capture_file.read_value`.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from nneditor.tracing.capture_file import CONTAINER, CaptureFile, read_value, st_dtype


@dataclass(frozen=True)
class ValueEntry:
    """One value a trace may capture (listed by the backend's reader of the model)."""

    name: str
    scope: str  # "" for the main graph, else "node/attr" path of the subgraph
    producer: str  # node name ("" for graph inputs)
    op_type: str  # producing op ("" for graph inputs)
    in_loop: bool = False  # inside a Loop/Scan body: one value per iteration


LAYOUTS = ("container", "npy")
VALUES_DIR = "values"
MANIFEST = "manifest.json"
SUBGRAPH_REASON = "not captured: inside a subgraph"
LOOP_REASON = "not captured: inside a subgraph (a Loop/Scan body computes it once per iteration)"
BRANCH_REASON = "not computed in this run: inside an If branch that did not run"


def storable(arr: np.ndarray) -> tuple[np.ndarray, str | None]:
    """``arr`` in a dtype .npy holds without pickle, and the original dtype name if widened."""
    dt = arr.dtype
    if dt.kind == "O":
        flat = [
            x.decode("utf-8", "replace") if isinstance(x, bytes) else str(x)
            for x in arr.reshape(-1)
        ]
        return np.array(flat, dtype=str).reshape(arr.shape), "string"
    if (
        dt.kind == "V"
        or type(dt).__module__.startswith("ml_dtypes")
        or dt.type.__module__.startswith("ml_dtypes")
    ):
        name = dt.name
        if "int" in name:
            return arr.astype(np.uint8 if name.startswith("u") else np.int8), name
        return arr.astype(np.float32), name
    return arr, None


def write_npy(path: Path, arr: np.ndarray, chunk_bytes: int) -> None:
    """Write a C-ordered array as .npy in chunks (no full extra copy for contiguous input)."""
    arr = arr if arr.flags.c_contiguous else arr.copy(order="C")
    header = np.lib.format.header_data_from_array_1_0(arr)
    with open(path, "wb") as fh:
        try:
            np.lib.format.write_array_header_1_0(fh, header)
        except ValueError:  # header too long for format 1.0
            fh.seek(0)
            fh.truncate()
            np.lib.format.write_array_header_2_0(fh, header)
        if arr.size == 0 or arr.dtype.itemsize == 0:
            return
        raw = memoryview(arr.reshape(-1).view(np.uint8).data)
        step = max(int(chunk_bytes), 1)
        for start in range(0, len(raw), step):
            fh.write(raw[start : start + step])


class CaptureStore:
    """Writes captures under ``root/values`` and the manifest under ``root``."""

    def __init__(
        self,
        root: Path,
        budget_bytes: int,
        chunk_bytes: int,
        on_written: Callable[[int, int], None] | None = None,
        writers: int = 2,
        layout: str = "container",
    ) -> None:
        if layout not in LAYOUTS:
            raise ValueError(f"unknown capture layout {layout!r}; expected one of {LAYOUTS}")
        self.root = root
        self.layout = layout
        self._container: CaptureFile | None = None
        (root / VALUES_DIR).mkdir(parents=True, exist_ok=True)
        self.budget = int(budget_bytes)
        self.remaining = int(budget_bytes)
        self.chunk = int(chunk_bytes)
        self.budget_hit = False
        self.records: dict[str, dict[str, Any]] = {}
        self._on_written = on_written
        self._done = 0
        self.write_s = 0.0
        self._pool = ThreadPoolExecutor(writers, "capture-writer") if writers > 0 else None
        self._slots = threading.BoundedSemaphore(max(2 * writers, 1))
        self._futures: list[Future[None]] = []
        self._lock = threading.Lock()

    def register(self, name: str, scope: str = "", producer: str = "", op_type: str = "") -> None:
        """Announce a value (in manifest order) before it is produced."""
        if name in self.records:
            return
        self.records[name] = {
            "index": len(self.records),
            "name": name,
            "dtype": None,
            "shape": None,
            "status": "pending",
            "file": None,
            "reason": "",
            "bytes": 0,
            "graph": scope,
            "producer": producer,
            "op_type": op_type,
        }

    @property
    def pending(self) -> list[str]:
        return [n for n, r in self.records.items() if r["status"] == "pending"]

    def write(self, name: str, value: Any, same_as: Path | None = None) -> dict[str, Any]:
        """Store one produced value (honouring the budget) and return its record.

        ``same_as``: a .npy file in the run folder already holding exactly ``value`` (a graph
        input's file); a full capture then refers to it (``layout="npy"``: a hard link to it,
        a copy where the file system has no links) instead of writing the bytes again."""
        rec = self.records.get(name) or self._register_late(name)
        if not isinstance(value, np.ndarray):
            kind = type(value).__name__
            reason = f"not captured: a {kind} value (only tensors are stored)"
            if rec.get("op_type") == "ZipMap":  # scikit-learn converters' label -> score maps
                reason += "; ZipMap only pairs its input's scores with labels, and that tensor is captured"
            return self._drop(rec, reason)
        arr, widened = storable(value)
        rec["dtype"] = str(value.dtype) if widened is None else widened
        rec["shape"] = list(value.shape)
        if widened:
            rec["stored_dtype"] = str(arr.dtype)
        if self.budget_hit:
            return self._drop(rec, self._budget_reason())
        nbytes = int(arr.nbytes)
        if nbytes <= self.remaining:
            self._store(rec, arr, "captured", same_as if widened is None else None)
            self.remaining -= nbytes
            return rec
        count = self.remaining // max(arr.dtype.itemsize, 1)
        self.budget_hit = True
        if count <= 0:
            return self._drop(rec, self._budget_reason())
        prefix = np.ascontiguousarray(arr).reshape(-1)[:count]
        self._store(rec, prefix, "partial")
        rec["stored_shape"] = [int(count)]
        rec["reason"] = (
            f"capture budget of {self.budget / 2**20:g} MB reached: the first {count} of "
            f"{arr.size} elements are stored as a flat prefix"
        )
        self.remaining -= int(prefix.nbytes)
        return rec

    def drop(
        self, name: str, reason: str, dtype: str | None = None, shape: list[int] | None = None
    ) -> None:
        rec = self.records.get(name) or self._register_late(name)
        if dtype is not None:
            rec["dtype"] = dtype
        if shape is not None:
            rec["shape"] = shape
        self._drop(rec, reason)

    def finish_pending(self, reason: str) -> None:
        for name in self.pending:
            self._drop(self.records[name], reason)

    def _register_late(self, name: str) -> dict[str, Any]:
        self.register(name)
        return self.records[name]

    def _budget_reason(self) -> str:
        return f"capture budget of {self.budget / 2**20:g} MB reached; not stored"

    def _drop(self, rec: dict[str, Any], reason: str) -> dict[str, Any]:
        rec["status"] = "dropped"
        rec["reason"] = reason
        self._progress()
        return rec

    def _store(
        self, rec: dict[str, Any], arr: np.ndarray, status: str, same_as: Path | None = None
    ) -> None:
        rec.update(status=status, bytes=int(arr.nbytes))
        if same_as is not None and self._refer(rec, same_as):
            return
        arr = arr if arr.flags.c_contiguous else np.ascontiguousarray(arr)
        if self.layout == "container" and st_dtype(arr) is not None:
            if self._container is None:
                self._container = CaptureFile(self.root / CONTAINER, list(self.records))
            offset = self._container.allocate(rec["name"], arr)
            rec.update(file=CONTAINER, offset=offset)
            container = self._container
            self._submit(lambda: container.write(offset, arr, self.chunk))
            return
        fname = f"{VALUES_DIR}/{npy_name(rec)}"
        rec["file"] = fname
        path = self.root / fname
        self._submit(lambda: write_npy(path, arr, self.chunk))

    def _refer(self, rec: dict[str, Any], same_as: Path) -> bool:
        """Point ``rec`` at an existing file of the run instead of writing (False: write)."""
        if self.layout == "container":
            try:
                rec["file"] = same_as.resolve().relative_to(self.root.resolve()).as_posix()
            except ValueError:
                return False
            self._progress()
            return True
        fname = f"{VALUES_DIR}/{npy_name(rec)}"
        try:
            os.link(same_as, self.root / fname)
        except OSError:
            return False  # no hard links here: write the value like any other
        rec["file"] = fname
        self._progress()
        return True

    def _submit(self, write: Callable[[], None]) -> None:
        if self._pool is None:
            self._timed(write)
        else:
            self._slots.acquire()  # bounds the arrays held by pending writes
            self._futures.append(self._pool.submit(self._timed, write))

    def _timed(self, write: Callable[[], None]) -> None:
        try:
            t0 = time.perf_counter()
            write()
            with self._lock:
                self.write_s += time.perf_counter() - t0
            self._progress()
        finally:
            if self._pool is not None:
                self._slots.release()

    def flush(self) -> None:
        """Wait for every pending write; re-raise the first failure."""
        futures, self._futures = self._futures, []
        for f in futures:
            f.result()

    def close(self) -> None:
        try:
            self.flush()
        finally:
            if self._pool is not None:
                self._pool.shutdown(wait=True)
            if self._container is not None:  # no manifest was written: the run failed
                self._container.abort()
                self._container = None

    def abort(self) -> None:
        """Drop pending writes (the run failed; its folder will be deleted)."""
        self._futures = []
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
        if self._container is not None:
            self._container.abort()
            self._container = None

    def _progress(self) -> None:
        with self._lock:
            self._done += 1
            done = self._done
            if self._on_written:
                self._on_written(done, len(self.records))

    @property
    def captured_bytes(self) -> int:
        return sum(int(r["bytes"]) for r in self.records.values())

    def counts(self) -> dict[str, int]:
        out = {"captured": 0, "partial": 0, "dropped": 0, "pending": 0}
        for r in self.records.values():
            out[r["status"]] = out.get(r["status"], 0) + 1
        return out

    def write_manifest(self, run: dict[str, Any]) -> Path:
        """Write manifest.json (values in registration order plus run info) after every
        pending capture is on disk."""
        self.flush()
        self._finish_container()
        doc = {
            "format": "nneditor-trace",
            "version": 1,
            "partial": self.budget_hit,
            "run": run,
            "counts": self.counts(),
            "captured_bytes": self.captured_bytes,
            "values": list(self.records.values()),
        }
        return dump_manifest(doc, self.root / MANIFEST)

    def _finish_container(self) -> None:
        """Write the container's header; shift the offsets if it had to grow."""
        if self._container is None:
            return
        container, self._container = self._container, None
        shift = container.finish()
        if shift:
            for r in self.records.values():
                if "offset" in r:
                    r["offset"] += shift


def export_npy_files(
    folder: Path,
    chunk_bytes: int = 16 * 2**20,
    dest: Path | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> list[Path]:
    """Write one .npy per stored value of the trace in ``folder`` (for tools that want a file
    per value) into ``dest`` (default ``folder/values``), named ``NNNNN_<name>.npy`` by manifest
    index; a partial capture is its stored flat prefix. Files already in ``dest`` (values the
    container cannot hold) are left as they are; the manifest is not changed. ``progress(done,
    total)`` after each value."""
    doc = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    dest = folder / VALUES_DIR if dest is None else dest
    dest.mkdir(parents=True, exist_ok=True)
    stored = [r for r in doc.get("values", []) if r.get("status") in ("captured", "partial")]
    written: list[Path] = []
    for n, rec in enumerate(stored, 1):
        path = dest / npy_name(rec)
        source = (folder / str(rec.get("file") or "")).resolve()
        if source != path.resolve():
            write_npy(path, np.ascontiguousarray(read_value(folder, rec)), chunk_bytes)
        written.append(path)
        if progress is not None:
            progress(n, len(stored))
    return written


def dump_manifest(doc: dict[str, Any], path: Path) -> Path:
    """Write a manifest atomically: one value per line (readable, and encoded by json's C
    encoder; an indented dump of thousands of values is many times slower)."""
    head = {k: v for k, v in doc.items() if k != "values"}
    lines = [_ENCODER.encode(v) for v in doc.get("values", [])]
    _replace_text(path, _head_line(head) + '\n"values": [\n' + ",\n".join(lines) + "\n]}\n")
    return path


def patch_manifest_head(path: Path, text: str, updates: dict[str, Any]) -> None:
    """Rewrite the head of a manifest written by :func:`dump_manifest` (its first line: every
    key but ``values``; JSON escapes keep newlines out of it) with ``updates``; the value lines
    are copied unchanged. Atomic, like :func:`dump_manifest`."""
    cut = text.index("\n")
    head = json.loads(text[: cut - 1] + "}")
    head.update(updates)
    _replace_text(path, _head_line(head) + text[cut:])


_ENCODER = json.JSONEncoder(allow_nan=False, default=str, ensure_ascii=False)


def _head_line(head: dict[str, Any]) -> str:
    """The manifest's first line: the head object left open for the values that follow."""
    return _ENCODER.encode(head)[:-1] + ","


def _replace_text(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".part")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def npy_name(rec: dict[str, Any]) -> str:
    """The file name of a value's own .npy: manifest index, then a file-safe form of its name."""
    return f"{rec['index']:05d}_{_safe(rec['name'])}.npy"


def _safe(name: str) -> str:
    return (re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "value")[:80]
