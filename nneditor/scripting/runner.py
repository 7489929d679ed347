"""Run a user script on a captured tensor in a fresh worker process, with limits.

``run_script(...)`` blocks and returns a :class:`ScriptResult`. ``start_script(...)`` returns a
:class:`ScriptProcess` at once for a GUI: call :meth:`ScriptProcess.poll` from a timer (events
reach ``on_event`` on the caller's thread, inside ``poll``), :meth:`~ScriptProcess.stop` for
the Stop button, or :meth:`~ScriptProcess.wait` to block.

Limits:
- ``timeout_s`` bounds the script's own execution (from its first statement). Starting Python,
  importing the preloaded libraries and copying the tensor get ``STARTUP_ALLOWANCE_S`` more;
  saving figures and the result array after the script gets ``SAVE_ALLOWANCE_S``.
- ``max_ram_mb`` is the RAM the script may use on top of the interpreter and the preloaded
  libraries (see :mod:`nneditor.scripting.limits`); ``0`` disables it.
- A timeout, a Stop or the end of the run kills the worker's whole process tree.

Invariants:
- Each run gets a fresh run folder (created inside ``workdir`` or the system temp folder) that
  is left in place: figures and ``result.npy`` live there. The caller deletes it when done.
- The captured ``.npy`` is only ever read (by the worker, through a read-only map).
- This is isolation, not security: the script runs with the user's rights and may read or
  write any file; it only cannot take the app down with it.
"""

from __future__ import annotations

import contextlib
import json
import queue
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from nneditor.jobs.protocol import CancelToken
from nneditor.scripting import processes, results
from nneditor.scripting.protocol import (
    EV_FINISHED,
    EV_PHASE,
    EV_STARTED,
    EV_STDERR,
    EV_STDOUT,
    MAX_FIGURES,
    MAX_OUTPUT_CHARS,
    MAX_REPR_CHARS,
    PHASE_RUNNING,
    PHASE_SAVING,
    PROTOCOL_VERSION,
    REQUEST_FILE,
    RESULT_FILE,
    STOPPED,
    TIMEOUT,
    read_json,
    write_json_atomic,
)
from nneditor.scripting.results import ScriptResult

EventCallback = Callable[[dict[str, Any]], None]

STARTUP_ALLOWANCE_S = 60.0
SAVE_ALLOWANCE_S = 30.0
READER_JOIN_S = 2.0
POLL_INTERVAL_S = 0.02

__all__ = ["ScriptProcess", "ScriptResult", "run_script", "start_script"]


def run_script(
    code: str,
    tensor_path: Path | None,
    metadata: dict[str, Any] | None,
    *,
    timeout_s: float | None = 60,
    max_ram_mb: int = 2048,
    workdir: Path | None = None,
    on_event: EventCallback | None = None,
    cancel: CancelToken | None = None,
    python: str | None = None,
    max_output_chars: int = MAX_OUTPUT_CHARS,
    tensor_location: dict[str, Any] | None = None,
) -> ScriptResult:
    """Run ``code`` on a private copy of the tensor in ``tensor_path``; blocks until it ends.

    ``tensor_path`` may be None (then ``tensor`` is None in the script). ``metadata`` travels
    as JSON: tuples arrive as lists, numpy scalars and arrays as plain numbers and lists.
    Raises ValueError/TypeError for arguments that cannot be passed, OSError if the worker
    cannot be started; everything the script does is reported in the result instead.
    """
    process = start_script(
        code,
        tensor_path,
        metadata,
        timeout_s=timeout_s,
        max_ram_mb=max_ram_mb,
        workdir=workdir,
        on_event=on_event,
        cancel=cancel,
        python=python,
        max_output_chars=max_output_chars,
        tensor_location=tensor_location,
    )
    with process:
        result = process.wait()
    assert result is not None  # wait() without a timeout returns only at the end
    return result


