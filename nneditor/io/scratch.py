"""Staging and scratch places that name their owner, and the sweep that removes those whose
owner is gone.

Every folder or file NNEditor writes before publishing (export staging beside the destination,
trace run folders, worker and Python-tab scratch in the temporary folder) carries its owner in
its name: ``<prefix>p<pid>t<start-ms>-<random>``, the process id and the process's start time
(so a reused pid is not mistaken for the owner). :func:`sweep` removes the entries of owners
that no longer run; it never touches a live process's staging. Entries written before owners
were named (``<prefix><random>``) are removed once untouched for :data:`LEGACY_AGE_S`.

A destination lock (:func:`destination_lock`) makes a second writer of the same destination
refuse with a sentence instead of interleaving its files with the first one's.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path

from nneditor.errors import NNEditorError

_OWNER = re.compile(r"p(\d{1,10})t(\d{1,16})-")
#: entries without an owner in their name are removed after this long untouched
LEGACY_AGE_S = 24 * 3600

EXPORT_PREFIX = ".nneditor-export-"
WEIGHTS_PREFIX = ".nneditor-weights-"
RUN_PREFIX = ".nneditor-run-"
#: weights-only staging files written before owners were named
LEGACY_WEIGHTS = re.compile(r"^\.nneditor-[a-z0-9_]{8}\.safetensors$")
TRACE_WORKER_PREFIX = "nneditor-trace-worker-"
PYTHON_TAB_PREFIX = "nneditor-python-tab-"
#: every prefix of the per-user temporary folder (swept at application start)
TEMP_PREFIXES = (TRACE_WORKER_PREFIX, PYTHON_TAB_PREFIX)


class DestinationBusyError(NNEditorError):
    """Another live process is writing the same destination."""


@cache
def owner_tag() -> str:
    """``p<pid>t<start-ms>-`` of this process."""
    return f"p{os.getpid()}t{_start_ms(os.getpid()) or 0}-"


def _start_ms(pid: int) -> int | None:
    """The start time of live process ``pid`` (a zombie, killed and not yet reaped, is not
    live: -1); None when there is no such process or it cannot be looked at.

    On Linux this is the kernel's own count since boot (/proc/PID/stat), not a wall-clock
    time: psutil derives its create_time from the boot time, which moves when the clock is
    stepped, and a step of a second made this process's own folders look like a dead one's
    (seen on a VM whose clock was corrected during a test run).
    """
    since_boot = _linux_start_ms(pid)
    if since_boot is not None:
        return since_boot
    try:
        import psutil

        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return -1
        return int(proc.create_time() * 1000)
    except Exception:  # no such process, or no permission to look: unknown
        return None


def _linux_start_ms(pid: int) -> int | None:
    """Milliseconds from boot to the start of ``pid`` (-1 for a zombie), or None where there
    is no /proc to read."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
        ticks = os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, AttributeError):
        return None
    fields = stat[stat.rfind(b")") + 2 :].split()  # the name may hold spaces and parentheses
    try:
        state, start = fields[0], int(fields[19])
    except (IndexError, ValueError):
        return None
    return -1 if state == b"Z" else start * 1000 // ticks


def owner_alive(pid: int, start_ms: int) -> bool:
    """True when process ``pid`` runs and started at ``start_ms`` (within a second)."""
    started = _start_ms(pid)
    if started is None:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True  # someone else's live process
        return True
    return started >= 0 and abs(started - start_ms) < 1000


def staging_dir(parent: Path, prefix: str) -> Path:
    """A new private folder in ``parent`` named for this process."""
    return Path(tempfile.mkdtemp(prefix=prefix + owner_tag(), dir=parent))


def staging_file(parent: Path, prefix: str, suffix: str = "") -> tuple[int, Path]:
    """A new private file in ``parent`` named for this process: (open fd, path)."""
    fd, path = tempfile.mkstemp(prefix=prefix + owner_tag(), suffix=suffix, dir=parent)
    return fd, Path(path)


def _owner_of(name: str, prefix: str) -> tuple[int, int] | None:
    m = _OWNER.match(name, len(prefix))
    return (int(m.group(1)), int(m.group(2))) if m else None


