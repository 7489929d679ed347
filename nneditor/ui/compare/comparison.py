"""A model comparison as the window holds it: the diff, both documents with their indexes,
and the operator pairing (Qt-free; built by :func:`compare_job` on the job runner).

Invariants:
- B's document stays open for the comparison's lifetime (the side-by-side view and the tensor
  panels read it); :meth:`Comparison.close` closes it. A's document belongs to the window.
- ``result`` is exactly ``diff_documents(a, b).as_dict()``, what ``nneditor diff --json``
  prints, so the tables and the command line agree.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nneditor.diff.models import OperatorMatch
from nneditor.jobs.protocol import JobHandle
from nneditor.model.document import Document
from nneditor.ui.model_index import ModelIndex, index_document


@dataclass
class Comparison:
    result: dict[str, Any]
    a: ModelIndex
    b: ModelIndex
    match: OperatorMatch | None

    @property
    def doc_a(self) -> Document:
        return self.a.doc

    @property
    def doc_b(self) -> Document:
        return self.b.doc

    @property
    def by_name(self) -> bool:
        return self.match is None or self.match.by_name

    def no_graph_reason(self) -> str:
        """Why the two graphs cannot be drawn side by side ("" when they can)."""
        missing = [ix.doc for ix in (self.a, self.b) if ix.root is None]
        return "; ".join(
            f"{Path(str(d.path)).name} has no graph "
            f"({d.graph_unavailable_reason or 'it stores tensors only'})"
            for d in missing
        )

    def close(self) -> None:
        self.b.doc.close()


def compare_job(a: ModelIndex, other: str) -> Callable[[JobHandle], Comparison]:
    """The job that opens ``other`` (B), diffs the window's model (A) against it and indexes B."""

    def job(handle: JobHandle) -> Comparison:
        import nneditor
        from nneditor.diff.models import diff_documents

        doc = nneditor.open(other)
        try:
            diff = diff_documents(a.doc, doc)
            handle.check_cancelled()
            index = index_document(doc, handle)
            return Comparison(diff.as_dict(), a, index, diff.operator_match)
        except BaseException:
            doc.close()
            raise

    return job
