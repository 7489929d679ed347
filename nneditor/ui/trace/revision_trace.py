"""Tracing what the user sees: after an edit, the Trace page plans the edited revision.

The edit controller holds revisions as replays over the untouched source, and a runtime needs
a file, so the current revision is written to a private copy (:mod:`.staging`) on the window's
job runner, opened, and handed to the Inputs and Trace panels with its revision id and the
source path (the plan names both; the approval binds the revision). Undoing back to the source
plans the source again. Runs keep the revision they traced: the Traced model pane shows a run
on its own revision's graph when that graph was shown in this session, else on the source
graph with a note.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject

from nneditor.jobs import JobHandle
from nneditor.jobs.protocol import JobResult
from nneditor.tracing.plan import REVISION_SOURCE
from nneditor.ui.trace.staging import stage_revision
from nneditor.ui.trace.store import TraceRun, traces_root

if TYPE_CHECKING:
    from nneditor.model.document import Document
    from nneditor.ui.host import WindowHost
    from nneditor.ui.model_index import ModelIndex
    from nneditor.ui.trace.inputs_panel import InputsPanel
    from nneditor.ui.trace.trace_panel import TracePanel


#: revision graphs remembered for showing their runs (the oldest shown is forgotten first)
VIEWS_KEPT = 4


class RevisionTracing(QObject):
    def __init__(
        self,
        window: WindowHost,
        inputs: InputsPanel,
        panel: TracePanel,
        changed: Callable[[], None],
    ) -> None:
        super().__init__(window.as_widget())
        self.window, self.inputs, self.panel = window, inputs, panel
        self.views: dict[str, ModelIndex] = {}  # revision id -> its graph shown this session
        self.copy: Document | None = None  # the opened private copy being planned
        self.planned = REVISION_SOURCE  # the revision the panels were last given
        self._rid = 0
        edit = getattr(window, "edit", None)
        if edit is not None:
            edit.chainChanged.connect(lambda: changed() if self.current() != self.planned else None)
            edit.viewReady.connect(self._view_ready)

    def current(self) -> str:
        """The id of the revision the window shows ("source" when unedited)."""
        chain = getattr(getattr(self.window, "edit", None), "chain", None)
        return str(chain.current_id) if chain is not None else REVISION_SOURCE

    def _view_ready(self, index: ModelIndex) -> None:
        rev = self.current()
        self.views.pop(rev, None)
        self.views[rev] = index
        while len(self.views) > VIEWS_KEPT:  # each holds a revision's whole index
            del self.views[next(iter(self.views))]

    def reset(self) -> None:
        """The model opened or closed: forget revisions, drop the copy being planned."""
        if self._rid:
            self.window.runner.cancel(self._rid)
            self._rid = 0
        self.views = {}
        self.planned = REVISION_SOURCE
        self._drop_copy()

    def _drop_copy(self) -> None:
        if self.copy is not None:
            self.copy.close()
            self.copy = None

    # ------------------------------------------------------------------ planning

    def plan(self, source: Document | None, traceable: bool) -> None:
        """Give the panels the source, or the current edited revision's private copy; an
        input set assigned for the previous revision stays when the new one accepts it."""
        inputs = self.inputs
        kept = (
            (inputs.arrays, dict(inputs.sources), dict(inputs.token_notes))
            if self.planned != self.current() and inputs.arrays is not None
            else None
        )
        rev = self.current() if source is not None else REVISION_SOURCE
        self.planned = rev
        if self._rid:
            self.window.runner.cancel(self._rid)
            self._rid = 0
        if rev == REVISION_SOURCE or source is None:
            self.inputs.set_document(source)
            self.panel.set_document(source if traceable else None)
            if kept is not None and source is not None:
                self.inputs.keep(*kept)
            self._drop_copy()
            return
        session = self.window.edit.session
        self.inputs.set_document(None)
        self.panel.set_document(
            None,
            waiting=f"Writing a private copy of the edited revision {rev} to trace it (the file "
            "on disk is neither traced nor changed)…",
        )
        root = traces_root()

        def job(handle: JobHandle) -> Document:
            import nneditor

            return nneditor.open(stage_revision(session, root, rev, handle))

        def done(r: JobResult[Any]) -> None:
            self._rid = 0
            if r.cancelled:
                return
            if r.error is not None or r.value is None:
                self.panel.set_document(
                    None,
                    waiting=f"The edited revision {rev} could not be written for tracing: "
                    f"{r.error or 'no copy'}. The file on disk was not changed.",
                )
                return
            if self.planned != rev:  # superseded while writing
                r.value.close()
                return
            self._drop_copy()
            self.copy = r.value
            self.inputs.set_document(r.value)
            self.panel.set_document(r.value, revision=rev, edits_of=str(source.path))
            if kept is not None:
                self.inputs.keep(*kept)

        self._rid = self.window.runner.submit(
            job,
            done,
            channel="trace-revision",
            on_discard=lambda d: d.close(),
            label="Revision copy",
        )

    # ------------------------------------------------------------------ runs

    def index_for(self, run: TraceRun) -> tuple[ModelIndex | None, bool]:
        """The graph to show ``run`` on (its revision's when shown in this session, else the
        source's) and whether that is the graph the run traced."""
        if not run.edits_of:
            return self.window.source_index, True
        if run.revision in self.views:
            return self.views[run.revision], True
        return self.window.source_index, False
