"""The outcome of a script run as the parent reports it, built from the run folder.

Invariants:
- Every run ends in exactly one status of :data:`~nneditor.scripting.protocol.STATUSES`.
- Paths in a :class:`ScriptResult` are absolute and inside the run folder; the worker only
  reports file *names*, which are resolved here and ignored if they would leave the folder.
- Text streamed by the worker is used when it could not write ``result.json`` (timeout, stop,
  crash), so output printed before the end is never lost.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nneditor.scripting.processes import signal_name
from nneditor.scripting.protocol import (
    CRASHED,
    MEMORY,
    NATIVE_STDERR_FILE,
    OK,
    STATUSES,
)

CRASH_TAIL_CHARS = 4000
CRASH_READ_CHARS = 64_000
SCRIPT_FRAME = re.compile(r'File "<script>", line (\d+)')
MEMORY_HINTS = ("MemoryError", "std::bad_alloc", "Cannot allocate memory", "out of memory")


@dataclass
class ScriptResult:
    """What a script run produced. ``status`` is ok | error | timeout | stopped | memory | crashed."""

    status: str
    stdout: str = ""
    stderr: str = ""
    result_repr: str | None = None
    result_type: str | None = None
    result_value: bool | int | float | str | None = None
    result_array_path: Path | None = None
    result_shape: tuple[int, ...] | None = None
    result_dtype: str | None = None
    figures: list[Path] = field(default_factory=list)
    duration_s: float = 0.0
    error: str | None = None
    error_line: int | None = None
    notes: list[str] = field(default_factory=list)
    run_dir: Path | None = None
    startup_s: float | None = None
    script_s: float | None = None
    libraries: dict[str, str | None] = field(default_factory=dict)
    ram_limit_mb: int | None = None
    returncode: int | None = None

    @property
    def ok(self) -> bool:
        return self.status == OK


def from_worker(payload: dict[str, Any], run_dir: Path) -> ScriptResult:
    """Build a result from a ``result.json`` payload."""
    status = str(payload.get("status"))
    if status not in STATUSES:
        return ScriptResult(
            CRASHED,
            error=f"The script worker reported an unknown status {status!r}.",
            run_dir=run_dir,
        )
    shape = payload.get("result_shape")
    return ScriptResult(
        status=status,
        stdout=str(payload.get("stdout") or ""),
        stderr=str(payload.get("stderr") or ""),
        result_repr=payload.get("result_repr"),
        result_type=payload.get("result_type"),
        result_value=payload.get("result_value"),
        result_array_path=_inside(run_dir, payload.get("result_array_path")),
        result_shape=tuple(int(n) for n in shape) if isinstance(shape, list) else None,
        result_dtype=payload.get("result_dtype"),
        figures=[p for p in (_inside(run_dir, n) for n in payload.get("figures") or []) if p],
        error=payload.get("error"),
        error_line=payload.get("error_line"),
        notes=[str(n) for n in payload.get("notes") or []],
        run_dir=run_dir,
        startup_s=payload.get("startup_s"),
        script_s=payload.get("script_s"),
        libraries=dict(payload.get("libraries") or {}),
        ram_limit_mb=payload.get("ram_limit_mb"),
    )


def _inside(run_dir: Path, name: object) -> Path | None:
    if not isinstance(name, str) or not name:
        return None
    path = (run_dir / name).resolve()
    if path.parent != run_dir.resolve() or not path.is_file():
        return None
    return path


def crashed(
    run_dir: Path, returncode: int | None, stdout: str, stderr: str, max_ram_mb: int
) -> ScriptResult:
    """The result of a worker that ended without writing ``result.json``."""
    tail, line = summarize_crash(read_tail(run_dir / NATIVE_STDERR_FILE, CRASH_READ_CHARS))
    how = _how_it_ended(returncode)
    status = CRASHED
    if max_ram_mb > 0 and any(hint in tail for hint in MEMORY_HINTS):
        status = MEMORY
        error = f"The script exceeded the RAM limit of {max_ram_mb} MB; the worker {how}."
    else:
        error = f"The script process {how} before reporting a result."
        if returncode is not None and returncode < 0 and signal_name(returncode) == "SIGKILL":
            error += " It was killed from outside, possibly because the system ran out of memory."
    if line is not None:
        error += f" The script was at line {line}."
    if tail.strip():
        error += f"\n\nLast output of the process:\n{tail.rstrip()}"
    return ScriptResult(
        status,
        stdout=stdout,
        stderr=stderr,
        error=error,
        error_line=line,
        run_dir=run_dir,
        returncode=returncode,
    )


def summarize_crash(text: str) -> tuple[str, int | None]:
    """Shorten a crash report to the crashing thread's frames; also the script line, if any.

    Python's fault handler prints every thread's stack and a long list of extension modules;
    the useful part is the "Fatal Python error" line and the current thread's frames.
    """
    lines = [ln for ln in text.splitlines() if not ln.startswith("Extension modules:")]
    fatal = next((i for i, ln in enumerate(lines) if ln.startswith("Fatal Python error")), None)
    current = next((i for i, ln in enumerate(lines) if ln.startswith("Current thread")), None)
    if fatal is not None and current is not None and current > fatal:
        block = []
        for ln in lines[current:]:
            if not ln.strip():
                break
            block.append(ln)
        lines = [lines[fatal], "", *block]
    line = None
    for ln in lines:
        match = SCRIPT_FRAME.search(ln)
        if match:
            line = int(match.group(1))
    return "\n".join(lines)[-CRASH_TAIL_CHARS:], line


def _how_it_ended(returncode: int | None) -> str:
    if returncode is None:
        return "ended"
    name = signal_name(returncode)
    if name:
        return f"was killed by {name}"
    return f"exited with code {returncode}"


def read_tail(path: Path, max_chars: int) -> str:
    """The last ``max_chars`` characters of a text file, or "" if it cannot be read."""
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            size = f.tell()
            f.seek(max(0, size - max_chars * 4))
            data = f.read()
    except OSError:
        return ""
    return data.decode("utf-8", errors="replace")[-max_chars:]


def forced(
    status: str, message: str, run_dir: Path, stdout: str, stderr: str, returncode: int | None
) -> ScriptResult:
    """The result of a run the parent ended (timeout, stop)."""
    return ScriptResult(
        status, stdout=stdout, stderr=stderr, error=message, run_dir=run_dir, returncode=returncode
    )
