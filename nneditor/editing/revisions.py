"""The revision chain: immutable revisions over an untouched source, with undo/redo.

A revision is one committed transaction (a tuple of change dicts, JSON-serialisable so the
journal can replay them). The chain is linear with a cursor: undo moves the cursor back, redo
forward, and a new commit after an undo drops the redo tail (recorded in the journal).
``saved`` remembers the cursor position of the last successful export so the UI knows when
"Save changes…" is needed.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Change = dict[str, Any]


@dataclass(frozen=True)
class Revision:
    id: str
    parent: str | None
    changes: tuple[Change, ...]
    description: str
    created: float = field(default_factory=time.time)
    source_sha256: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "parent": self.parent,
            "changes": list(self.changes),
            "description": self.description,
            "created": self.created,
            "source_sha256": self.source_sha256,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Revision:
        return cls(
            d["id"],
            d.get("parent"),
            tuple(d["changes"]),
            d.get("description", ""),
            d.get("created", 0.0),
            d.get("source_sha256", ""),
        )


class RevisionChain:
    """Linear history with a cursor. ``cursor == 0`` means the untouched source."""

    def __init__(self, source_sha256: str = "") -> None:
        self.source_sha256 = source_sha256
        self.revisions: list[Revision] = []
        self.cursor = 0
        self.saved_cursor = 0
        self.listeners: list[Callable[[], None]] = []

    # -- queries -----------------------------------------------------------------------
    @property
    def current(self) -> Revision | None:
        return self.revisions[self.cursor - 1] if self.cursor else None

    @property
    def current_id(self) -> str:
        return self.current.id if self.current else "source"

    def active_changes(self) -> list[Change]:
        out: list[Change] = []
        for rev in self.revisions[: self.cursor]:
            out.extend(rev.changes)
        return out

    @property
    def dirty(self) -> bool:
        return self.cursor != self.saved_cursor

    @property
    def can_undo(self) -> bool:
        return self.cursor > 0

    @property
    def can_redo(self) -> bool:
        return self.cursor < len(self.revisions)

    # -- mutations -----------------------------------------------------------------------
    def commit(self, changes: list[Change], description: str) -> Revision:
        parent = self.current_id if self.cursor else None
        rev = Revision(
            uuid.uuid4().hex[:12],
            parent,
            tuple(changes),
            description,
            source_sha256=self.source_sha256,
        )
        del self.revisions[self.cursor :]
        if self.saved_cursor > self.cursor:
            self.saved_cursor = -1  # the saved state is no longer reachable
        self.revisions.append(rev)
        self.cursor += 1
        self._notify()
        return rev

    def undo(self) -> None:
        if self.can_undo:
            self.cursor -= 1
            self._notify()

    def redo(self) -> None:
        if self.can_redo:
            self.cursor += 1
            self._notify()

    def goto(self, cursor: int) -> None:
        if not 0 <= cursor <= len(self.revisions):
            raise IndexError(cursor)
        self.cursor = cursor
        self._notify()

    def mark_saved(self) -> None:
        self.saved_cursor = self.cursor
        self._notify()

    def _notify(self) -> None:
        for fn in list(self.listeners):
            fn()

    def summary(self) -> list[dict[str, Any]]:
        return [
            {
                "id": r.id,
                "description": r.description,
                "changes": len(r.changes),
                "active": i < self.cursor,
            }
            for i, r in enumerate(self.revisions)
        ]
