"""Parent-side process control for script workers: start, observe exit, kill the whole tree.

Invariants:
- A worker starts in a new session (POSIX) or a new process group (Windows), so one signal to
  its group reaches everything the script started without ``setsid``.
- Exit is observed without reaping (``waitid(..., WNOWAIT)``) where available: while the
  worker is an unreaped zombie its pid, which is also its group id, cannot be reused, so
  killing the group afterwards can never hit an unrelated process.
- :func:`kill_tree` also kills descendants that left the group (``setsid``), found by walking
  parent links (psutil when installed, ``/proc`` otherwise) before the group is killed.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

from nneditor.platform.runtime_env import quiet_runtimes
from nneditor.scripting.protocol import NATIVE_STDERR_FILE

WORKER_MODULE = "nneditor.scripting.worker"
POSIX = os.name == "posix"


def worker_command(run_dir: Path, python: str | None = None) -> list[str]:
    """The command line that runs the worker for ``run_dir``."""
    return [python or sys.executable, "-m", WORKER_MODULE, str(run_dir)]


def worker_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """The child's environment: Agg backend, UTF-8 I/O and this checkout on ``PYTHONPATH``."""
    env = dict(quiet_runtimes(dict(os.environ if base is None else base)))
    env["MPLBACKEND"] = "Agg"
    env["PYTHONIOENCODING"] = "utf-8"
    root = str(Path(__file__).resolve().parents[2])
    existing = env.get("PYTHONPATH")
    env["PYTHONPATH"] = root if not existing else root + os.pathsep + existing
    return env


def spawn_worker(run_dir: Path, python: str | None = None) -> subprocess.Popen[bytes]:
    """Start the worker with stdout piped (events) and stderr appended to a run-folder file."""
    kwargs: dict[str, object] = {}
    if POSIX:
        kwargs["start_new_session"] = True
    else:
        kwargs["creationflags"] = getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0)
    with open(run_dir / NATIVE_STDERR_FILE, "ab") as stderr_file:
        return subprocess.Popen(  # type: ignore[call-overload, no-any-return]
            worker_command(run_dir, python),
            cwd=run_dir,
            env=worker_env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=stderr_file,
            close_fds=True,
            **kwargs,
        )


def has_exited(proc: subprocess.Popen[bytes]) -> bool:
    """True once the process ended; on POSIX it is left unreaped (see module invariants)."""
    if proc.returncode is not None:
        return True
    waitid = getattr(os, "waitid", None)
    if waitid is None:
        return proc.poll() is not None
    try:
        info = waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:  # already reaped elsewhere
        proc.poll()
        return True
    return info is not None


def kill_tree(proc: subprocess.Popen[bytes]) -> None:
    """Kill the worker, its process group and every descendant found; does not reap."""
    if not POSIX:
        _kill_tree_windows(proc)
        return
    pids = descendants(proc.pid) if proc.returncode is None else []
    kill_group(proc)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """Kill what is left of the worker's process group (safe while the worker is unreaped)."""
    if not POSIX:
        if proc.returncode is None:
            _kill_tree_windows(proc)
        return
    if proc.returncode is not None:
        return  # reaped: the group id may already belong to someone else
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def _kill_tree_windows(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        subprocess.run(
            ["taskkill", "/F", "/T", "/PID", str(proc.pid)],
            capture_output=True,
            timeout=10,
            check=False,
        )
    with contextlib.suppress(OSError):
        proc.kill()


def descendants(pid: int) -> list[int]:
    """Pids of all live descendants of ``pid`` (children first), best effort."""
    try:
        import psutil
    except ImportError:
        return _proc_descendants(pid)
    try:
        return [p.pid for p in psutil.Process(pid).children(recursive=True)]
    except (psutil.Error, OSError):
        return _proc_descendants(pid)


def _proc_descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        ppid = _proc_ppid(int(entry))
        if ppid is not None:
            children.setdefault(ppid, []).append(int(entry))
    found: list[int] = []
    seen = {pid}
    frontier = [pid]
    while frontier:
        nxt = [c for p in frontier for c in children.get(p, []) if c not in seen]
        seen.update(nxt)
        found.extend(nxt)
        frontier = nxt
    return found


def _proc_ppid(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode("ascii", errors="replace")
    except OSError:
        return None
    fields = stat.rpartition(")")[2].split()  # the command name may contain spaces and parens
    if len(fields) < 2 or not fields[1].isdigit():
        return None
    return int(fields[1])


def signal_name(returncode: int) -> str | None:
    """``SIGSEGV`` for a POSIX return code of ``-11``; None for normal exits."""
    if returncode >= 0:
        return None
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"
