"""A trace worker process as the host sees it: start, send the request, read events, kill.

Kept free of numpy, onnx and psutil at import (psutil is imported when a worker is killed), so
that the CLI can start a worker within a few tens of milliseconds of its own start, before it
imports anything a command needs (see :mod:`nneditor.cli.trace_early`).
"""

from __future__ import annotations

import contextlib
import os
import queue
import select
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from nneditor.platform.runtime_env import quiet_runtimes
from nneditor.tracing.protocol import ProtocolError, decode, run_request

_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])
WORKER_MODULE = "nneditor.tracing.worker"
#: what ``--preload`` may name: everything, or the runtime of one backend
PRELOADS = ("all", "onnxruntime", "reference", "numpy", "plugin")


def worker_env() -> dict[str, str]:
    env = dict(quiet_runtimes(dict(os.environ)))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (_PACKAGE_ROOT, env.get("PYTHONPATH", "")) if p)
    env.setdefault("MALLOC_ARENA_MAX", "2")
    env["PYTHONUNBUFFERED"] = "1"
    env.pop("QT_QPA_PLATFORM", None)
    return env


def worker_command(preload: str = "", python: str | None = None) -> list[str]:
    """The worker's command line; ``preload``: "" (import on demand) or what to import before
    waiting (one of :data:`PRELOADS`; anything else imports everything)."""
    cmd = [python or sys.executable, "-m", WORKER_MODULE]
    if not preload:
        return cmd
    return [*cmd, f"--preload={preload if preload in PRELOADS else 'all'}"]


class WorkerProcess:
    """One worker process: its stdout reader thread, event queue and log file."""

    def __init__(self, cmd: list[str], env: dict[str, str], log_dir: Path) -> None:
        self.log_dir = log_dir
        self.log_path = log_dir / "worker.log"
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in close()
        kwargs: dict[str, Any] = {}
        if os.name == "posix":
            kwargs["start_new_session"] = True
        else:  # pragma: no cover - Windows
            kwargs["creationflags"] = getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0)
        self.proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            cwd=log_dir,
            env=env,
            **kwargs,
        )
        self.events: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                self.events.put(decode(line))
            except ProtocolError as exc:
                self.events.put({"event": "warning", "message": f"protocol: {exc}"})
        self.events.put(None)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def send(self, request: dict[str, Any]) -> None:
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(run_request(request).encode())
            self.proc.stdin.close()
        except OSError:
            pass  # the worker died already; reported from its exit status

    def close(self) -> None:
        if self.alive():
            kill_tree(self.proc)
        self.reader.join(timeout=5)
        self._log.close()


def reap_group(pgid: int) -> None:
    if os.name == "posix":
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)


def kill_tree(proc: subprocess.Popen[bytes]) -> None:
    """Kill the worker, its process group and any descendant that left the group; wait."""
    import psutil

    try:
        descendants = psutil.Process(proc.pid).children(recursive=True)
    except psutil.Error:
        descendants = []
    if os.name == "posix":
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
    else:  # pragma: no cover - Windows
        proc.kill()
    for p in descendants:
        with contextlib.suppress(psutil.Error):
            p.kill()
    try:
        _wait_exit(proc, 10)
    except subprocess.TimeoutExpired:  # pragma: no cover - a kernel-stuck process
        proc.kill()
    psutil.wait_procs(descendants, timeout=5)


def _wait_exit(proc: subprocess.Popen[bytes], timeout: float) -> None:
    """``proc.wait(timeout)`` without its polling sleeps where the OS can signal the exit
    (a Linux pidfd becomes readable when the process ends)."""
    pidfd_open = getattr(os, "pidfd_open", None)
    if pidfd_open is not None and proc.returncode is None:
        try:
            fd = pidfd_open(proc.pid)
        except OSError:
            fd = -1
        if fd >= 0:
            try:
                select.select([fd], [], [], timeout)
            finally:
                os.close(fd)
    proc.wait(timeout=timeout)
