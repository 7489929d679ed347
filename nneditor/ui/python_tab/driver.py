"""Drive the script engine from the GUI thread without blocking it.

:class:`ScriptDriver` starts a run with :func:`nneditor.scripting.start_script` and polls it
from a ``QTimer``; streamed stdout/stderr arrive as :attr:`ScriptDriver.output` signals, the
end as :attr:`ScriptDriver.finished` with the engine's :class:`ScriptResult`.

Invariants:
- At most one run at a time; ``poll()``/``stop()`` are only called on the GUI thread.
- Output is handed on in order, at most ``FLUSH_CHARS`` characters per timer tick; ``finished``
  is emitted only after all of it.
- Output streamed during the run plus what the final result adds (text written at the
  descriptor level, which the worker appends at the end) is emitted exactly once.
- :class:`RunGuard` is a plain object that outlives the widgets: connected to ``destroyed``,
  it kills a running worker and deletes run folders even when no close event arrives, and
  :func:`close_on_quit` does the same when the application quits.
"""

from __future__ import annotations

import shutil
import tempfile
import time
import weakref
from pathlib import Path
from typing import Any

from PySide6.QtCore import QCoreApplication, QObject, QTimer, Signal

from nneditor.io.scratch import PYTHON_TAB_PREFIX, staging_dir
from nneditor.scripting import ScriptProcess, ScriptResult, start_script
from nneditor.scripting.protocol import EV_PHASE, EV_STDERR, EV_STDOUT

POLL_MS = 50
FLUSH_CHARS = 100_000  # text handed to the output pane per tick, so a flood cannot freeze it


class RunGuard:
    """Owns the current worker and the run folders; ``close()`` is safe to call repeatedly."""

    def __init__(self, workdir: Path | None) -> None:
        self.owned = workdir is None
        self.workdir = (
            staging_dir(Path(tempfile.gettempdir()), PYTHON_TAB_PREFIX)
            if workdir is None
            else workdir
        )
        self.process: ScriptProcess | None = None
        self.run_dirs: list[Path] = []

    def stop(self) -> ScriptResult | None:
        """Kill the running worker (if any); returns its final result."""
        process = self.process
        if process is None:
            return None
        return process.stop()  # no-op returning the result when it already ended

    def forget_runs(self, keep: Path | None = None) -> None:
        """Delete every finished run's folder except ``keep``."""
        for run_dir in list(self.run_dirs):
            if run_dir != keep:
                shutil.rmtree(run_dir, ignore_errors=True)
                self.run_dirs.remove(run_dir)

    def close(self) -> None:
        """Stop the worker, delete run folders, and the work folder if the guard created it."""
        self.stop()
        self.forget_runs()
        if self.owned:
            shutil.rmtree(self.workdir, ignore_errors=True)


def close_on_quit(guard: RunGuard) -> None:
    """Also close ``guard`` when the application quits (held weakly: no leak per tab)."""
    app = QCoreApplication.instance()
    if app is None:
        return
    ref = weakref.ref(guard)

    def close() -> None:
        alive = ref()
        if alive is not None:
            alive.close()

    app.aboutToQuit.connect(close)


class ScriptDriver(QObject):
    """One run at a time, polled from a timer; emits output, phase changes and the result."""

    output = Signal(str, str)  # kind ("stdout" | "stderr"), text
    phaseChanged = Signal(str)  # noqa: N815 (Qt naming)
    finished = Signal(object)  # ScriptResult

    def __init__(self, guard: RunGuard, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.guard = guard
        self._timer = QTimer(self)
        self._timer.setInterval(POLL_MS)
        self._timer.timeout.connect(self.poll)
        self._pending: list[tuple[str, list[str]]] = []  # (kind, text parts) in order
        self._streamed: dict[str, list[str]] = {EV_STDOUT: [], EV_STDERR: []}
        self._started_at = 0.0
        self.phase = "idle"

    @property
    def process(self) -> ScriptProcess | None:
        return self.guard.process

    @property
    def running(self) -> bool:
        process = self.guard.process
        return process is not None and process.result is None

    @property
    def elapsed_s(self) -> float:
        return time.monotonic() - self._started_at if self.running else 0.0

    def start(
        self,
        code: str,
        tensor_path: Path | None,
        metadata: dict[str, Any],
        timeout_s: float | None,
        max_ram_mb: int,
        tensor_location: dict[str, Any] | None = None,
    ) -> ScriptProcess:
        """Start a fresh worker (raises ValueError/TypeError/OSError if it cannot start)."""
        if self.running:
            raise RuntimeError("a script is already running")
        self.guard.forget_runs()
        self._pending.clear()
        self._streamed = {EV_STDOUT: [], EV_STDERR: []}
        self._started_at = time.monotonic()
        process = start_script(
            code,
            tensor_path,
            metadata,
            timeout_s=timeout_s,
            max_ram_mb=max_ram_mb,
            workdir=self.guard.workdir,
            on_event=self._on_event,
            tensor_location=tensor_location,
        )
        self.guard.process = process
        self.guard.run_dirs.append(process.run_dir)
        self._set_phase("starting")
        self._timer.start()
        return process

    def stop(self) -> None:
        """Kill the running worker; ``finished`` is emitted with status ``stopped``."""
        if self.running:
            self.guard.stop()
            while self._timer.isActive():
                self.poll()

    def poll(self) -> None:
        """Timer tick: deliver streamed output; on the end, emit ``finished`` once."""
        process = self.guard.process
        if process is None:
            self._timer.stop()
            return
        result = process.poll()
        self._flush()
        if result is not None and not self._pending and self._timer.isActive():
            self._timer.stop()
            self._emit_tail(result)
            self._set_phase("finished")
            self.finished.emit(result)

    def _on_event(self, event: dict[str, Any]) -> None:
        kind = event.get("event")
        if kind in (EV_STDOUT, EV_STDERR):
            text = str(event.get("text", ""))
            self._streamed[str(kind)].append(text)
            if self._pending and self._pending[-1][0] == kind:
                self._pending[-1][1].append(text)
            else:
                self._pending.append((str(kind), [text]))
        elif kind == EV_PHASE:
            self._set_phase(str(event.get("phase")))

    def _flush(self, budget: int = FLUSH_CHARS) -> None:
        while self._pending and budget > 0:
            kind, parts = self._pending[0]
            text = "".join(parts)
            if len(text) > budget:
                self._pending[0] = (kind, [text[budget:]])
                text = text[:budget]
            else:
                self._pending.pop(0)
            budget -= len(text)
            self.output.emit(kind, text)

    def _emit_tail(self, result: ScriptResult) -> None:
        """Emit what the final text adds to the streamed text (descriptor-level output)."""
        for kind, final in ((EV_STDOUT, result.stdout), (EV_STDERR, result.stderr)):
            streamed = "".join(self._streamed[kind])
            if len(final) > len(streamed) and final.startswith(streamed):
                self.output.emit(kind, final[len(streamed) :])

    def _set_phase(self, phase: str) -> None:
        if phase != self.phase:
            self.phase = phase
            self.phaseChanged.emit(phase)
