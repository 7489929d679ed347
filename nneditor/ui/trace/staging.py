"""Private copies of edited revisions, written so that a trace runs the revision a user sees.

Qt-free. A runtime needs a model file; an edited revision exists only as a replay of changes
over the untouched source. :func:`stage_revision` writes the current revision with the export
writer (staged, validated, atomic) into a folder of the trace store named after the source's
SHA-256 and the revision id. Revision ids are unique, so a copy that exists is that revision's
and is reused. Only the current and the previous copy are kept; traces record the copy's path
(``model``) beside the file the edits apply to (``edits_of``).
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from nneditor.errors import NNEditorError
from nneditor.jobs import JobHandle

if TYPE_CHECKING:
    from nneditor.editing.session import EditSession

#: folder of the trace store holding the copies (dot-named: not a run folder)
REVISIONS = ".revisions"
#: copies kept besides the one just written: a copy is a whole model (a 1.5 GB export costs
#: 1.5 GB of disk each), so only the previous revision's stays for a retrace
KEEP = 1


def staged_path(session: EditSession, root: Path) -> Path:
    """Where the current revision of ``session`` is (or will be) written under ``root``."""
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", session.doc.path.stem).strip("._")[:60] or "model"
    folder = root / REVISIONS / f"{stem}-{session.sha256[:12]}-{session.chain.current_id}"
    return folder / f"{stem}.onnx"


def stage_revision(
    session: EditSession, root: Path, revision: str, handle: JobHandle | None = None
) -> Path:
    """The path of a private copy of ``session``'s edited revision ``revision`` (its current
    one) under ``root``, written now unless it exists already."""
    if revision == "source" or session.chain.current_id != revision:
        raise NNEditorError(
            f"revision {revision} is not the current edited revision "
            f"({session.chain.current_id}); nothing to copy"
        )
    dest = staged_path(session, root)
    if dest.is_file():  # the writer publishes atomically: a present file is complete
        os.utime(dest.parent)  # recently used: kept by the pruning below
    else:
        dest.parent.mkdir(parents=True, exist_ok=True)
        session.write_copy(dest, handle, revision)
    _prune(dest.parent.parent, keep=dest.parent)
    return dest


def _prune(folder: Path, keep: Path) -> None:
    """Delete all but the :data:`KEEP` newest copies (never ``keep``)."""
    copies = sorted(
        (p for p in folder.iterdir() if p.is_dir() and p != keep),
        key=lambda p: p.stat().st_mtime,
        reverse=True,
    )
    for old in copies[KEEP:]:
        shutil.rmtree(old, ignore_errors=True)
