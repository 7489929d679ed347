"""Trace runs on disk: per-user run folders, their manifests and captured values.

Qt-free. A run folder is what ``TraceRunner`` publishes (``manifest.json`` plus
``values.safetensors``, older runs ``values/*.npy``); desktop runs live under
``data_dir()/traces/<stamp>-<model stem>``.

Invariants:
- Captured values are memory-mapped through ``capture_file.read_value`` (never unpickled);
  nothing reads a whole capture into memory here.
- A partial capture is returned as its stored flat prefix; ``metadata(name)['shape']`` is the
  original shape and ``metadata(name)['partial']`` is True.
- A folder without a readable ``manifest.json`` of format "nneditor-trace" is refused with a
  sentence (``TraceStoreError``), never a traceback.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from nneditor.errors import NNEditorError
from nneditor.platform.dirs import data_dir
from nneditor.tracing.capture_file import CaptureReadError, read_value

TRACES = "traces"
MANIFEST = "manifest.json"


class TraceStoreError(NNEditorError):
    """A trace folder cannot be read."""


def traces_root() -> Path:
    root = data_dir() / TRACES
    root.mkdir(parents=True, exist_ok=True)
    return root


def new_run_dir(model_path: str | Path, root: Path | None = None) -> Path:
    """A fresh, not yet existing folder for the next run of ``model_path``."""
    base = root or traces_root()
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(model_path).stem).strip("._")[:60] or "model"
    stamp = time.strftime("%Y%m%d-%H%M%S")
    k = 1
    while True:
        p = base / (f"{stamp}-{stem}" if k == 1 else f"{stamp}-{stem}-{k}")
        if not p.exists():
            return p
        k += 1


@dataclass
class TraceRun:
    """One published run: its folder, manifest and records keyed by value name."""

    path: Path
    manifest: dict[str, Any]
    records: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def run(self) -> dict[str, Any]:
        return dict(self.manifest.get("run") or {})

    @property
    def model(self) -> str:
        return str(self.run.get("model", ""))

    @property
    def revision(self) -> str:
        """The traced revision: "source" for the file as stored, else an edited revision's id."""
        return str(self.run.get("revision") or "source")

    @property
    def edits_of(self) -> str:
        """For a traced edited revision, the file its edits apply to ("" otherwise)."""
        return str(self.run.get("edits_of") or "")

    @property
    def partial(self) -> bool:
        return bool(self.manifest.get("partial"))

    @property
    def provider(self) -> str:
        return str(self.run.get("provider") or self.run.get("backend") or "?")

    @property
    def provider_name(self) -> str:
        return str(self.run.get("provider_name") or self.provider)

    @property
    def counts(self) -> dict[str, int]:
        return {k: int(v) for k, v in (self.manifest.get("counts") or {}).items()}

    @property
    def created(self) -> float:
        try:
            return (self.path / MANIFEST).stat().st_mtime
        except OSError:
            return 0.0

    def status(self, name: str) -> str:
        """captured | partial | dropped | preview | absent (not in this trace)."""
        rec = self.records.get(name)
        return str(rec.get("status", "absent")) if rec else "absent"

    def record(self, name: str) -> dict[str, Any] | None:
        return self.records.get(name)

    def file(self, name: str) -> Path | None:
        rec = self.records.get(name)
        if not rec or not rec.get("file") or rec.get("status") not in ("captured", "partial"):
            return None
        p = (self.path / str(rec["file"])).resolve()
        if self.path.resolve() not in p.parents:
            raise TraceStoreError(f"the manifest of {self.path} names a file outside the run")
        return p

    def location(self, name: str) -> dict[str, Any] | None:
        """Where a value lies inside the run's capture container (offset, stored dtype and
        shape), None for a value stored as its own .npy file."""
        rec = self.records.get(name) or {}
        if "offset" not in rec or self.file(name) is None:
            return None
        return {
            "offset": int(rec["offset"]),
            "dtype": str(rec.get("stored_dtype") or rec["dtype"]),
            "shape": [int(d) for d in (rec.get("stored_shape") or rec["shape"])],
        }

    def load(self, name: str) -> np.ndarray:
        """The stored array (memory-mapped; a flat prefix for a partial capture)."""
        rec = self.records.get(name)
        if rec is None:
            raise TraceStoreError(f"{name!r} has no captured values: it is not part of this trace")
        try:
            return np.asarray(read_value(self.path, rec))
        except CaptureReadError as exc:
            raise TraceStoreError(str(exc)) from None

    def metadata(self, name: str) -> dict[str, Any]:
        rec = dict(self.records.get(name) or {})
        meta: dict[str, Any] = {
            "name": name,
            "shape": rec.get("shape"),
            "dtype": rec.get("dtype"),
            "status": rec.get("status", "absent"),
            "partial": rec.get("status") == "partial",
            "producer": rec.get("producer", ""),
            "op_type": rec.get("op_type", ""),
            "trace": str(self.path),
            "provider": self.provider,
        }
        if rec.get("reason"):
            meta["reason"] = rec["reason"]
        if rec.get("stored_dtype"):
            meta["stored_dtype"] = rec["stored_dtype"]
        return meta

    def summary(self) -> str:
        """One line for the trace picker: time, inputs, backend/provider, status."""
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.created))
        inputs = ", ".join(self.run.get("inputs", {}) or []) or "no inputs"
        c = self.counts
        state = "partial" if self.partial else "complete"
        edited = f"edited revision {self.revision} · " if self.edits_of else ""
        return (
            f"{when} · {edited}{inputs} · {self.run.get('backend', '?')}/{self.provider_name} · "
            f"{state} ({c.get('captured', 0)} captured, {c.get('partial', 0)} partial, "
            f"{c.get('dropped', 0)} dropped)"
        )


def load_run(path: str | Path) -> TraceRun:
    p = Path(path)
    mf = p / MANIFEST
    if not mf.is_file():
        raise TraceStoreError(
            f"{p} is not a trace folder: it has no {MANIFEST}; choose a folder written by "
            "`nneditor trace` or by the Trace panel"
        )
    try:
        manifest = json.loads(mf.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise TraceStoreError(f"{mf} cannot be read as JSON ({exc})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != "nneditor-trace":
        raise TraceStoreError(f"{mf} is not an NNEditor trace manifest (format is missing)")
    records = {
        str(r["name"]): r for r in manifest.get("values", []) if isinstance(r, dict) and "name" in r
    }
    return TraceRun(p, manifest, records)


def list_runs(model: str | Path | None = None, root: Path | None = None) -> list[TraceRun]:
    """Published runs under ``root`` (newest first), only those of ``model`` when given
    (including the runs of its edited revisions, which trace private copies)."""
    base = root or traces_root()
    want = str(Path(model).resolve()) if model is not None else None
    runs = []
    for d in sorted(base.iterdir()) if base.is_dir() else []:
        if d.name.startswith(".") or not (d / MANIFEST).is_file():
            continue
        try:
            run = load_run(d)
        except TraceStoreError:
            continue
        of = run.edits_of or run.model
        if want is None or str(Path(of).resolve()) == want:
            runs.append(run)
    runs.sort(key=lambda r: r.created, reverse=True)
    return runs