def sweep(
    parent: Path,
    prefixes: tuple[str, ...],
    legacy: re.Pattern[str] | None = None,
    now: float | None = None,
) -> list[Path]:
    """Remove the entries of ``parent`` named with one of ``prefixes`` whose owner is gone (or,
    without an owner in the name, untouched for :data:`LEGACY_AGE_S`; ``legacy`` matches older
    ownerless names too). Returns what was removed; what cannot be listed or removed stays."""
    removed: list[Path] = []
    try:
        entries = list(os.scandir(parent))
    except OSError:
        return removed
    now = time.time() if now is None else now
    for entry in entries:
        prefix = next((p for p in prefixes if entry.name.startswith(p)), None)
        if prefix is None and not (legacy is not None and legacy.match(entry.name)):
            continue
        owner = _owner_of(entry.name, prefix) if prefix is not None else None
        try:
            if owner is not None:
                if owner_alive(*owner):
                    continue
            elif now - entry.stat(follow_symlinks=False).st_mtime < LEGACY_AGE_S:
                continue
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)
            removed.append(Path(entry.path))
        except OSError:
            continue
    return removed


def sweep_temp() -> list[Path]:
    """Sweep the per-user temporary folder (application start)."""
    return sweep(Path(tempfile.gettempdir()), TEMP_PREFIXES)


@contextmanager
def destination_lock(dest: Path) -> Iterator[None]:
    """Hold ``.<name>.nneditor-lock`` beside ``dest`` while writing it; a second writer whose
    lock holder still runs gets :class:`DestinationBusyError` (a dead holder's lock is taken
    over)."""
    lock = dest.with_name(f".{dest.name}.nneditor-lock")
    for _attempt in range(3):
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            holder = _lock_holder(lock)
            if holder is None and _age(lock) < 5:  # its writer has not written its name yet
                holder = (os.getpid(), 0)
            if holder is not None and owner_alive(*holder):
                raise DestinationBusyError(
                    f"another NNEditor process (pid {holder[0]}) is writing {dest} right now; "
                    "wait until it finishes or choose another destination"
                ) from None
            lock.unlink(missing_ok=True)  # its writer is gone
            continue
        try:
            os.write(fd, owner_tag().encode())
        finally:
            os.close(fd)
        try:
            yield
        finally:
            lock.unlink(missing_ok=True)
        return
    raise DestinationBusyError(f"could not take the write lock of {dest}; try again")


def _age(path: Path) -> float:
    try:
        return time.time() - path.stat().st_mtime
    except OSError:
        return LEGACY_AGE_S


_WRITE_ERRORS = {
    errno.ENOSPC: "the disk is full",
    errno.EDQUOT: "the disk quota is used up",
    errno.EFBIG: "the file system refuses a file this large",
    errno.EACCES: "there is no permission to write there",
    errno.EPERM: "there is no permission to write there",
    errno.EROFS: "the file system is read-only",
    errno.ENOENT: "the folder disappeared while writing",
}


def write_failure(exc: OSError, dest: Path) -> str:
    """The sentence for a failed write to ``dest``: what happened and what to do."""
    why = _WRITE_ERRORS.get(exc.errno or 0, exc.strerror or str(exc))
    return (
        f"could not write {dest}: {why}; nothing was published there — free some space, "
        "check the folder's permissions, or choose another destination"
    )


def check_free_space(dest: Path, needed: int) -> str:
    """A sentence when the disk holding ``dest`` has less than ``needed`` bytes free (with a
    margin), else ""."""
    try:
        free = shutil.disk_usage(dest.parent).free
    except OSError:
        return ""
    margin = 16 * 2**20
    if free >= needed + margin:
        return ""
    return (
        f"not enough free space for {dest}: writing it needs {_size(needed)} but the disk "
        f"holding {dest.parent} has {_size(free)} free; free some space or choose another "
        "destination"
    )


def _size(n: float) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:,.0f} {unit}" if unit == "bytes" else f"{n:,.1f} {unit}"
        n /= 1024
    return f"{n} bytes"


def _lock_holder(lock: Path) -> tuple[int, int] | None:
    try:
        text = lock.read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    m = _OWNER.match(text)
    return (int(m.group(1)), int(m.group(2))) if m else None
