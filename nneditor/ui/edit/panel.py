"""The Edit tab: operation forms with Preview / Commit, the revision history, undo and redo.

Invariants:
- Commit is enabled only while the shown preview succeeded for exactly the form's current
  parameters on the current revision; editing a field or moving in the history disables it.
- A refused preview shows the core's sentence in red and changes nothing.
- Quantization and pruning forms also show their numbers (computed on the displayed revision
  on the job runner); Commit waits for them as it waits for the validation.
- The panel never edits the session itself: it calls the :class:`EditController`.
- For documents without graph editing it shows the capability's reason and, where the
  ``export_weights`` capability is available, the weights-only export (labelled "weights
  only — no graph or code").
"""

from __future__ import annotations

from html import escape
from typing import Any

from PySide6.QtCore import QStringListModel
from PySide6.QtGui import QBrush, QFont, QShowEvent
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QStackedWidget,
    QTextBrowser,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from nneditor.ui import theme
from nneditor.ui.edit.context import EditContext
from nneditor.ui.edit.controller import EditController, PreviewResult, unsaved_count
from nneditor.ui.edit.forms import FORMS, FormError, OpForm, completion_models
from nneditor.ui.edit.optimize_forms import OPTIMIZE_FORMS, OptimizeForm
from nneditor.ui.model_index import ModelIndex
from nneditor.ui.targets import Target


def _muted(text: str, parent: QWidget) -> QLabel:
    label = QLabel(text, parent)
    label.setObjectName("Muted")
    label.setWordWrap(True)
    return label


def _heading(text: str, parent: QWidget) -> QLabel:
    label = QLabel(text, parent)
    font = label.font()
    font.setBold(True)
    label.setFont(font)
    return label