def start_script(
    code: str,
    tensor_path: Path | None,
    metadata: dict[str, Any] | None,
    *,
    timeout_s: float | None = 60,
    max_ram_mb: int = 2048,
    workdir: Path | None = None,
    on_event: EventCallback | None = None,
    cancel: CancelToken | None = None,
    python: str | None = None,
    max_output_chars: int = MAX_OUTPUT_CHARS,
    tensor_location: dict[str, Any] | None = None,
) -> ScriptProcess:
    """Prepare a run folder and start the worker; returns without waiting.

    ``tensor_location`` (offset, dtype, shape): the tensor is that slice of ``tensor_path``
    (a trace's capture container) rather than the whole file as an .npy."""
    if not isinstance(code, str):
        raise TypeError(f"code must be a str, not {type(code).__name__}")
    if timeout_s is not None and not timeout_s > 0:
        raise ValueError(
            f"timeout_s must be a positive number of seconds or None, not {timeout_s!r}"
        )
    plain_metadata = _jsonable_metadata(metadata or {})
    run_dir = _make_run_dir(workdir)
    request = {
        "protocol": PROTOCOL_VERSION,
        "code": code,
        "tensor_path": None if tensor_path is None else str(Path(tensor_path).resolve()),
        "tensor_location": _plain_location(tensor_location),
        "metadata": plain_metadata,
        "max_ram_mb": int(max_ram_mb),
        "max_output_chars": int(max_output_chars),
        "max_repr_chars": MAX_REPR_CHARS,
        "max_figures": MAX_FIGURES,
    }
    write_json_atomic(run_dir / REQUEST_FILE, request)
    proc = processes.spawn_worker(run_dir, python)
    return ScriptProcess(proc, run_dir, timeout_s, int(max_ram_mb), on_event, cancel)


def _make_run_dir(workdir: Path | None) -> Path:
    if workdir is not None:
        Path(workdir).mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return Path(tempfile.mkdtemp(prefix=f"nneditor-script-{stamp}-", dir=workdir)).resolve()


def _plain_location(location: dict[str, Any] | None) -> dict[str, Any] | None:
    """The tensor's place inside a capture container, as JSON the worker checks again."""
    if not location:
        return None
    try:
        return {
            "offset": int(location["offset"]),
            "dtype": str(location["dtype"]),
            "shape": [int(d) for d in location["shape"]],
        }
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"tensor_location needs offset, dtype and shape ({exc})") from None


def _jsonable_metadata(metadata: dict[str, Any]) -> dict[str, Any]:
    """Metadata as JSON (tuples become lists, numpy scalars plain numbers)."""
    try:
        text = json.dumps(metadata, default=_json_default, allow_nan=True)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"metadata cannot be passed to the script: {exc}") from None
    value = json.loads(text)
    if not isinstance(value, dict):
        raise ValueError("metadata must be a dict")
    return value


