"""Start the worker of ``nneditor trace ... --yes`` before anything else is imported.

An approved trace waits for its worker's interpreter and runtime imports (0.25 s and more on
two cores). The CLI starts that worker first, about 40 ms after its own start, instead of
after it has parsed the command line, which needs the input modules and numpy (about 0.15 s
in). The worker reads nothing until the approved request arrives; :mod:`nneditor.cli.trace`
adopts it, or closes it when the command is refused.

Only the standard library and :mod:`nneditor.tracing.worker_process` are imported here. The
command line is read by hand: the worker's preload (which runtime it imports while waiting)
is a guess, and a wrong guess costs an import, never a wrong run. ``tests`` check that the
guess agrees with the real parser's :func:`nneditor.cli.trace.likely_backend`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nneditor.tracing.worker_process import WorkerProcess

#: ``trace`` options that take one value (argparse's ``--opt VALUE`` or ``--opt=VALUE``)
_ONE_VALUE = frozenset(
    (
        "--inputs",
        "--out",
        "--backend",
        "--tracer",
        "--device",
        "--max-ram",
        "--timeout",
        "--capture-mb",
        "--chunk-mb",
        "--seed",
        "--dim",
        "--shape",
    )
)
#: options that take values up to the next option
_MANY_VALUES = frozenset(("--capture",))

_EARLY: list[WorkerProcess] = []


def likely_preload(argv: list[str]) -> str | None:
    """What the worker of ``nneditor trace ARGV`` should import, or None when no approved
    (``--yes``) run is asked for."""
    if "--yes" not in argv:
        return None
    values: dict[str, str] = {}
    path = ""
    many = False
    i = 0
    while i < len(argv):
        tok = argv[i]
        i += 1
        if tok.startswith("--"):
            many = tok in _MANY_VALUES
            key, eq, value = tok.partition("=")
            if key in _ONE_VALUE:
                if not eq and i < len(argv):
                    value = argv[i]
                    i += 1
                values[key] = value
            continue
        if not many and not path:
            path = tok
    if values.get("--tracer"):
        return "plugin"
    backend = values.get("--backend", "auto")
    if backend != "auto":
        return backend
    return "onnxruntime" if path.lower().endswith(".onnx") else "numpy"


def prestart(argv: list[str]) -> None:
    """Start the worker when ``argv`` (after ``trace``) approves a run; never raises."""
    preload = likely_preload(argv)
    if preload is None:
        return
    import tempfile
    from pathlib import Path

    from nneditor.io.scratch import TRACE_WORKER_PREFIX, staging_dir
    from nneditor.tracing.worker_process import WorkerProcess, worker_command, worker_env

    try:
        log_dir = staging_dir(Path(tempfile.gettempdir()), TRACE_WORKER_PREFIX)
        _EARLY.append(WorkerProcess(worker_command(preload), worker_env(), log_dir))
    except Exception:  # only a head start: the command starts a worker itself and says why not
        return


def take() -> WorkerProcess | None:
    """The worker :func:`prestart` started, now owned by the caller (None if there is none)."""
    return _EARLY.pop() if _EARLY else None


def discard() -> None:
    """Close a worker :func:`prestart` started that no command took, and delete its folder."""
    import shutil

    while _EARLY:
        worker = _EARLY.pop()
        worker.close()
        shutil.rmtree(worker.log_dir, ignore_errors=True)
