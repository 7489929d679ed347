"""An editing session: one opened ONNX document, its revision chain, journal and export.

    session = EditSession.open(doc)            # recovers journaled revisions, if any
    preview = session.prepare([change, ...])   # validated diff; nothing committed
    session.commit(preview, "make it leaky")   # immutable revision, journaled (fsync)
    session.undo(); session.redo()
    session.export(Path("out.onnx"))           # staged, validated, atomic

The source file is never written. Its SHA-256 keys the journal and is recorded with every
revision and in the exported model's metadata.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nneditor.editing.journal import Journal, journal_path
from nneditor.editing.onnx_edits import EditError, EditState
from nneditor.editing.onnx_source import SourceModel
from nneditor.editing.revisions import Change, Revision, RevisionChain
from nneditor.errors import NNEditorError
from nneditor.io.identity import sha256_job
from nneditor.jobs import JobHandle
from nneditor.model.document import Document


@dataclass
class Preview:
    changes: list[Change]
    ok: bool
    diff: list[str] = field(default_factory=list)
    error: str = ""
    output_types: dict[str, str] = field(default_factory=dict)
    state: EditState | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "diff": self.diff,
            "error": self.error,
            "output_types": self.output_types,
        }


class EditSession:
    def __init__(self, doc: Document, sha256: str, journal: Journal | None) -> None:
        if doc.format != "onnx" or doc.graph is None:
            reason = (
                doc.capabilities["edit_graph"].reason if "edit_graph" in doc.capabilities else ""
            )
            raise NNEditorError(
                reason
                or f"editing is available for ONNX entry graphs; this is a {doc.format} artifact"
            )
        self.doc = doc
        self.sha256 = sha256
        self.src = SourceModel(doc.path)
        self.journal = journal
        self.chain = RevisionChain(sha256)
        self.recovered = False
        if journal is not None:
            previous = journal.load(sha256)
            if previous.revisions and previous.dirty:
                # unsaved revisions from a session that did not end cleanly: offer them
                self.chain, self.recovered = previous, True
            elif previous.revisions:
                journal.discard()  # everything was saved; start a fresh history
        self._cache: tuple[int, str, EditState] | None = None

    @classmethod
    def open(
        cls, doc: Document, *, use_journal: bool = True, handle: JobHandle | None = None
    ) -> EditSession:
        sha = sha256_job(doc.sources[0], handle or JobHandle()) if doc.sources else ""
        journal = Journal(journal_path(sha)) if use_journal and sha else None
        return cls(doc, sha, journal)

    def close(self) -> None:
        self.src.close()

    # -- state -----------------------------------------------------------------------
    def state(self) -> EditState:
        """The current revision's edit state (replayed from the source, cached)."""
        key = (self.chain.cursor, self.chain.current_id)
        if self._cache is not None and self._cache[:2] == key:
            return self._cache[2]
        state = EditState.from_source(self.src, self.doc)
        for change in self.chain.active_changes():
            state.apply(change)
        state.log.clear()
        self._cache = (key[0], key[1], state)
        return state

    def prepare(self, changes: list[Change]) -> Preview:
        """Apply ``changes`` to a copy of the current state and validate; never commits."""
        state = self.state().clone()
        try:
            for c in changes:
                state.apply(c)
            inferred = state.validate()
        except EditError as exc:
            return Preview(list(changes), False, error=str(exc))
        types = _output_types(inferred)
        before = _output_types(self.state().validate()) if self.chain.cursor == 0 else {}
        diff = list(state.log)
        for name, t in types.items():
            old = before.get(name)
            if old is not None and old != t:
                diff.append(f"graph output {name!r}: {old} → {t}")
        return Preview(list(changes), True, diff, "", types, state)

    def commit(self, preview: Preview, description: str = "") -> Revision:
        if not preview.ok or preview.state is None:
            raise EditError(preview.error or "this edit was not validated")
        rev = self.chain.commit(preview.changes, description or "; ".join(preview.diff)[:200])
        if self.journal is not None:
            self.journal.record_commit(self.chain, rev)
        self._cache = (self.chain.cursor, self.chain.current_id, preview.state)
        preview.state.log.clear()
        return rev

    def apply(self, changes: list[Change], description: str = "") -> Revision:
        """prepare + commit; raises EditError with the reason when refused."""
        preview = self.prepare(changes)
        if not preview.ok:
            raise EditError(preview.error)
        return self.commit(preview, description)

    def undo(self) -> None:
        self.chain.undo()
        if self.journal is not None:
            self.journal.record_cursor(self.chain)

    def redo(self) -> None:
        self.chain.redo()
        if self.journal is not None:
            self.journal.record_cursor(self.chain)

    def goto(self, cursor: int) -> None:
        """Move to revision ``cursor`` (0 = the source), as a run of undos or redos would."""
        if cursor != self.chain.cursor:
            self.chain.goto(cursor)
            if self.journal is not None:
                self.journal.record_cursor(self.chain)

    def discard_recovered(self) -> None:
        if self.journal is not None:
            self.journal.discard()
        self.chain = RevisionChain(self.sha256)
        self.recovered = False

    # -- export ----------------------------------------------------------------------
    def export(self, dest: Path, handle: JobHandle | None = None, **kw: Any):  # noqa: ANN201
        from nneditor.export.onnx_writer import export_revision, provenance_for

        report = export_revision(
            self.state(),
            dest,
            provenance_for(self.chain.summary()[: self.chain.cursor], self.sha256),
            handle,
            **kw,
        )
        self.chain.mark_saved()
        if self.journal is not None:
            self.journal.record_saved(self.chain)
        return report

    def write_copy(  # noqa: ANN201
        self, dest: Path, handle: JobHandle | None = None, revision: str | None = None
    ):
        """Write the current revision to ``dest`` for NNEditor's own use (a trace of an
        edited revision): the same staged, validated writer as :meth:`export`, but nothing is
        marked saved and the runtime check is left to whoever runs the copy. With
        ``revision``, refuses (writing nothing) when the current revision is another one by
        then (an undo while a background job started the copy)."""
        from nneditor.export.onnx_writer import export_revision, provenance_for

        state = self.state()
        if revision is not None and self.chain.current_id != revision:
            raise NNEditorError(
                f"the current revision changed from {revision} to {self.chain.current_id} "
                "while its copy was being prepared; nothing was written"
            )
        return export_revision(
            state,
            dest,
            provenance_for(self.chain.summary()[: self.chain.cursor], self.sha256),
            handle,
            runtime_check=False,
        )


def _output_types(model: Any) -> dict[str, str]:
    from onnx import helper

    out = {}
    for vi in model.graph.output:
        t = vi.type.tensor_type
        dims = [
            d.dim_param or (str(d.dim_value) if d.HasField("dim_value") else "?")
            for d in t.shape.dim
        ]
        out[vi.name] = (
            f"{helper.tensor_dtype_to_np_dtype(t.elem_type) if t.elem_type else '?'} [{', '.join(dims)}]"
        )
    return out
