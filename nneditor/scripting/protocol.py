"""The contract between the script runner (parent) and the script worker (child).

A run lives in one *run folder*. The parent writes ``request.json`` there and starts
``python -m nneditor.scripting.worker RUN_FOLDER`` with the folder as working directory. The
child writes one JSON object per line to its stdout (the *event channel*) and files into the
run folder: ``result.json`` (written last, atomically), ``result.npy`` and ``figure-N.png``.
What the process writes at the file-descriptor level (C extensions, programs the script
starts) lands in ``native-stdout.txt`` and ``native-stderr.txt`` (the parent opens the latter as
the child's stderr, so it also holds interpreter crash reports), never in the event channel.

Invariants:
- This module imports only the standard library: the worker imports it before anything else.
- ``result.json`` exists only if the worker finished in an orderly way; its absence after the
  process ended means the run crashed or was killed.
- Events are small dicts with an ``"event"`` key; unknown events must be ignored by readers.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Final

PROTOCOL_VERSION: Final = 1

REQUEST_FILE: Final = "request.json"
RESULT_FILE: Final = "result.json"
RESULT_ARRAY_FILE: Final = "result.npy"
NATIVE_STDOUT_FILE: Final = "native-stdout.txt"
NATIVE_STDERR_FILE: Final = "native-stderr.txt"
FIGURE_PATTERN: Final = "figure-{index}.png"

# Final statuses of a run.
OK: Final = "ok"
ERROR: Final = "error"
TIMEOUT: Final = "timeout"
STOPPED: Final = "stopped"
MEMORY: Final = "memory"
CRASHED: Final = "crashed"
STATUSES: Final = (OK, ERROR, TIMEOUT, STOPPED, MEMORY, CRASHED)

# Events the worker emits, in order: started, phase(loading), phase(running), any number of
# stdout/stderr/note/figure, phase(saving), done. The parent adds one "finished" event.
EV_STARTED: Final = "started"
EV_PHASE: Final = "phase"
EV_STDOUT: Final = "stdout"
EV_STDERR: Final = "stderr"
EV_NOTE: Final = "note"
EV_FIGURE: Final = "figure"
EV_DONE: Final = "done"
EV_FINISHED: Final = "finished"

PHASE_LOADING: Final = "loading"
PHASE_RUNNING: Final = "running"
PHASE_SAVING: Final = "saving"

# Default bounds (characters of captured text, of a result's repr, number of figures).
MAX_OUTPUT_CHARS: Final = 1_000_000
MAX_REPR_CHARS: Final = 20_000
MAX_FIGURES: Final = 50


def write_json_atomic(path: Path, payload: dict[str, Any]) -> None:
    """Write ``payload`` as JSON to ``path`` so readers never see a half-written file."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(payload, f)  # ASCII escapes: lone surrogates from scripts stay writable
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def read_json(path: Path) -> dict[str, Any]:
    """Read a JSON object written by :func:`write_json_atomic`."""
    with open(path, encoding="utf-8") as f:
        value = json.load(f)
    if not isinstance(value, dict):
        raise ValueError(f"{path} does not hold a JSON object")
    return value