class EditPanel(QWidget):
    def __init__(self, controller: EditController, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.controller = controller
        self.ctx: EditContext | None = None
        self._applied = False
        self._models: dict[str, QStringListModel] = {}
        self.selection: Target | None = None
        self.result: PreviewResult | None = None
        self._pending: list[dict[str, object]] | None = None
        #: an optimization form's numbers: (the changes they are for, HTML, ok) — HTML None
        #: while they are computed
        self.numbers: tuple[list[dict[str, object]], str | None, bool] | None = None
        self.numbers_done = 0.0  # the fraction computed so far, shown while they run
        self.pages = QStackedWidget(self)
        self.message_page = self._build_message_page()
        self.editor_page = self._build_editor_page()
        self.pages.addWidget(self.message_page)
        self.pages.addWidget(self.editor_page)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(10, 10, 10, 10)
        layout.addWidget(self.pages)
        controller.sessionChanged.connect(self._on_session)
        controller.chainChanged.connect(self._on_chain)
        controller.busyChanged.connect(lambda _b: self._sync())
        self._on_session()

    # ------------------------------------------------------------------ widgets

    def _build_message_page(self) -> QWidget:
        page = QWidget(self)
        col = QVBoxLayout(page)
        col.setContentsMargins(0, 0, 0, 0)
        self.message_title = _heading("Editing", page)
        self.message = _muted("Open an ONNX model to edit its graph.", page)
        self.weights_button = QPushButton("Export weights only…", page)
        self.weights_button.setObjectName("Secondary")
        self.weights_button.setToolTip(
            "Write the decoded tensors to a .safetensors file: weights only — no graph or code"
        )
        self.weights_button.clicked.connect(self.controller.export_weights)
        self.weights_note = _muted("Weights only — no graph or code.", page)
        col.addWidget(self.message_title)
        col.addWidget(self.message)
        col.addSpacing(8)
        col.addWidget(self.weights_button)
        col.addWidget(self.weights_note)
        col.addStretch(1)
        return page

    def _build_editor_page(self) -> QWidget:
        page = QWidget(self)
        col = QVBoxLayout(page)
        col.setContentsMargins(0, 0, 0, 0)
        col.setSpacing(6)
        self.op = QComboBox(page)
        self.forms: list[OpForm] = [cls(page) for cls in (*FORMS, *OPTIMIZE_FORMS)]
        self.form_stack = QStackedWidget(page)
        for form in self.forms:
            self.op.addItem(form.title)
            self.form_stack.addWidget(form)
            form.edited.connect(self._on_edited)
        self.op.currentIndexChanged.connect(self._on_op)
        self.help = _muted("", page)
        col.addWidget(self.op)
        col.addWidget(self.help)
        col.addWidget(self.form_stack)
        buttons = QHBoxLayout()
        self.preview_button = QPushButton("Preview", page)
        self.preview_button.setObjectName("Secondary")
        self.preview_button.setToolTip("Validate the edit (ONNX checker + shape inference)")
        self.preview_button.clicked.connect(self.preview)
        self.commit_button = QPushButton("Commit", page)
        self.commit_button.setObjectName("Primary")
        self.commit_button.setToolTip("Record the previewed edit as a new revision")
        self.commit_button.clicked.connect(self.commit)
        buttons.addWidget(self.preview_button)
        buttons.addWidget(self.commit_button)
        col.addLayout(buttons)
        self.result_view = QTextBrowser(page)
        self.result_view.setObjectName("EditResult")
        self.result_view.setMinimumHeight(90)
        self.result_view.document().setDocumentMargin(6)
        self.result_view.setPlaceholderText("Preview an edit to see its diff here.")
        col.addWidget(self.result_view, 3)
        head = QHBoxLayout()
        head.addWidget(_heading("History", page))
        head.addStretch(1)
        self.undo_button = QToolButton(page)
        self.undo_button.setText("Undo")
        self.undo_button.setToolTip("Undo the current revision (Ctrl+Z)")
        self.undo_button.clicked.connect(self.controller.undo)
        self.redo_button = QToolButton(page)
        self.redo_button.setText("Redo")
        self.redo_button.setToolTip("Redo (Ctrl+Shift+Z)")
        self.redo_button.clicked.connect(self.controller.redo)
        head.addWidget(self.undo_button)
        head.addWidget(self.redo_button)
        col.addLayout(head)
        self.history_state = _muted("", page)
        col.addWidget(self.history_state)
        self.history = QListWidget(page)
        self.history.setObjectName("History")
        self.history.setWordWrap(True)
        self.history.itemClicked.connect(self._on_history_clicked)
        col.addWidget(self.history, 2)
        self._on_op(0)
        return page

    # ------------------------------------------------------------------ state from outside

    @property
    def form(self) -> OpForm:
        return self.forms[self.op.currentIndex()]

    def set_index(self, index: ModelIndex | None) -> None:
        """The displayed revision's index (names and schemas for the forms).

        Completers over every node and value name are built when the tab is first shown
        for this index (a 50k-node model needs ~0.1 s for them), not on every revision."""
        self.ctx = EditContext(index) if index is not None and index.graph is not None else None
        self._applied = False
        if self.isVisible() or self.ctx is None:
            self._apply_context()
        self._sync()

    def _apply_context(self) -> None:
        if self._applied:
            return
        self._applied = True
        models = completion_models(self.ctx, self)
        for form in self.forms:
            form.blockSignals(True)
            form.set_context(self.ctx, models)
            form.blockSignals(False)
        for model in self._models.values():
            model.deleteLater()
        self._models = models
        self.set_selection(self.selection)

    def showEvent(self, event: QShowEvent) -> None:  # noqa: N802 - Qt override
        super().showEvent(event)
        self._apply_context()

    def set_selection(self, target: Target | None) -> None:
        self.selection = target
        if self.ctx is None or target is None or not self._applied:
            return  # applied when the tab is shown
        subject = self.ctx.subject(target)
        if subject.node or subject.value or subject.tensor:
            for form in self.forms:
                form.prefill(subject)

    def choose(self, title: str) -> OpForm:
        """Show the form titled ``title`` (e.g. "Rename node") and return it."""
        self._apply_context()
        for k, form in enumerate(self.forms):
            if form.title == title:
                self.op.setCurrentIndex(k)
                return form
        raise KeyError(title)

    # ------------------------------------------------------------------ reactions

    def _on_session(self) -> None:
        c = self.controller
        doc = c.doc
        if c.session is not None:
            self.pages.setCurrentWidget(self.editor_page)
            self._on_chain()
            return
        self.pages.setCurrentWidget(self.message_page)
        weights = doc.capabilities.get("export_weights") if doc is not None else None
        offer_weights = doc is not None and weights is not None and weights.available
        self.weights_button.setVisible(offer_weights)
        self.weights_note.setVisible(offer_weights)
        if doc is None:
            self.message_title.setText("Editing")
            self.message.setText("Open an ONNX model to edit its graph.")
        elif c.preparing:
            self.message_title.setText("Preparing editing…")
            self.message.setText(
                "Hashing the source file for the edit journal (crash recovery). "
                "Large files take a few seconds."
            )
        else:
            self.message_title.setText("Graph editing is not available")
            self.message.setText(f"{c.reason[:1].upper()}{c.reason[1:]}." if c.reason else "")

    def _on_chain(self) -> None:
        chain = self.controller.chain
        self.history.clear()
        if chain is None:
            return
        t = theme.current()
        rows = ["Source (as opened)"] + [
            f"{k}. {rev.description or 'revision'}" for k, rev in enumerate(chain.revisions, 1)
        ]
        for k, text in enumerate(rows):
            current = k == chain.cursor
            saved = k and k == chain.saved_cursor
            item = QListWidgetItem(
                ("● " if current else "   ") + text + ("  · saved" if saved else "")
            )
            font = item.font()
            font.setBold(current)
            font.setItalic(k > chain.cursor)
            item.setFont(QFont(font))
            if k > chain.cursor:
                item.setForeground(QBrush(t.muted))
            if k:
                rev = chain.revisions[k - 1]
                item.setToolTip(f"{rev.description}\n{len(rev.changes)} change(s) · id {rev.id}")
            self.history.addItem(item)
        self.history.setCurrentRow(chain.cursor)
        n = unsaved_count(chain)
        self.history_state.setText(
            "No edits yet — the source is unchanged."
            if not chain.revisions
            else (
                f"{n} unsaved revision{'s' * (n != 1)}. Save changes… writes a new file."
                if n
                else "All changes saved."
            )
        )
        self._sync()

    def _on_history_clicked(self, item: QListWidgetItem) -> None:
        self.controller.goto(self.history.row(item))

    def _on_op(self, k: int) -> None:
        self.form_stack.setCurrentIndex(k)
        self.help.setText(self.forms[k].help)
        if self.ctx is not None and self.selection is not None:
            self.forms[k].prefill(self.ctx.subject(self.selection))
        self._on_edited()

    def _on_edited(self) -> None:
        if self.result is not None and not self._matches(self.result):
            self._mark_stale()
        self._sync()

    # ------------------------------------------------------------------ preview / commit

    def preview(self) -> None:
        self._apply_context()
        try:
            changes = self.form.changes()
        except FormError as exc:
            self.result = None
            self._show_error(str(exc), refused=False)
            self._sync()
            return
        self.result = None
        self._pending = changes
        self.numbers = None
        self.result_view.setHtml(self._css() + '<p class="muted">Validating…</p>')
        self.controller.preview(changes, lambda r, err: self._previewed(changes, r, err))
        form = self.form
        if isinstance(form, OptimizeForm) and self.ctx is not None:
            self._analyse(form, changes)
        self._sync()

    def _analyse(self, form: OptimizeForm, changes: list[dict[str, object]]) -> None:
        """Compute the form's numbers on the displayed revision (job runner)."""
        assert self.ctx is not None
        doc, spec = self.ctx.index.doc, dict(changes[0]["plan"])  # type: ignore[call-overload]
        self.numbers = (changes, None, False)

        def done(r: Any) -> None:
            if self.numbers is None or self.numbers[0] is not changes or r.cancelled:
                return
            if r.error is not None:
                text = str(r.error)
                text = text[:1].upper() + text[1:]
                self.numbers = (changes, f'<p class="err">{escape(text)}</p>', False)
            else:
                self.numbers = (changes, str(r.value), True)
            if self.result is not None:
                self._show_diff(self.result)
            self._sync()

        def progress(done_: int, total: int, _message: str) -> None:
            if self.numbers is not None and self.numbers[0] is changes and total > 0:
                self.numbers_done = done_ / total
                if self.result is not None and self.numbers[1] is None:
                    self._show_diff(self.result)

        self.numbers_done = 0.0
        self.controller.runner.submit(
            lambda h: type(form).analyse(doc, spec, h),
            done,
            channel="edit-numbers",
            on_progress=progress,
            label="Preview numbers",
        )

    def _previewed(
        self, changes: list[dict[str, object]], r: PreviewResult | None, err: str
    ) -> None:
        if changes is not self._pending:
            return  # a newer preview was started
        self._pending = None
        if r is None:
            self._show_error(err)
        elif not r.preview.ok:
            self.result = None
            self._show_error(r.preview.error)
        else:
            self.result = r
            self._show_diff(r)
            if not self._matches(r):  # the fields changed while it ran
                self._mark_stale()
        self._sync()

    def commit(self) -> None:
        r = self.result
        if r is None or not self._can_commit():
            return
        if self.controller.commit(r) is not None:
            self.result = None
            self.result_view.setHtml(
                self._css() + '<p class="ok">Committed. The graph now shows this revision.</p>'
            )
        self._sync()

    def _matches(self, r: PreviewResult) -> bool:
        try:
            return self.form.changes() == r.preview.changes
        except FormError:
            return False

    def _can_commit(self) -> bool:
        c = self.controller
        r = self.result
        if r is None or c.session is None or c.exporting or not r.preview.ok:
            return False
        chain = c.session.chain
        if isinstance(self.form, OptimizeForm) and not (
            self.numbers is not None and self.numbers[2] and self.numbers[0] == r.preview.changes
        ):
            return False  # the numbers are not shown (yet, or they failed)
        return r.base == (chain.cursor, chain.current_id) and self._matches(r)

    def _sync(self) -> None:
        c = self.controller
        ready = c.session is not None and not c.exporting
        self.preview_button.setEnabled(ready and self.ctx is not None)
        self.commit_button.setEnabled(ready and self._can_commit())
        chain = c.chain
        self.undo_button.setEnabled(ready and chain is not None and chain.can_undo)
        self.redo_button.setEnabled(ready and chain is not None and chain.can_redo)
        self.history.setEnabled(ready)

    # ------------------------------------------------------------------ rendering

    def _css(self) -> str:
        t = theme.current()
        bad = "#f87171" if t.dark else "#b42318"
        good = "#34d399" if t.dark else "#067647"
        return (
            f"<style>p, li, td {{ margin: 0 0 3px 0; }} .err {{ color: {bad}; }} "
            f".ok {{ color: {good}; font-weight: 600; }} .muted {{ color: {t.muted.name()}; }} "
            "td { padding: 1px 6px 1px 0; } code { font-family: monospace; }</style>"
        )

    def _show_error(self, text: str, refused: bool = True) -> None:
        sentence = text[:1].upper() + text[1:]
        if sentence and sentence[-1] not in ".!?":
            sentence += "."
        tail = '<p class="muted">Nothing was changed.</p>' if refused else ""
        self.result_view.setHtml(self._css() + f'<p class="err">{escape(sentence)}</p>{tail}')

    def _show_diff(self, r: PreviewResult) -> None:
        p = r.preview
        lines = "".join(f"<li>{escape(line)}</li>" for line in p.diff) or "<li>no change</li>"
        outs = "".join(
            f"<tr><td><code>{escape(name)}</code></td><td>{escape(t)}</td></tr>"
            for name, t in p.output_types.items()
        )
        numbers = ""
        if isinstance(self.form, OptimizeForm):
            html = self.numbers[1] if self.numbers is not None else None
            pct = f" {self.numbers_done:.0%}" if self.numbers_done else ""
            numbers = (
                html
                if html is not None
                else f'<p class="muted">Computing the numbers (reading every weight)…{pct}</p>'
            )
        self.result_view.setHtml(
            self._css()
            + numbers
            + '<p class="ok">Valid — checked by onnx.checker and strict shape inference.</p>'
            + f'<ul style="margin-left: -20px">{lines}</ul>'
            + (
                f'<p class="muted">Graph outputs after the edit:</p><table>{outs}</table>'
                if outs
                else ""
            )
        )

    def _mark_stale(self) -> None:
        self.result_view.append(
            '<p style="color: gray">The fields changed since this preview; preview again to commit.</p>'
        )
        self.result = None
