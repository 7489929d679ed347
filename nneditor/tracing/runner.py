"""Parent side of a trace run: approval check, worker process, limits, publication.

Invariants:

- A run starts only after :func:`~nneditor.tracing.approval.verify` passed and the approval
  was consumed; the worker is a separate process (``python -m nneditor.tracing.worker``) in
  its own session / process group, with its stderr in the run folder's log.
- Limits are enforced here as well as in the worker: wall clock, RSS of the whole worker
  process tree (psutil watchdog), and cancellation; each ends the whole process tree
  (``killpg`` plus any descendant that left the group) and waits for it. The address-space
  ceiling travels in the request and the worker applies it to itself with ``resource``
  before reading anything (not ``preexec_fn``, which is unsafe in a threaded parent such as
  the GUI, and which a pre-started worker could not honour).
- A worker serves exactly one request. Once it reports ``done`` (all files flushed) its group
  is sent SIGKILL rather than waiting for interpreter teardown; a helper thread waits for the
  exit (the kernel's unmapping of a large worker takes milliseconds the caller need not wait).
- Results go to a hidden temporary folder beside the destination; it is renamed into place
  only when the worker reported ``done`` (complete or honestly partial). Failed, cancelled,
  timed-out and crashed runs delete it, so they publish nothing.
- Nothing here raises for a worker failure: the caller gets a :class:`TraceResult` saying what
  happened. Refusals before the start (approval, destination) raise with a sentence.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import uuid
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import psutil

from nneditor.errors import NNEditorError
from nneditor.io.crash_points import crash_point
from nneditor.io.scratch import (
    RUN_PREFIX,
    TRACE_WORKER_PREFIX,
    check_free_space,
    staging_dir,
    sweep,
    write_failure,
)
from nneditor.jobs import CancelToken, JobHandle
from nneditor.tracing.approval import Approval, verify
from nneditor.tracing.capture import MANIFEST, patch_manifest_head, write_npy
from nneditor.tracing.plan import TracePlan
from nneditor.tracing.worker_process import (
    WorkerProcess,
    kill_tree,
    reap_group,
    worker_command,
    worker_env,
)

EventCallback = Callable[[dict[str, Any]], None]
POLL_S = 0.02


class RunError(NNEditorError):
    """A run cannot start (destination problems)."""


@dataclass
class TraceResult:
    """What happened. ``status``: ok, partial, failed, cancelled, timeout, memory, crashed."""

    status: str
    message: str
    out_dir: Path | None = None
    manifest: dict[str, Any] | None = None
    provider: str | None = None
    elapsed_s: float = 0.0
    peak_rss_mb: float = 0.0
    worker_pid: int | None = None
    log_tail: str = ""
    events: list[dict[str, Any]] = field(default_factory=list)
    #: the captures could not be written (disk full, no permission...): not the model's fault
    write_failed: bool = False
    #: the worker's error kind when it failed: "model", "device", "memory" or "internal"
    error_kind: str = ""

    @property
    def published(self) -> bool:
        return self.out_dir is not None

    @property
    def partial(self) -> bool:
        return self.status == "partial"


def build_request(
    plan: TracePlan, approval: Approval, run_dir: Path, inputs: dict[str, str]
) -> dict[str, Any]:
    return {
        "run_dir": str(run_dir),
        "model": plan.model.path,
        "revision": plan.revision,
        "edits_of": plan.edits_of,
        "inputs": inputs,
        "inputs_digest": plan.inputs.digest,
        "input_notes": plan.inputs.notes,
        "backend": plan.backend,
        "backend_request": plan.backend_request,
        "device": plan.device,
        "providers": plan.providers.as_list() if plan.providers else [],
        "strict_device": bool(plan.providers and plan.providers.strict and plan.device != "cpu"),
        "ort_optimization": plan.ort_optimization,
        "capture": list(plan.capture) if plan.capture is not None else None,
        "limits": plan.limits.as_dict(),
        "address_space_bytes": plan.limits.address_space_bytes,
        "approval": {"id": approval.id, "digest": approval.digest},
    }


#: run folders of traces before their owner was named: ``.<dest>.nneditor-run-<12 hex>``
_LEGACY_RUN = re.compile(r"^\..+\.nneditor-run-[0-9a-f]{12}$")


def _prepare_destination(out_dir: Path) -> None:
    if out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())):
        raise RunError(
            f"{out_dir} already exists and is not an empty folder; choose a new folder for the "
            "trace or remove the old one"
        )
    out_dir.parent.mkdir(parents=True, exist_ok=True)


def _write_inputs(plan: TracePlan, run_dir: Path) -> dict[str, str]:
    (run_dir / "inputs").mkdir()
    files = {}
    for i, (name, arr) in enumerate(plan.inputs.arrays.items()):
        rel = f"inputs/{i:03d}.npy"
        write_npy(run_dir / rel, np.asarray(arr), 16 * 2**20)
        files[name] = rel
    return files


def _discard(box: list[WorkerProcess | None]) -> None:
    """Stop an idle worker and delete its log folder."""
    worker, box[0] = box[0], None
    if worker is not None:
        worker.close()
        shutil.rmtree(worker.log_dir, ignore_errors=True)


class TraceRunner:
    """Runs approved plans in worker processes.

    With ``keep_warm=True`` the runner keeps one idle worker started ahead of time (it has
    imported numpy/onnx/onnxruntime and waits for a request; it has read no model), so an
    approved run does not wait for interpreter start-up. Each worker serves exactly one run.
    Call :meth:`close` (or use the runner as a context manager) to stop the idle worker.
    """

    def __init__(
        self,
        python: str | None = None,
        extra_env: dict[str, str] | None = None,
        keep_warm: bool = False,
    ) -> None:
        self.python = python
        self.extra_env = dict(extra_env or {})
        self.keep_warm = keep_warm
        self._box: list[WorkerProcess | None] = [
            None
        ]  # the idle worker (shared with the finalizer)
        self._lock = threading.Lock()
        self._generation = 0  # bumped by close(): a pending pre-start then does nothing
        # an idle worker must not outlive its runner (garbage collection or interpreter exit)
        self._finalizer = weakref.finalize(self, _discard, self._box)

    @property
    def _warm(self) -> WorkerProcess | None:
        return self._box[0]

    def __enter__(self) -> TraceRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _command(self, preload: str = "") -> list[str]:
        return worker_command(preload, self.python)

    def _env(self) -> dict[str, str]:
        return {**worker_env(), **self.extra_env}

    def prestart(self, preload: str = "all") -> None:
        """Start an idle, pre-loaded worker now unless one is already waiting; ``preload``
        names what it imports meanwhile: "all" or one backend ("onnxruntime", "numpy"...)."""
        with self._lock:
            self._prestart_locked(preload)

    def _prestart_locked(self, preload: str = "all") -> None:
        if self._box[0] is not None and self._box[0].alive():
            return
        _discard(self._box)
        log_dir = staging_dir(Path(tempfile.gettempdir()), TRACE_WORKER_PREFIX)
        self._box[0] = WorkerProcess(self._command(preload), self._env(), log_dir)

    def adopt(self, worker: WorkerProcess) -> None:
        """Take ``worker``, started idle by someone else (the CLI's early start), as this
        runner's pre-started worker; any worker waiting before is closed."""
        with self._lock:
            _discard(self._box)
            self._box[0] = worker

    def prestart_soon(self, preload: str = "all") -> None:
        """:meth:`prestart` on a helper thread (process creation stays off the caller's path);
        a :meth:`close` in the meantime cancels it."""
        generation = self._generation

        def start() -> None:
            with self._lock:
                if self._generation == generation:
                    self._prestart_locked(preload)

        threading.Thread(target=start, name="trace-prestart", daemon=True).start()

    def close(self) -> None:
        """Stop the idle worker, if any (and a pre-start still pending)."""
        with self._lock:
            self._generation += 1
            _discard(self._box)

    def _take_worker(self, run_dir: Path) -> WorkerProcess:
        with self._lock:
            warm, self._box[0] = self._box[0], None
        if warm is not None and warm.alive():
            return warm
        _discard([warm])
        return WorkerProcess(self._command(), self._env(), run_dir)

    def run(
        self,
        plan: TracePlan,
        approval: Approval,
        out_dir: str | os.PathLike[str],
        on_event: EventCallback | None = None,
        token: CancelToken | None = None,
        test_hooks: dict[str, Any] | None = None,
    ) -> TraceResult:
        """Verify and consume ``approval``, run a worker, publish into ``out_dir``."""
        verify(approval, plan)
        dest = Path(out_dir).resolve()
        _prepare_destination(dest)
        sweep(dest.parent, (RUN_PREFIX,), legacy=_LEGACY_RUN)  # left by killed traces
        short = check_free_space(dest, plan.limits.capture_bytes)
        if short:
            raise RunError(
                f"{short} (or lower the capture budget, now {plan.limits.capture_mb:g} MB)"
            )
        run_id = uuid.uuid4().hex[:12]
        approval.consume(run_id)
        run_dir = staging_dir(dest.parent, RUN_PREFIX)
        crash_point("trace:staged")
        try:
            inputs = _write_inputs(plan, run_dir)
            request = build_request(plan, approval, run_dir, inputs)
            if plan.plugin is not None:
                request["plugin"] = _snapshot_plugin(plan.plugin, run_dir)
            if test_hooks:
                request["test_hooks"] = test_hooks
            worker = self._take_worker(run_dir)
            crash_point("trace:worker-started")
            result = _Supervisor(plan, run_dir, on_event, token or CancelToken(), dest).run(
                worker, request
            )
        except BaseException:
            shutil.rmtree(run_dir, ignore_errors=True)
            if self.keep_warm:
                self.prestart()
            raise
        if result.status in ("ok", "partial"):
            try:
                result.manifest = _publish(run_dir, dest, result)
                result.out_dir = dest
            except OSError as exc:
                result.status, result.message = "failed", write_failure(exc, dest)
                result.write_failed = True
            except ValueError as exc:
                result.status, result.message = (
                    "failed",
                    f"the trace could not be published ({exc})",
                )
        if result.out_dir is None:
            shutil.rmtree(run_dir, ignore_errors=True)
        if self.keep_warm:
            self.prestart_soon()
        return result


def _snapshot_plugin(plugin: dict[str, str], run_dir: Path) -> dict[str, str]:
    """Copy the approved plugin into the run folder and check it is the code that was
    approved; the worker imports this copy, and the published trace keeps it."""
    from nneditor.tracing.plugins.manifest import PluginError, fingerprint, plugin_files

    source = Path(plugin["folder"])
    copy = run_dir / "tracer-plugin"
    try:
        files = plugin_files(source)
        for rel in files:
            (copy / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source / rel, copy / rel)
        changed = fingerprint(copy) != plugin["fingerprint"]
    except (OSError, PluginError) as exc:
        raise RunError(f"the tracer plugin {plugin['id']} could not be copied: {exc}") from None
    if changed:
        raise RunError(
            f"the tracer plugin {plugin['id']} changed since it was approved ({source}); "
            "plan the trace again and approve the new code"
        )
    return {**plugin, "folder": str(copy)}


def _publish(run_dir: Path, dest: Path, result: TraceResult) -> dict[str, Any]:
    """Add the parent's measurements to the manifest's first line (the values that follow are
    left as the worker wrote them) and rename the run folder into place."""
    manifest_path = run_dir / MANIFEST
    text = manifest_path.read_text(encoding="utf-8")
    manifest = json.loads(text)
    extra = {
        "elapsed_s": round(result.elapsed_s, 6),
        "worker_peak_rss_mb": round(result.peak_rss_mb, 1),
    }
    manifest["run"].update(extra)
    patch_manifest_head(manifest_path, text, {"run": manifest["run"]})
    if dest.exists():
        dest.rmdir()  # empty (checked before the run)
    os.replace(run_dir, dest)
    return manifest


class _Supervisor:
    """Runs one request on one worker process to completion under the plan's limits."""

    def __init__(
        self,
        plan: TracePlan,
        run_dir: Path,
        on_event: EventCallback | None,
        token: CancelToken,
        dest: Path | None = None,
    ) -> None:
        self.plan = plan
        self.run_dir = run_dir
        self.dest = dest or run_dir
        self.on_event = on_event
        self.token = token
        self.result = TraceResult("crashed", "")
        self.terminal: dict[str, Any] | None = None
        self.peak_rss = 0
        self._root: psutil.Process | None = None
        self._children: list[psutil.Process] = []
        self._children_at = 0.0

    def run(self, worker: WorkerProcess, request: dict[str, Any]) -> TraceResult:
        start = time.monotonic()
        self.result.worker_pid = worker.proc.pid
        worker.send(request)
        try:
            stopped = self._supervise(worker, start)
        except BaseException:  # e.g. Ctrl+C in the CLI: the worker is in its own session
            worker.close()  # and would not see the signal; it must not outlive the caller
            raise
        # On POSIX a finished worker's teardown (the kernel unmapping its memory) is awaited
        # by a helper thread: everything is on disk and it was sent SIGKILL. Windows waits,
        # because a folder that is a live process's working directory cannot be renamed.
        finished = stopped is None and self._done() and os.name == "posix"
        own_log = worker.log_dir != self.run_dir  # a pre-started worker's own folder
        if finished:
            if own_log:  # before the helper thread deletes the worker's folder
                shutil.copyfile(worker.log_path, self.run_dir / "worker.log")
            # not a daemon: an exit waits for it, so the pre-started worker's folder goes too
            threading.Thread(
                target=_finish_worker,
                args=(worker, list(self._children), own_log),
                name="trace-worker-cleanup",
            ).start()
        else:
            if stopped is None:
                reap_group(worker.proc.pid)  # a descendant left behind must not outlive the run
            worker.close()
        self._drain(worker)
        self.result.elapsed_s = time.monotonic() - start
        self.result.peak_rss_mb = self.peak_rss / 2**20
        if own_log and not finished:
            shutil.copyfile(worker.log_path, self.run_dir / "worker.log")
            shutil.rmtree(worker.log_dir, ignore_errors=True)
        self.result.log_tail = _tail(self.run_dir / "worker.log")
        self._conclude(worker.proc.returncode, stopped)
        return self.result

    def _drain(self, worker: WorkerProcess, wait_s: float = 0.0) -> None:
        """Handle every queued event; wait up to ``wait_s`` for the first one."""
        while True:
            try:
                msg = worker.events.get(timeout=wait_s) if wait_s else worker.events.get_nowait()
            except queue.Empty:
                return
            wait_s = 0.0
            if msg is None:
                continue
            self.result.events.append(msg)
            kind = msg.get("event")
            if kind == "provider":
                self.result.provider = msg.get("provider")
            if kind in ("done", "error") and self.terminal is None:
                self.terminal = msg
            if self.on_event:
                with contextlib.suppress(Exception):  # a UI callback must not break us
                    self.on_event(msg)

    def _supervise(self, worker: WorkerProcess, start: float) -> str | None:
        limits = self.plan.limits
        proc = worker.proc
        while proc.poll() is None:
            self._drain(worker, POLL_S)  # wakes at once for an event, else polls the limits
            if self._done():
                # Everything is on disk (the worker flushes before "done"); skip its teardown.
                _kill_group(proc)
                return None
            why = None
            if self.token.cancelled:
                why = "cancelled"
            elif time.monotonic() - start > limits.timeout_s:
                why = "timeout"
            elif self._rss(proc) > limits.ram_bytes:
                why = "memory"
            if why:
                kill_tree(proc)
                return why
        return None

    def _done(self) -> bool:
        return self.terminal is not None and self.terminal.get("event") == "done"

    def _rss(self, proc: subprocess.Popen[bytes]) -> int:
        """RSS of the worker (every poll) plus its descendants (list refreshed every 0.25 s:
        finding children scans the whole process table, which is too costly for every poll)."""
        try:
            if self._root is None or self._root.pid != proc.pid:
                self._root = psutil.Process(proc.pid)
            total = self._root.memory_info().rss
            now = time.monotonic()
            if now - self._children_at >= 0.25:
                self._children = self._root.children(recursive=True)
                self._children_at = now
        except psutil.Error:
            return 0
        for child in self._children:
            with contextlib.suppress(psutil.Error):
                total += child.memory_info().rss
        self.peak_rss = max(self.peak_rss, total)
        return total

    def _conclude(self, returncode: int | None, stopped: str | None) -> None:
        r, limits = self.result, self.plan.limits
        if stopped == "cancelled":
            r.status, r.message = "cancelled", "the trace was cancelled; nothing was published"
        elif stopped == "timeout":
            r.status = "timeout"
            r.message = (
                f"the trace exceeded its wall-clock limit of {limits.timeout_s:g} s and was "
                "stopped; nothing was published"
            )
        elif stopped == "memory":
            r.status = "memory"
            r.message = (
                f"the trace worker used more than the RAM ceiling of {limits.max_ram_mb:g} MB "
                "and was stopped; nothing was published"
            )
        elif self.terminal and self.terminal["event"] == "done":
            r.status = "partial" if self.terminal.get("partial") else "ok"
            r.message = _done_message(self.terminal, limits.capture_mb)
        elif self.terminal and self.terminal["event"] == "error":
            kind = self.terminal.get("kind", "internal")
            r.status = "memory" if kind == "memory" else "failed"
            r.error_kind = str(kind)
            detail = self.terminal.get("message", "unknown error")
            if kind == "memory":
                detail = f"{detail} (RAM ceiling {limits.max_ram_mb:g} MB)"
            code = self.terminal.get("errno")
            if isinstance(code, int):  # writing the captures failed: say where and what to do
                r.message = write_failure(OSError(code, detail), self.dest)
                r.write_failed = True
            else:
                r.message = f"the trace failed: {detail}; nothing was published"
        else:
            r.status = "crashed"
            r.message = (
                f"the trace worker stopped unexpectedly ({_exit_text(returncode)}); nothing was "
                "published"
            )


def _done_message(done: dict[str, Any], capture_mb: float) -> str:
    c = done.get("counts", {})
    text = (
        f"traced {c.get('captured', 0)} values captured, {c.get('partial', 0)} partial, "
        f"{c.get('dropped', 0)} not captured"
    )
    if done.get("partial"):
        text += f"; the capture budget of {capture_mb:g} MB was reached, so the trace is partial"
    return text


def _exit_text(code: int | None) -> str:
    if code is None:
        return "no exit status"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the worker's process group (the worker alone where there are no groups)."""
    if os.name == "posix":
        reap_group(proc.pid)
    else:  # pragma: no cover - Windows
        with contextlib.suppress(OSError):
            proc.kill()


def _finish_worker(worker: WorkerProcess, descendants: list[psutil.Process], own_log: bool) -> None:
    """After a completed run: kill descendants the watchdog saw leave the group, wait for the
    killed worker, close its pipes and log, delete a pre-started worker's log folder."""
    for p in descendants:
        with contextlib.suppress(psutil.Error):
            p.kill()
    worker.close()
    psutil.wait_procs(descendants, timeout=5)
    if own_log:
        shutil.rmtree(worker.log_dir, ignore_errors=True)


def _tail(path: Path, limit: int = 4000) -> str:
    try:
        data = path.read_bytes()
    except OSError:
        return ""
    return data[-limit:].decode("utf-8", "replace")


def trace_job(
    runner: TraceRunner, plan: TracePlan, approval: Approval, out_dir: str | os.PathLike[str]
) -> Callable[[JobHandle], TraceResult]:
    """The run as a job (for SyncRunner or a UI thread pool): progress + cancel via the handle."""

    def job(handle: JobHandle) -> TraceResult:
        def on_event(msg: dict[str, Any]) -> None:
            if msg.get("event") == "progress":
                handle.progress(int(msg["done"]), int(msg["total"]), "writing captures")
            elif msg.get("event") == "stage":
                handle.progress(handle.done, max(handle.total, 1), str(msg.get("stage", "")))

        return runner.run(plan, approval, out_dir, on_event=on_event, token=handle.token)

    return job
