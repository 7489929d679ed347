"""The Trace panel: backend, device, inputs and limits shown before anything runs, then
"Approve & run trace" in the background with progress, elapsed time and Cancel.

Invariants:
- The shown plan is ``make_plan(...)`` for the current settings and inputs, re-planned on
  every change; ``plan.describe()`` is what the user reads.
- An approval is created only by ``approve_current`` (the "Approve & run trace" click) for
  the plan as shown; any change of inputs, limits, backend or device withdraws it.
- The run uses ``TraceRunner.run`` on this panel's own job runner; a failed or cancelled run
  publishes nothing (a result that raced a cancel is deleted) and shows its sentence;
  ``traceFinished`` fires only for a published trace.
"""

from __future__ import annotations

import contextlib
import shutil
import threading
import time
from typing import Any

import numpy as np
from PySide6.QtCore import QTimer, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QDoubleSpinBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from nneditor.errors import NNEditorError
from nneditor.jobs.protocol import JobHandle, JobResult
from nneditor.tracing.approval import Approval, approve
from nneditor.tracing.limits import Limits
from nneditor.tracing.plan import BACKENDS, REVISION_SOURCE, TracePlan, make_plan
from nneditor.tracing.providers import DEVICES
from nneditor.tracing.runner import TraceResult, TraceRunner
from nneditor.ui.jobs import QtJobRunner
from nneditor.ui.trace.store import load_run, new_run_dir
from nneditor.ui.trace.tracer_choice import TracerChoice

LIMIT_FIELDS = (
    ("timeout_s", "Wall clock (s)", 1, 86400),
    ("max_ram_mb", "RAM ceiling (MB)", 64, 1 << 20),
    ("capture_mb", "Capture budget (MiB)", 0.001, 1 << 20),
    ("chunk_mb", "Write chunk (MiB)", 0.001, 4096),
)