def _json_default(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    tolist = getattr(value, "tolist", None)  # numpy scalars and (small) arrays
    if callable(tolist):
        return tolist()
    raise TypeError(f"a value of type {type(value).__name__} is not JSON serializable")


class ScriptProcess:
    """A running script worker. Not thread-safe: drive it from one thread (the GUI's)."""

    def __init__(
        self,
        proc: subprocess.Popen[bytes],
        run_dir: Path,
        timeout_s: float | None,
        max_ram_mb: int,
        on_event: EventCallback | None,
        cancel: CancelToken | None,
    ) -> None:
        self._proc = proc
        self.run_dir = run_dir
        self.timeout_s = timeout_s
        self._max_ram_mb = max_ram_mb
        self._on_event = on_event
        self._cancel = cancel
        self._started = time.monotonic()
        self._running_at: float | None = None
        self._deadline = self._startup_deadline()
        self.phase = "starting"
        self._stdout: list[str] = []
        self._stderr: list[str] = []
        self._events: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._reader = threading.Thread(
            target=_read_events,
            args=(proc.stdout, self._events),
            daemon=True,
            name="nneditor-script-events",
        )
        self._reader.start()
        self._result: ScriptResult | None = None

    @property
    def pid(self) -> int:
        """The worker's process id."""
        return int(self._proc.pid)

    @property
    def result(self) -> ScriptResult | None:
        """The final result once the run ended, else None."""
        return self._result

    def poll(self) -> ScriptResult | None:
        """Deliver pending events, enforce limits; returns the result once the run ended."""
        if self._result is not None:
            return self._result
        self._drain()
        if self._cancel is not None and self._cancel.cancelled:
            self._end_forced(STOPPED, "The script was stopped before it finished.")
        elif processes.has_exited(self._proc):
            self._finalize()
        elif self._deadline is not None and time.monotonic() > self._deadline:
            self._end_forced(TIMEOUT, self._timeout_message())
        return self._result

    def stop(self) -> ScriptResult:
        """Kill the run (Stop button); returns the final result (``stopped`` unless it ended)."""
        if self._result is None:
            self._drain()
            self._end_forced(STOPPED, "The script was stopped before it finished.")
        assert self._result is not None
        return self._result

    def wait(self, timeout: float | None = None) -> ScriptResult | None:
        """Block until the run ends (or ``timeout`` seconds pass: then None)."""
        limit = None if timeout is None else time.monotonic() + timeout
        while True:
            result = self.poll()
            if result is not None:
                return result
            if limit is not None and time.monotonic() >= limit:
                return None
            try:
                event = self._events.get(timeout=POLL_INTERVAL_S)
            except queue.Empty:
                continue
            self._handle(event)

    def __enter__(self) -> ScriptProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._result is None:
            self.stop()

    # -- internals -------------------------------------------------------------------------

    def _drain(self) -> None:
        while True:
            try:
                event = self._events.get_nowait()
            except queue.Empty:
                return
            self._handle(event)

    def _handle(self, event: dict[str, Any] | None) -> None:
        if event is None:  # end of the event stream
            return
        kind = event.get("event")
        if kind == EV_STDOUT:
            self._stdout.append(str(event.get("text", "")))
        elif kind == EV_STDERR:
            self._stderr.append(str(event.get("text", "")))
        elif kind == EV_PHASE:
            self._enter_phase(str(event.get("phase")))
        elif kind == EV_STARTED:
            self.phase = "loading"
        if self._on_event is not None:
            self._on_event(event)

    def _enter_phase(self, phase: str) -> None:
        self.phase = phase
        now = time.monotonic()
        if phase == PHASE_RUNNING:
            self._running_at = now
            self._deadline = None if self.timeout_s is None else now + self.timeout_s
        elif phase == PHASE_SAVING:
            self._deadline = now + SAVE_ALLOWANCE_S

    def _startup_deadline(self) -> float | None:
        if self.timeout_s is None:
            return None
        return self._started + self.timeout_s + STARTUP_ALLOWANCE_S

    def _timeout_message(self) -> str:
        if self.phase == PHASE_RUNNING:
            return f"The script did not finish within the {self.timeout_s:g} s timeout and was stopped."
        if self.phase == PHASE_SAVING:
            return "Saving the script's figures and result took too long; the run was stopped."
        return "The script worker did not start in time (importing libraries or loading the tensor); the run was stopped."

    def _end_forced(self, status: str, message: str) -> None:
        if processes.has_exited(self._proc):
            self._finalize()  # it finished on its own: its own result wins
            return
        processes.kill_tree(self._proc)
        self._finalize(forced=(status, message))

    def _finalize(self, forced: tuple[str, str] | None = None) -> None:
        processes.kill_group(self._proc)  # leftovers the script started, before reaping
        returncode = self._proc.wait()
        self._reader.join(timeout=READER_JOIN_S)
        self._drain()
        if not self._reader.is_alive():  # else a forked leftover still holds the pipe open
            _close(self._proc.stdout)
        stdout, stderr = "".join(self._stdout), "".join(self._stderr)
        result_file = self.run_dir / RESULT_FILE
        if forced is not None:
            result = results.forced(forced[0], forced[1], self.run_dir, stdout, stderr, returncode)
        elif result_file.is_file():
            result = self._read_result(result_file, stdout, stderr, returncode)
        else:
            result = results.crashed(self.run_dir, returncode, stdout, stderr, self._max_ram_mb)
        result.returncode = returncode
        if self._running_at is not None:  # from spawn, interpreter start included
            result.startup_s = round(self._running_at - self._started, 4)
        result.duration_s = round(time.monotonic() - self._started, 4)
        self._result = result
        if self._on_event is not None:
            self._on_event({"event": EV_FINISHED, "status": result.status})

    def _read_result(
        self, path: Path, stdout: str, stderr: str, returncode: int | None
    ) -> ScriptResult:
        try:
            payload = read_json(path)
        except (OSError, ValueError) as exc:
            result = results.crashed(self.run_dir, returncode, stdout, stderr, self._max_ram_mb)
            result.notes.append(f"The worker's result file could not be read: {exc}.")
            return result
        return results.from_worker(payload, self.run_dir)


def _read_events(stream: IO[bytes], sink: queue.Queue[dict[str, Any] | None]) -> None:
    """Reader thread: parse JSON lines from the worker until end of stream."""
    try:
        for raw in iter(stream.readline, b""):
            try:
                event = json.loads(raw)
            except ValueError:
                continue  # not ours; the protocol channel carries only JSON lines
            if isinstance(event, dict) and "event" in event:
                sink.put(event)
    except (OSError, ValueError):
        pass
    finally:
        sink.put(None)


def _close(stream: IO[bytes] | None) -> None:
    if stream is not None:
        with contextlib.suppress(OSError):
            stream.close()
