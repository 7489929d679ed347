"""The Python tab's script runner: user scripts on captured tensors, in a separate process.

A script runs in a fresh ``python -m nneditor.scripting.worker`` process per run, with
``tensor`` (a private, writable copy of the captured values), ``metadata`` (a dict; a partial
capture is a flat prefix whose original shape is ``metadata['shape']``), ``np``, ``math`` and,
when installed, ``scipy`` (with ``scipy.special``/``scipy.stats``), ``sklearn`` (also
``scikit``), ``matplotlib`` and ``plt`` (Agg backend); an optional library is imported before
the script starts when the script's text mentions one of its names (so a script that never
says ``plt`` does not wait for Matplotlib). It runs like a notebook cell: the value
of a final expression, or else a variable named ``result``, is the result; printed output,
tracebacks (of the script's frames) and every open figure (as PNG) come back in a
:class:`ScriptResult` whose status is ok | error | timeout | stopped | memory | crashed.

Limits are a wall-clock timeout, a RAM ceiling (``RLIMIT_AS`` on POSIX) and Stop; each ends
the worker's whole process tree. This is *isolation, not security*: the script runs with the
user's rights, may import any installed library and may read or write any file (absolute
paths included; relative paths land in the run folder). It cannot crash or block the app.

This package never imports Qt; the UI drives :func:`start_script` from a timer or a thread.
"""

from __future__ import annotations

from nneditor.scripting.protocol import CRASHED, ERROR, MEMORY, OK, STATUSES, STOPPED, TIMEOUT
from nneditor.scripting.results import ScriptResult
from nneditor.scripting.runner import ScriptProcess, run_script, start_script

__all__ = [
    "CRASHED",
    "ERROR",
    "MEMORY",
    "OK",
    "STATUSES",
    "STOPPED",
    "TIMEOUT",
    "ScriptProcess",
    "ScriptResult",
    "run_script",
    "start_script",
]