class TracePanel(QWidget):
    traceFinished = Signal(object)  # TraceRun
    traceFailed = Signal(str)
    planChanged = Signal()
    idle = Signal()  # a run ended (published, failed or cancelled)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.runner = QtJobRunner(self, max_threads=1)
        # A pre-started worker has imported the runtimes and reads nothing until an approved
        # request arrives, so "Approve & run" does not wait for interpreter start-up. It is
        # started when the panel is shown with a traceable model, and stopped with the model.
        self.trace_runner = TraceRunner(keep_warm=True)
        self.doc: Any = None
        self.revision = REVISION_SOURCE  # of the shown document (see set_document)
        self.input_notes: dict[str, dict[str, Any]] = {}
        self.edits_of = ""
        self.waiting = ""  # why there is no document yet (a revision copy being written)
        self.arrays: dict[str, np.ndarray] | None = None
        self.inputs_text = ""
        self.plan: TracePlan | None = None
        self.approval: Approval | None = None
        self.result: TraceResult | None = None
        self.rid = 0
        self.test_hooks: dict[str, Any] | None = None  # worker test hooks (tests only)
        self._started = 0.0
        self._build()
        self._clock = QTimer(self)
        self._clock.setInterval(200)
        self._clock.timeout.connect(self._tick)
        # One-time costs of the first plan (importing onnxruntime to list its providers,
        # hashing the tracer's sources) are paid off the UI thread, not when a model opens.
        threading.Thread(target=_warm_plan_caches, name="trace-plan-warmup", daemon=True).start()

    def _build(self) -> None:
        title = QLabel("Trace activations", self)
        title.setObjectName("DocTitle")
        intro = QLabel(
            "Review what the run will use. Nothing runs until you choose Approve & run trace; "
            "the approval covers this plan only, for one run.",
            self,
        )
        intro.setWordWrap(True)
        intro.setObjectName("Muted")
        form = QFormLayout()
        self.tracer = TracerChoice(self)
        self.tracer.changed.connect(self.replan)
        form.addRow("Tracer", self.tracer)
        self.backend = QComboBox(self)
        self.backend.addItems(list(BACKENDS))
        self.device = QComboBox(self)
        self.device.addItems(list(DEVICES))
        form.addRow("Backend", self.backend)
        form.addRow("Device", self.device)
        d = Limits()
        self.limits: dict[str, QDoubleSpinBox] = {}
        for key, label, lo, hi in LIMIT_FIELDS:
            box = QDoubleSpinBox(self)
            box.setRange(lo, hi)
            box.setDecimals(3 if lo < 1 else 0)
            box.setValue(float(getattr(d, key)))
            box.valueChanged.connect(self.replan)
            self.limits[key] = box
            form.addRow(label, box)
        self.backend.currentIndexChanged.connect(self.replan)
        self.device.currentIndexChanged.connect(
            lambda _i: self.tracer.set_context(self.doc, self.device.currentText())
        )
        self.device.currentIndexChanged.connect(self.replan)
        self.plan_text = QPlainTextEdit(self)
        self.plan_text.setReadOnly(True)
        self.plan_text.setLineWrapMode(QPlainTextEdit.LineWrapMode.WidgetWidth)
        self.approval_label = QLabel("Not approved.", self)
        self.approval_label.setWordWrap(True)
        self.run_button = QPushButton("Approve && run trace", self)
        self.run_button.setDefault(True)
        self.run_button.clicked.connect(self.approve_and_run)
        self.cancel_button = QPushButton("Cancel", self)
        self.cancel_button.clicked.connect(self.cancel)
        self.cancel_button.setEnabled(False)
        self.progress = QProgressBar(self)
        self.progress.setTextVisible(False)
        self.progress.setMaximumHeight(10)
        self.progress.hide()
        self.elapsed = QLabel("", self)
        self.elapsed.setObjectName("Muted")
        row = QHBoxLayout()
        row.addWidget(self.run_button)
        row.addWidget(self.cancel_button)
        row.addWidget(self.progress, 1)
        row.addWidget(self.elapsed)
        self.outcome = QLabel("", self)
        self.outcome.setWordWrap(True)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(12, 12, 12, 12)
        lay.addWidget(title)
        lay.addWidget(intro)
        lay.addLayout(form)
        lay.addWidget(QLabel("Plan (shown before anything runs)", self))
        lay.addWidget(self.plan_text, 1)
        lay.addWidget(self.approval_label)
        lay.addLayout(row)
        lay.addWidget(self.outcome)

    # ------------------------------------------------------------------ state

    def set_document(
        self, doc: Any, revision: str = REVISION_SOURCE, edits_of: str = "", waiting: str = ""
    ) -> None:
        """Plan for ``doc``; an edited revision comes as its private copy with the revision id
        and the file its edits apply to. ``waiting`` explains a missing document."""
        self.cancel()
        self.doc, self.arrays, self.inputs_text = doc, None, ""
        self.input_notes = {}
        self.revision, self.edits_of, self.waiting = revision, edits_of, waiting
        self.outcome.setText("")
        self.tracer.set_context(doc, self.device.currentText())
        self.replan()
        if self.plan is None and not self.running:
            self.trace_runner.close()  # nothing traceable: no idle worker
        self._warm_up()

    def showEvent(self, event: Any) -> None:  # noqa: N802 - Qt override
        super().showEvent(event)
        self._warm_up()

    def _warm_up(self) -> None:
        if self.plan is not None and self.isVisible():
            self.trace_runner.prestart_soon(self.plan.backend)

    def set_inputs(
        self,
        arrays: dict[str, np.ndarray] | None,
        text: str = "",
        notes: dict[str, dict[str, Any]] | None = None,
    ) -> None:
        """The assigned input set; ``notes``: the tokenizer note of each token input."""
        self.arrays = dict(arrays) if arrays is not None else None
        self.inputs_text = text
        self.input_notes = dict(notes or {})
        self.replan()

    def current_limits(self) -> Limits:
        return Limits(**{k: float(b.value()) for k, b in self.limits.items()})

    def replan(self) -> None:
        """Plan again for the current settings; withdraws any approval not yet used."""
        if self.approval is not None and not self.approval.consumed:
            self.approval_label.setText(
                "The settings changed, so the earlier approval was withdrawn; review the "
                "updated plan and approve it again."
            )
        elif not self.running:
            self.approval_label.setText("Not approved.")
        self.approval = None
        self.plan = None
        if self.doc is None:
            self.plan_text.setPlainText(
                self.waiting
                or "Open an ONNX model, a GGUF file or a Hugging Face snapshot to plan a trace."
            )
            self.run_button.setEnabled(False)
            self.planChanged.emit()
            return
        plugin = self.tracer.selected()
        self.backend.setEnabled(not plugin and not self.running)
        try:
            # without a graph there are no inputs to detect: the planner says what can run it
            arrays, note = self._arrays() if self.doc.graph is not None else ({}, "")
            plan = make_plan(
                self.doc,
                arrays,
                self.backend.currentText(),
                self.device.currentText(),
                self.current_limits(),
                revision=self.revision,
                tracer=plugin,
            )
            plan.edits_of = self.edits_of
            if self.arrays is not None:
                plan.inputs.notes = dict(self.input_notes)
            plan.notes.append(note)
        except (NNEditorError, OSError, ValueError) as exc:
            self.plan_text.setPlainText(f"This trace cannot run as set up: {exc}")
            self.run_button.setEnabled(False)
            self.planChanged.emit()
            return
        self.plan = plan
        self.plan_text.setPlainText("\n".join(plan.describe()))
        self.run_button.setEnabled(not self.running)
        self.planChanged.emit()

    def _arrays(self) -> tuple[dict[str, np.ndarray], str]:
        if self.arrays is not None:
            return self.arrays, f"inputs: {self.inputs_text or 'assigned set'}"
        from nneditor.inputs import build_inputs, detect_inputs

        plan = detect_inputs(self.doc)
        notes = "; ".join(plan.assumptions)
        return build_inputs(plan), "inputs: automatic from each input's preset (none assigned)" + (
            f"; {notes}" if notes else ""
        )

    @property
    def running(self) -> bool:
        return bool(self.rid)

    # ------------------------------------------------------------------ run

    def approve_current(self) -> Approval | None:
        """The user's consent for the plan as shown (one run)."""
        if self.plan is None:
            return None
        try:
            self.approval = approve(self.plan)
        except NNEditorError as exc:
            self.approval_label.setText(str(exc))
            self.replan()
            return None
        self.approval_label.setText(
            f"Approved for one run (approval {self.approval.id[:8]}, digest "
            f"{self.approval.digest[:12]}…)."
        )
        return self.approval

    def approve_and_run(self) -> int:
        if self.running or self.approve_current() is None:
            return 0
        return self.run_approved()

    def run_approved(self) -> int:
        plan, approval = self.plan, self.approval
        if plan is None or approval is None or self.doc is None:
            return 0
        out = new_run_dir(self.doc.path)
        runner, hooks = self.trace_runner, self.test_hooks

        def job(handle: JobHandle) -> TraceResult:
            def on_event(msg: dict[str, Any]) -> None:
                if msg.get("event") == "progress":
                    handle.progress(int(msg["done"]), int(msg["total"]), "writing captures")
                elif msg.get("event") == "stage":
                    handle.progress(handle.done, max(handle.total, 1), str(msg.get("stage", "")))

            return runner.run(
                plan, approval, out, on_event=on_event, token=handle.token, test_hooks=hooks
            )

        self._set_running(True)
        self.rid = self.runner.submit(
            job,
            self._finished,
            channel="trace",
            on_progress=self._on_progress,
            on_discard=_unpublish,
            label="Trace",
        )
        return self.rid

    def cancel(self) -> None:
        if self.rid:
            self.runner.cancel(self.rid)
            self.outcome.setText("Cancelling… the worker is being stopped.")

    def _set_running(self, on: bool) -> None:
        self.run_button.setEnabled(not on and self.plan is not None)
        self.cancel_button.setEnabled(on)
        for w in (self.tracer, self.backend, self.device, *self.limits.values()):
            w.setEnabled(not on)
        if not on and self.tracer.selected():
            self.backend.setEnabled(False)  # a plugin brings its own runtime
        self.progress.setVisible(on)
        if on:
            self.progress.setRange(0, 0)
            self._started = time.perf_counter()
            self.outcome.setStyleSheet("")
            self.outcome.setText("Tracing…")
            self._clock.start()
        else:
            self._clock.stop()

    def _tick(self) -> None:
        self.elapsed.setText(f"{time.perf_counter() - self._started:.1f} s")

    def _on_progress(self, done: int, total: int, message: str) -> None:
        if total > 1:
            self.progress.setRange(0, total)
            self.progress.setValue(done)
        if message:
            self.outcome.setText(f"Tracing… {message}")

    def _finished(self, res: JobResult[Any]) -> None:
        self.rid = 0
        self._tick()
        self._set_running(False)
        self.approval_label.setText("The approval was used by this run; approve again to rerun.")
        value = res.value if isinstance(res.value, TraceResult) else None
        self.result = value
        if res.cancelled:
            _unpublish(value)
            self._fail("The trace was cancelled; nothing was published.")
        elif res.error is not None:
            self._fail(f"The trace could not run: {res.error}")
        elif value is None or not value.published or value.out_dir is None:
            msg = value.message if value is not None else "no result"
            self._fail(f"The trace {value.status if value else 'failed'}: {msg}")
        else:
            self.outcome.setStyleSheet("")
            self.outcome.setText(
                f"{value.status}: {value.message} (provider {value.provider}, "
                f"{value.elapsed_s:.2f} s)"
            )
            try:
                run = load_run(value.out_dir)
            except NNEditorError as exc:
                self._fail(str(exc))
            else:
                self.traceFinished.emit(run)
        self.replan()
        self.idle.emit()

    def _fail(self, text: str) -> None:
        self.outcome.setStyleSheet("color: #b91c1c;")
        self.outcome.setText(text)
        self.traceFailed.emit(text)

    def shutdown(self) -> None:
        self.runner.shutdown()
        self.trace_runner.close()


def _warm_plan_caches() -> None:
    from nneditor.tracing.identity import code_fingerprint
    from nneditor.tracing.providers import installed_providers

    with contextlib.suppress(Exception):  # planning reports any real problem itself
        installed_providers()
        code_fingerprint()


def _unpublish(value: Any) -> None:
    """A run whose result will not be shown (cancelled) must leave no published trace."""
    if isinstance(value, TraceResult) and value.out_dir is not None:
        shutil.rmtree(value.out_dir, ignore_errors=True)
        value.out_dir = None
