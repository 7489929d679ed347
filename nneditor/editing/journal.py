"""Append-only, fsync'd journal of commits for crash recovery.

One file per source artifact (keyed by its SHA-256) in the per-user data folder. Each line is a
JSON record: {"type": "commit", "revision": {...}, "cursor": n} or {"type": "cursor", "cursor": n}
(undo/redo) or {"type": "saved", "cursor": n} (successful export) or {"type": "discard"}. A torn
last line (crash mid-write) is ignored. Reopening the same source replays the records to rebuild
the chain; if any revision is unsaved, the UI offers recovery.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from nneditor.editing.revisions import Revision, RevisionChain
from nneditor.platform.dirs import data_dir


def journal_path(source_sha256: str) -> Path:
    folder = data_dir() / "journal"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"{source_sha256}.jsonl"


class Journal:
    def __init__(self, path: Path) -> None:
        self.path = path

    def append(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, separators=(",", ":")) + "\n"
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line.encode("utf-8"))
            os.fsync(fd)
        finally:
            os.close(fd)

    def record_commit(self, chain: RevisionChain, rev: Revision) -> None:
        self.append({"type": "commit", "revision": rev.as_dict(), "cursor": chain.cursor})

    def record_cursor(self, chain: RevisionChain) -> None:
        self.append({"type": "cursor", "cursor": chain.cursor})

    def record_saved(self, chain: RevisionChain) -> None:
        self.append({"type": "saved", "cursor": chain.cursor})

    def discard(self) -> None:
        """Forget this source's unsaved history (user chose not to recover)."""
        self.append({"type": "discard"})

    def load(self, source_sha256: str = "") -> RevisionChain:
        chain = RevisionChain(source_sha256)
        if not self.path.exists():
            return chain
        with open(self.path, encoding="utf-8") as fh:
            for raw in fh:
                try:
                    rec = json.loads(raw)
                except json.JSONDecodeError:
                    break  # torn final line from a crash
                kind = rec.get("type")
                if kind == "commit":
                    rev = Revision.from_dict(rec["revision"])
                    del chain.revisions[chain.cursor :]
                    chain.revisions.append(rev)
                    chain.cursor = int(rec.get("cursor", len(chain.revisions)))
                elif kind == "cursor":
                    chain.cursor = min(int(rec["cursor"]), len(chain.revisions))
                elif kind == "saved":
                    chain.saved_cursor = int(rec["cursor"])
                elif kind == "discard":
                    chain = RevisionChain(source_sha256)
        return chain


def has_unsaved(chain: RevisionChain) -> bool:
    return bool(chain.revisions) and chain.dirty
