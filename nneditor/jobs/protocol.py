"""The job protocol shared by the CLI, tests and the UI.

A job is a plain callable ``fn(handle) -> value``. It reports progress through the handle,
calls ``handle.check_cancelled()`` between chunks of work, and, when it stops early with
something useful, returns it through ``handle.partial(value)`` semantics: a cancelled job's
last reported partial value is returned as a :class:`JobResult` with ``partial=True``.

Runners decide *where* a job runs: :class:`SyncRunner` runs inline (tests, CLI); the UI runs
jobs on a ``QThreadPool`` and delivers results on the GUI thread. Neither changes what a job is.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from nneditor.errors import CancelledError

T = TypeVar("T")


class CancelToken:
    """Thread-safe cancellation flag."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def cancel(self) -> None:
        self._event.set()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()


ProgressCallback = Callable[[int, int, str], None]


class JobHandle:
    """What a running job sees: progress reporting, cancellation and partial results."""

    def __init__(
        self,
        token: CancelToken | None = None,
        on_progress: ProgressCallback | None = None,
        min_interval_s: float = 0.05,
    ) -> None:
        self.token = token or CancelToken()
        self._on_progress = on_progress
        self._min_interval = min_interval_s
        self._last_emit = 0.0
        self.done = 0
        self.total = 0
        self.message = ""
        self.partial_value: Any = None

    @property
    def cancelled(self) -> bool:
        return self.token.cancelled

    def check_cancelled(self) -> None:
        """Raise :class:`CancelledError` if the job was cancelled."""
        if self.token.cancelled:
            raise CancelledError("cancelled by the user")

    def progress(self, done: int, total: int, message: str = "") -> None:
        """Report progress; callbacks are rate-limited except for the final step."""
        self.done, self.total = done, total
        if message:
            self.message = message
        if self._on_progress is None:
            return
        now = time.monotonic()
        if done >= total or now - self._last_emit >= self._min_interval:
            self._last_emit = now
            self._on_progress(done, total, self.message)

    def set_partial(self, value: Any) -> None:
        """Record the best result so far, returned if the job is cancelled."""
        self.partial_value = value


@dataclass
class JobResult(Generic[T]):
    value: T | None
    partial: bool = False
    cancelled: bool = False
    error: BaseException | None = None
    elapsed_s: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.error is None and not self.cancelled


Job = Callable[[JobHandle], T]


class SyncRunner:
    """Runs a job inline on the calling thread. Used by tests and the CLI."""

    def run(
        self,
        job: Callable[[JobHandle], T],
        token: CancelToken | None = None,
        on_progress: ProgressCallback | None = None,
    ) -> JobResult[T]:
        handle = JobHandle(token, on_progress)
        start = time.perf_counter()
        try:
            value = job(handle)
        except CancelledError:
            return JobResult(
                handle.partial_value,
                partial=handle.partial_value is not None,
                cancelled=True,
                elapsed_s=time.perf_counter() - start,
            )
        except Exception as exc:  # reported, never raised through the runner
            return JobResult(None, error=exc, elapsed_s=time.perf_counter() - start)
        return JobResult(value, elapsed_s=time.perf_counter() - start)
