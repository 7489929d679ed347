"""The worker protocol: JSON lines on stdio, data in files under the run folder.

The parent writes exactly one request line to the worker's stdin::

    {"protocol": 1, "type": "run", "request": {...}}

The worker answers with event lines on stdout, one JSON object each, ``"event"`` naming the
kind: ``hello`` (pid, versions), ``stage`` (what it is doing), ``provider`` (the execution
provider that actually ran), ``progress`` (done/total values written), ``warning``, then
exactly one of ``done`` (manifest written; ``partial`` flag) or ``error`` (``message``,
``kind``: "memory", "model", "device", "input", "internal"). Anything else on stdout is a
protocol violation; the worker sends library chatter to stderr (the run folder's log).

Invariants: every line is a complete JSON object terminated by ``\\n``; no NaN/Infinity;
values are never sent inline, only file names relative to the run folder.
"""

from __future__ import annotations

import json
from typing import Any

PROTOCOL_VERSION = 1
TERMINAL_EVENTS = ("done", "error")


class ProtocolError(ValueError):
    """A line that is not a valid protocol message."""


def encode(message: dict[str, Any]) -> str:
    """One protocol line (with the trailing newline)."""
    return json.dumps(message, separators=(",", ":"), allow_nan=False, default=str) + "\n"


def decode(line: str | bytes) -> dict[str, Any]:
    """Parse one protocol line; raises :class:`ProtocolError` for anything malformed."""
    if isinstance(line, bytes):
        line = line.decode("utf-8", "replace")
    line = line.strip()
    try:
        msg = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ProtocolError(f"not JSON: {line[:200]!r} ({exc.msg})") from None
    if not isinstance(msg, dict):
        raise ProtocolError(f"not a JSON object: {line[:200]!r}")
    return msg


def run_request(request: dict[str, Any]) -> str:
    return encode({"protocol": PROTOCOL_VERSION, "type": "run", "request": request})


def event(name: str, /, **fields: Any) -> dict[str, Any]:
    return {"event": name, **fields}
