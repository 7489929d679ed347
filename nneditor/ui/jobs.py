"""Runs core jobs (``fn(handle) -> value``) on a QThreadPool; results arrive on the GUI thread.

Invariants:
- Each submission gets a request id; per *channel* only the newest request's result is
  delivered (older ones are stale and dropped), so a quick sequence of navigations never
  shows an out-of-date level.
- Callbacks (``on_done``, ``on_progress``) always run on the thread that owns the runner
  (the GUI thread), through queued signals; a job never touches widgets.
- ``shutdown()`` cancels every running job and waits for the pool: no thread outlives the
  window.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import QObject, QRunnable, QThreadPool, Signal

from nneditor.errors import CancelledError
from nneditor.jobs.protocol import CancelToken, JobHandle, JobResult

DoneCallback = Callable[[JobResult[Any]], None]
ProgressCallback = Callable[[int, int, str], None]


class _Bridge(QObject):
    """Lives on the GUI thread; worker threads emit, Qt queues the calls across threads."""

    finished = Signal(int, object)
    progressed = Signal(int, int, int, str)


class _Runnable(QRunnable):
    def __init__(
        self,
        rid: int,
        job: Callable[[JobHandle], Any],
        token: CancelToken,
        bridge: _Bridge,
        on_discard: Callable[[Any], None] | None,
    ):
        super().__init__()
        self.setAutoDelete(True)
        self._rid = rid
        self._job = job
        self._token = token
        self._bridge = bridge
        self._discard = on_discard

    def run(self) -> None:
        rid, bridge = self._rid, self._bridge
        handle = JobHandle(self._token, lambda d, t, m: bridge.progressed.emit(rid, d, t, m))
        start = time.perf_counter()
        try:
            value = self._job(handle)
            if self._token.cancelled:  # superseded or shut down: never delivered
                if self._discard is not None and value is not None:
                    self._discard(value)
                raise CancelledError("cancelled")
            result: JobResult[Any] = JobResult(value, elapsed_s=time.perf_counter() - start)
        except CancelledError:
            result = JobResult(
                handle.partial_value,
                partial=handle.partial_value is not None,
                cancelled=True,
                elapsed_s=time.perf_counter() - start,
            )
        except BaseException as exc:  # reported to the GUI, never raised in the pool thread
            result = JobResult(None, error=exc, elapsed_s=time.perf_counter() - start)
        bridge.finished.emit(rid, result)


@dataclass
class _Pending:
    channel: str
    token: CancelToken
    on_done: DoneCallback | None
    on_progress: ProgressCallback | None
    label: str


class QtJobRunner(QObject):
    """Submits jobs to its own thread pool; see the module docstring for the guarantees."""

    started = Signal(int, str)  # request id, label
    progress = Signal(int, int, int, str)  # request id, done, total, message
    finished = Signal(int)  # request id (after its callback ran or it was dropped)

    def __init__(self, parent: QObject | None = None, max_threads: int = 2) -> None:
        super().__init__(parent)
        self.pool = QThreadPool(self)
        self.pool.setMaxThreadCount(max_threads)
        self._bridge = _Bridge(self)
        self._bridge.finished.connect(self._on_finished)
        self._bridge.progressed.connect(self._on_progress)
        self._ids = itertools.count(1)
        self._pending: dict[int, _Pending] = {}
        self._latest: dict[str, int] = {}
        self._closed = False

    def submit(
        self,
        job: Callable[[JobHandle], Any],
        on_done: DoneCallback | None = None,
        *,
        channel: str = "",
        on_progress: ProgressCallback | None = None,
        on_discard: Callable[[Any], None] | None = None,
        label: str = "",
    ) -> int:
        """Start ``job``; returns its request id. A newer job on the same channel makes it stale.

        ``on_discard(value)`` runs on the worker thread for a value that will never be
        delivered (the job was cancelled or superseded), to release what it holds.
        """
        if self._closed:
            raise RuntimeError("the job runner was shut down")
        rid = next(self._ids)
        token = CancelToken()
        if channel:
            old = self._latest.get(channel)
            if old is not None and old in self._pending:
                self._pending[old].token.cancel()
            self._latest[channel] = rid
        self._pending[rid] = _Pending(channel, token, on_done, on_progress, label)
        self.started.emit(rid, label)
        self.pool.start(_Runnable(rid, job, token, self._bridge, on_discard))
        return rid

    def cancel(self, rid: int | None = None) -> None:
        """Cancel one request, or every pending request when ``rid`` is None."""
        for key, p in list(self._pending.items()):
            if rid is None or key == rid:
                p.token.cancel()

    def is_stale(self, rid: int) -> bool:
        p = self._pending.get(rid)
        return p is None or bool(p.channel and self._latest.get(p.channel) != rid)

    @property
    def busy(self) -> bool:
        return bool(self._pending)

    def wait(self, timeout_ms: int = -1) -> bool:
        """Block until every job finished (callbacks are delivered on the next event loop pass)."""
        return self.pool.waitForDone(timeout_ms)

    def shutdown(self, timeout_ms: int = 30000) -> bool:
        """Cancel everything and wait for the pool; later results are dropped."""
        self._closed = True
        self.cancel()
        done = self.pool.waitForDone(timeout_ms)
        self._pending.clear()
        return done

    def _on_progress(self, rid: int, done: int, total: int, message: str) -> None:
        p = self._pending.get(rid)
        if p is None or self.is_stale(rid):
            return
        if p.on_progress is not None:
            p.on_progress(done, total, message)
        self.progress.emit(rid, done, total, message)

    def _on_finished(self, rid: int, result: JobResult[Any]) -> None:
        stale = self.is_stale(rid)
        p = self._pending.pop(rid, None)
        if p is not None and not stale and p.on_done is not None and not self._closed:
            p.on_done(result)
        self.finished.emit(rid)
