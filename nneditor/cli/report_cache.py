"""A per-user cache of ``inspect --json`` reports for large single-file models.

Opening a 50k-node ONNX model and building its hierarchy costs about 0.45 s of Python work
(node objects, tensor refs, pattern detection) on a 2-core machine, and no library does that
part faster. The report depends only on the bytes of the model's files and on NNEditor's own
code, so a report computed once is kept and given back while both are unchanged:

- an entry is keyed by the model's resolved path and holds the identity (device, inode, size,
  modification and change times in ns) of the model and of every file it reads (external
  data), plus a fingerprint of NNEditor's source files (names, sizes, times) and its version;
  any difference is a miss and the report is computed afresh;
- a file modified within the last :data:`RACY_S` seconds is not cached, as git treats a
  "racily clean" index entry: a same-size rewrite inside the file system's time granularity
  would otherwise keep an old report;
- only reports of ONNX models (a regular file) that took at least :data:`MIN_SECONDS` to
  compute, without notes (notes mean something partial, such as a missing external file), are
  kept: other formats open in a blink, and their trace capability depends on the installed
  tracer plugins, which the key does not cover;
- ``nneditor inspect --no-cache`` computes afresh (and refreshes the entry);
  ``NNEDITOR_NO_REPORT_CACHE=1`` turns the cache off. The folder keeps at most
  :data:`MAX_ENTRIES` entries, the least recently written go first.

Every failure to read or write the cache is a miss, never an error: the cache can only make
an answer faster, not different.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from nneditor import __version__

MIN_SECONDS = 0.25
RACY_S = 2.0
MAX_ENTRIES = 256
SCHEMA = 1
_FOLDER = "reports"


def enabled() -> bool:
    return os.environ.get("NNEDITOR_NO_REPORT_CACHE", "") in ("", "0")


def _folder() -> Path:
    from nneditor.platform.dirs import cache_dir

    return cache_dir() / _FOLDER


def _entry_path(model: Path) -> Path:
    digest = hashlib.sha256(str(model).encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return _folder() / f"{digest}.json"


def _identity(path: Path) -> list[int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


_CODE: str | None = None


def code_fingerprint() -> str:
    """NNEditor's version and the names, sizes and times of its source files (~3 ms), so
    that an edited checkout never answers with a report its old code computed."""
    global _CODE
    if _CODE is None:
        root = Path(__file__).resolve().parents[1]
        h = hashlib.sha256(f"{__version__}/{SCHEMA}".encode())
        for folder, dirs, files in os.walk(root):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(files):
                if name.endswith((".py", ".so", ".pyd")):  # compiled loops too (_cwire)
                    st = os.stat(os.path.join(folder, name))
                    h.update(f"{folder}/{name}:{st.st_size}:{st.st_mtime_ns};".encode())
        _CODE = h.hexdigest()
    return _CODE


def lookup(path: str) -> dict[str, Any] | None:
    """The cached report for ``path`` when every file it was computed from is unchanged."""
    if not enabled():
        return None
    try:
        model = Path(path).resolve()
        if not model.is_file():
            return None
        with open(_entry_path(model), encoding="utf-8") as fh:
            entry = json.load(fh)
        files = entry["files"]
        if entry.get("model") != str(model) or not files or files[0][0] != str(model):
            return None
        for name, ident in files:
            if _identity(Path(name)) != ident:
                return None
        if entry.get("code") != code_fingerprint():  # the dearest check last
            return None
        report = entry["report"]
        return report if isinstance(report, dict) else None
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        return None


def store(path: str, files: Sequence[Path | None], report: dict[str, Any], seconds: float) -> bool:
    """Keep ``report`` (computed in ``seconds`` from ``path`` and ``files``) when it is worth
    keeping and its files are settled; True when it was written."""
    if not enabled() or seconds < MIN_SECONDS or report.get("notes"):
        return False
    if report.get("format") != "onnx":
        return False
    try:
        model = Path(path).resolve()
        if not model.is_file():
            return False
        idents: list[list[Any]] = []
        now = time.time_ns()
        others = {Path(p).resolve() for p in files if p is not None} - {model}
        for f in [model, *sorted(others)]:
            ident = _identity(f)
            if ident is None or now - max(ident[3], ident[4]) < RACY_S * 1e9:
                return False
            idents.append([str(f), ident])
        entry = {"model": str(model), "code": code_fingerprint(), "files": idents, "report": report}
        target = _entry_path(model)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f"{target.name}.{os.getpid()}.part")
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(entry, fh, ensure_ascii=False, allow_nan=False, default=str)
        os.replace(tmp, target)
        _prune(target.parent)
        return True
    except (OSError, ValueError, TypeError):
        return False


def _prune(folder: Path) -> None:
    entries = []
    for p in folder.glob("*.json"):
        with contextlib.suppress(OSError):
            entries.append((p.stat().st_mtime_ns, p))
    if len(entries) > MAX_ENTRIES:
        entries.sort()
        for _, p in entries[: len(entries) - MAX_ENTRIES]:
            with contextlib.suppress(OSError):
                p.unlink()
