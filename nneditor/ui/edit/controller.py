"""The desktop side of an editing session: background jobs, recovery, the revision view.

One :class:`EditController` lives as long as the main window; ``attach(index)`` starts a
session for a newly opened document and ``detach()`` ends it.

Invariants:
- The session is opened on the job runner (the SHA-256 of the source can take seconds); it
  hashes its own read-only map of the file, so closing the document meanwhile is safe.
  Until it is ready ``session`` is None and ``preparing`` is True.
- Every chain change (commit, undo, redo, goto, save, recovery) reaches the GUI thread as
  ``chainChanged`` through a queued signal: the chain's listeners may fire on the export
  worker thread (``mark_saved``), and widgets are only touched on the GUI thread.
- When the chain's cursor moves, the current revision's view (a :class:`ModelIndex` over
  :func:`revision_document`) is built on the runner (channel "edit-view") and delivered as
  ``viewReady``; cursor 0 delivers the source's own index at once.
- A preview remembers the revision it was computed on; committing it after the chain moved
  is refused (the diff would describe another graph).
- The source file is never written; exports go to a new file chosen by the user.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import QFileDialog, QMessageBox, QProgressDialog, QWidget

from nneditor.editing.journal import Journal, journal_path
from nneditor.editing.revision_view import revision_document
from nneditor.editing.revisions import Change, Revision, RevisionChain
from nneditor.editing.session import EditSession, Preview
from nneditor.io.identity import sha256_job
from nneditor.io.source import FileSource
from nneditor.jobs.protocol import JobHandle, JobResult
from nneditor.model.document import Document
from nneditor.ui.jobs import QtJobRunner
from nneditor.ui.model_index import ModelIndex, index_document

Callback = Callable[[], None]


@dataclass
class PreviewResult:
    """A finished preview and the revision (cursor, id) it was computed on."""

    preview: Preview
    base: tuple[int, str]


def unsaved_count(chain: RevisionChain) -> int:
    """How many revisions separate the current one from the last saved one."""
    if not chain.dirty:
        return 0
    if chain.saved_cursor < 0:
        return max(chain.cursor, 1)
    return max(abs(chain.cursor - chain.saved_cursor), 1)


def session_job(doc: Document) -> Callable[[JobHandle], EditSession]:
    def job(handle: JobHandle) -> EditSession:
        handle.progress(0, 1, "Hashing the source for the edit journal")
        src = FileSource(doc.path)
        try:
            sha = sha256_job(src, handle)
        finally:
            src.close()
        return EditSession(doc, sha, Journal(journal_path(sha)))

    return job


def view_job(session: EditSession, source: Document) -> Callable[[JobHandle], ModelIndex]:
    def job(handle: JobHandle) -> ModelIndex:
        handle.progress(0, 3, "Applying the revision")
        doc = revision_document(source, session.state())
        handle.check_cancelled()
        return index_document(doc, handle)

    return job


class EditController(QObject):
    sessionChanged = Signal()  # a session became ready, or ended
    chainChanged = Signal()  # revisions, cursor or saved state changed
    viewReady = Signal(object)  # ModelIndex of the current revision
    busyChanged = Signal(bool)  # an export is running
    status = Signal(str)
    saved = Signal(object)  # ExportReport or the weights-only report dict
    saveFailed = Signal(str)
    _chainPing = Signal()  # emitted from any thread by the chain listener

    def __init__(self, runner: QtJobRunner, window: QWidget, interactive: bool = True) -> None:
        super().__init__(window)
        self.runner = runner
        self.window = window
        self.interactive = interactive
        self.index: ModelIndex | None = None  # the source's index
        self.session: EditSession | None = None
        self.preparing = False
        self.exporting = False
        self.reason = ""
        self._session_rid = 0
        self._export_rid = 0
        self._view_key: tuple[int, str] = (0, "source")
        self._listened: RevisionChain | None = None
        self._progress: QProgressDialog | None = None
        self._chainPing.connect(self._on_chain, Qt.ConnectionType.QueuedConnection)

    # ------------------------------------------------------------------ lifecycle

    @property
    def doc(self) -> Document | None:
        return self.index.doc if self.index is not None else None

    def attach(self, index: ModelIndex) -> None:
        self.detach()
        self.index = index
        doc = index.doc
        cap = doc.capabilities.get("edit_graph")
        if doc.format != "onnx" or doc.graph is None or cap is None or not cap.available:
            self.reason = (cap.reason if cap is not None else "") or (
                f"graph editing is available for ONNX models; this is a {doc.format} artifact"
            )
            self.sessionChanged.emit()
            return
        self.reason = ""
        self.preparing = True
        self._session_rid = self.runner.submit(
            session_job(doc),
            lambda r: self._session_ready(index, r),
            channel="edit-session",
            on_progress=lambda d, t, m: self.status.emit(m) if m else None,
            on_discard=lambda s: s.close(),
            label="Prepare editing",
        )
        self.sessionChanged.emit()

    def detach(self) -> None:
        for rid in (self._session_rid, self._export_rid):
            if rid:
                self.runner.cancel(rid)  # a cancelled export publishes nothing
        self._session_rid = self._export_rid = 0
        self._listen(None)
        if self.session is not None:
            self.session.close()
        self.session = None
        self.index = None
        self.preparing = False
        self.reason = ""
        self._view_key = (0, "source")
        self.sessionChanged.emit()

    def _session_ready(self, index: ModelIndex, result: JobResult[Any]) -> None:
        if index is not self.index:
            if result.value is not None:
                result.value.close()
            return
        self._session_rid = 0
        self.preparing = False
        if result.error is not None or result.value is None:
            self.reason = (
                f"editing could not start: {result.error}" if result.error else "cancelled"
            )
            self.sessionChanged.emit()
            return
        session: EditSession = result.value
        self.session = session
        if session.recovered:
            n = unsaved_count(session.chain)
            if not self.interactive:
                # nobody to ask (screenshots, benchmarks): show the source and leave the
                # journal untouched for the next interactive session
                session.journal = None
                session.chain = RevisionChain(session.sha256)
                session.recovered = False
            elif self.ask_recover(n):
                self.status.emit(f"Recovered {n} unsaved revision{'s' * (n != 1)}.")
            else:
                session.discard_recovered()
                self.status.emit("Discarded the unsaved revisions of the previous session.")
        else:
            self.status.emit("")  # the hashing message is done
        self._listen(session.chain)
        self.sessionChanged.emit()
        self._on_chain()

    def ask_recover(self, n: int) -> bool:
        """Ask whether to recover ``n`` journaled revisions (True = recover)."""
        box = QMessageBox(self.window)
        box.setIcon(QMessageBox.Icon.Question)
        box.setWindowTitle("Unsaved revisions found")
        box.setText(f"Recover {n} unsaved revision{'s' * (n != 1)} from a previous session?")
        box.setInformativeText(
            "NNEditor closed before they were saved. Recovered revisions stay unsaved until you "
            "use Save changes…. The source file was never modified."
        )
        recover = box.addButton("Recover", QMessageBox.ButtonRole.AcceptRole)
        box.addButton("Discard", QMessageBox.ButtonRole.DestructiveRole)
        box.setDefaultButton(recover)
        box.exec()
        return box.clickedButton() is recover

    # ------------------------------------------------------------------ chain

    @property
    def chain(self) -> RevisionChain | None:
        return self.session.chain if self.session is not None else None

    @property
    def dirty(self) -> bool:
        return self.session is not None and self.session.chain.dirty

    def _listen(self, chain: RevisionChain | None) -> None:
        old = self._listened
        if old is not None and self._ping in old.listeners:
            old.listeners.remove(self._ping)
        self._listened = chain
        if chain is not None:
            chain.listeners.append(self._ping)

    def _ping(self) -> None:
        self._chainPing.emit()  # any thread; delivered queued on the GUI thread

    def _on_chain(self) -> None:
        s = self.session
        if s is None:
            return
        if s.chain is not self._listened:  # discard_recovered replaced the chain
            self._listen(s.chain)
        self.chainChanged.emit()
        key = (s.chain.cursor, s.chain.current_id)
        if key != self._view_key:
            self._view_key = key
            self._request_view(s)

    def _request_view(self, s: EditSession) -> None:
        index = self.index
        assert index is not None
        if s.chain.cursor == 0:  # the source itself; a pending older view is dropped by key
            self.viewReady.emit(index)
            return
        self.status.emit("Updating the graph for the current revision…")
        key = self._view_key

        def done(r: JobResult[Any]) -> None:
            if self.session is not s or key != self._view_key or r.cancelled:
                return
            if r.error is not None:
                self.status.emit(f"The edited graph could not be shown: {r.error}")
                return
            self.status.emit("")
            self.viewReady.emit(r.value)

        self.runner.submit(view_job(s, index.doc), done, channel="edit-view", label="Revision")

    # ------------------------------------------------------------------ edits

    def preview(
        self, changes: list[Change], on_done: Callable[[PreviewResult | None, str], None]
    ) -> int:
        """Validate ``changes`` on the runner; ``on_done(result, error)`` on the GUI thread."""
        s = self.session
        if s is None:
            on_done(None, "editing is not ready yet")
            return 0
        base = (s.chain.cursor, s.chain.current_id)

        def done(r: JobResult[Any]) -> None:
            if self.session is not s:
                return
            if r.error is not None:
                on_done(None, f"the preview failed: {r.error}")
            elif r.value is not None:
                on_done(PreviewResult(r.value, base), "")

        return self.runner.submit(
            lambda h: s.prepare(changes), done, channel="edit-preview", label="Preview edit"
        )

    def commit(self, result: PreviewResult, description: str = "") -> Revision | None:
        s = self.session
        if s is None or self.exporting:
            return None
        if (s.chain.cursor, s.chain.current_id) != result.base:
            self.status.emit("The revision changed since this preview; preview it again.")
            return None
        rev = s.commit(result.preview, description)
        self.status.emit(f"Committed: {rev.description}")
        return rev

    def undo(self) -> None:
        if self.session is not None and not self.exporting and self.session.chain.can_undo:
            self.session.undo()

    def redo(self) -> None:
        if self.session is not None and not self.exporting and self.session.chain.can_redo:
            self.session.redo()

    def goto(self, cursor: int) -> None:
        if self.session is not None and not self.exporting:
            self.session.goto(cursor)

    # ------------------------------------------------------------------ saving

    def default_destination(self) -> Path:
        assert self.doc is not None
        src = Path(self.doc.path)
        return src.with_name(f"{src.stem}-edited.onnx")

    def save(self, then: Callback | None = None, otherwise: Callback | None = None) -> bool:
        """Ask for a destination and export the current revision there (in the background)."""
        s = self.session
        if s is None or self.exporting:
            return False
        path, _ = QFileDialog.getSaveFileName(
            self.window,
            "Save changes to a new ONNX file",
            str(self.default_destination()),
            "ONNX model (*.onnx);;All files (*)",
        )
        if not path:
            if otherwise is not None:
                otherwise()
            return False
        dest = Path(path)
        if dest.suffix.lower() != ".onnx":
            dest = dest.with_name(dest.name + ".onnx")
        self._run_export(lambda h: s.export(dest, h), f"Saving {dest.name}…", dest, then, otherwise)
        return True

    def export_weights(self) -> bool:
        """Weights-only safetensors export for documents NNEditor cannot write as a graph."""
        doc = self.doc
        if doc is None or self.exporting:
            return False
        src = Path(doc.path)
        path, _ = QFileDialog.getSaveFileName(
            self.window,
            "Export weights only — no graph or code",
            str(src.with_name(f"{src.stem}-weights.safetensors")),
            "safetensors (*.safetensors)",
        )
        if not path:
            return False
        dest = Path(path)
        if dest.suffix.lower() != ".safetensors":
            dest = dest.with_name(dest.name + ".safetensors")
        from nneditor.export.weights import export_weights

        self._run_export(
            lambda h: export_weights(doc, dest, h), f"Exporting weights to {dest.name}…", dest
        )
        return True

    def _run_export(
        self,
        job: Callable[[JobHandle], Any],
        label: str,
        dest: Path,
        then: Callback | None = None,
        otherwise: Callback | None = None,
    ) -> None:
        self._set_exporting(True)
        dialog = QProgressDialog(label, "Cancel", 0, 1000, self.window)
        dialog.setWindowTitle("Export")
        dialog.setWindowModality(Qt.WindowModality.WindowModal)
        dialog.setAutoClose(False)
        dialog.setAutoReset(False)
        dialog.setMinimumDuration(300)
        dialog.setValue(0)
        self._progress = dialog

        def progress(done: int, total: int, message: str) -> None:
            if total > 0:
                dialog.setValue(int(1000 * done / total))

        def finished(r: JobResult[Any]) -> None:
            self._export_rid = 0
            dialog.reset()
            dialog.close()
            dialog.deleteLater()
            self._progress = None
            self._set_exporting(False)
            if r.cancelled:
                self.status.emit(f"Export cancelled; nothing was written to {dest.name}.")
                if otherwise is not None:
                    otherwise()
            elif r.error is not None:
                self._export_failed(r.error, dest)
                if otherwise is not None:
                    otherwise()
            else:
                self._export_done(r.value)
                if then is not None:
                    then()

        rid = self.runner.submit(job, finished, channel="export", on_progress=progress, label=label)
        self._export_rid = rid
        dialog.canceled.connect(lambda: self.runner.cancel(rid))

    def _set_exporting(self, on: bool) -> None:
        self.exporting = on
        self.busyChanged.emit(on)

    def _export_done(self, report: Any) -> None:
        if isinstance(report, dict):  # weights-only
            text = (
                f"Wrote {Path(report['path']).name}: weights only — no graph or code "
                f"({report['tensors']} tensors, {report['bytes']:,} bytes)."
            )
            details = "\n".join(report.get("notes", []))
        else:
            text = f"Saved {report.path.name} ({report.bytes_written:,} bytes, {report.seconds:.1f} s)."
            details = "Checks passed:\n" + "\n".join(f"• {c}" for c in report.checks)
            if report.notes:
                details += "\n\n" + "\n".join(report.notes)
        checks = "" if isinstance(report, dict) else " Checks: " + "; ".join(report.checks)
        self.status.emit(text + checks)
        self.saved.emit(report)
        if self.interactive:
            QMessageBox.information(self.window, "Export finished", f"{text}\n\n{details}".strip())

    def _export_failed(self, error: BaseException, dest: Path) -> None:
        from nneditor.errors import error_sentence as error_text

        text = f"{error_text(error)} Nothing was written to {dest.name}."
        self.status.emit(text)
        self.saveFailed.emit(text)
        if self.interactive:
            QMessageBox.critical(self.window, "Changes not saved", text)

    # ------------------------------------------------------------------ closing

    def request_close(self, then: Callback, otherwise: Callback | None = None) -> None:
        """Run ``then`` when the document may close: at once when nothing is unsaved, else
        after the user saved (Save…) or discarded the unsaved revisions; Cancel runs
        ``otherwise``."""
        s = self.session
        if s is None or not s.chain.dirty or not self.interactive or self.exporting:
            then()
            return
        n = unsaved_count(s.chain)
        buttons = (
            QMessageBox.StandardButton.Save
            | QMessageBox.StandardButton.Discard
            | QMessageBox.StandardButton.Cancel
        )
        answer = QMessageBox.question(
            self.window,
            "Unsaved changes",
            f"{s.doc.path.name} has {n} unsaved revision{'s' * (n != 1)}. Save them to a new "
            "file before closing? Discard forgets them; the source file is unchanged either way.",
            buttons,
            QMessageBox.StandardButton.Save,
        )
        if answer == QMessageBox.StandardButton.Save:
            self.save(then=then, otherwise=otherwise)
        elif answer == QMessageBox.StandardButton.Discard:
            if s.journal is not None:
                s.journal.discard()
            then()
        elif otherwise is not None:
            otherwise()
