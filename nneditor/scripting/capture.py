"""Worker-side output plumbing: the JSON-lines event channel and bounded text capture.

Invariants:
- The event channel writes to a private duplicate of the original stdout descriptor; once the
  channel is taken, descriptor 1 no longer reaches the parent (the worker points it at a file),
  so nothing the script or a C library prints can corrupt the protocol.
- A :class:`BoundedStream` keeps at most ``limit`` characters; later text is counted, not kept.
  Every kept character is also streamed to the parent exactly once, in order.
- Only the standard library is imported here.
"""

from __future__ import annotations

import io
import json
import os
import threading
from typing import Any, TextIO

from nneditor.scripting.protocol import EV_STDERR, EV_STDOUT


class Channel:
    """Thread-safe JSON-lines writer to the parent process."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._lock = threading.Lock()
        self.broken = False

    @classmethod
    def take_stdout(cls) -> Channel:
        """Move the event channel off descriptor 1 and point descriptor 1 at descriptor 2."""
        fd = os.dup(1)  # non-inheritable: programs the script starts never get the channel
        os.dup2(2, 1)
        return cls(os.fdopen(fd, "w", encoding="utf-8", newline="\n"))

    def emit(self, event: str, **fields: Any) -> None:
        """Send one event; a parent that stopped listening is not an error for the child."""
        line = json.dumps({"event": event, **fields}, default=str)  # ASCII: always encodable
        with self._lock:
            if self.broken:
                return
            try:
                self._stream.write(line + "\n")
                self._stream.flush()
            except (OSError, ValueError):
                self.broken = True


class BoundedStream(io.TextIOBase):
    """A text stream that keeps the first ``limit`` characters and streams them as events."""

    def __init__(self, kind: str, channel: Channel | None, limit: int) -> None:
        super().__init__()
        if kind not in (EV_STDOUT, EV_STDERR):
            raise ValueError(f"unknown stream kind {kind!r}")
        self.kind = kind
        self._channel = channel
        self._limit = max(0, limit)
        self._parts: list[str] = []
        self._pending: list[str] = []
        self._kept = 0
        self.dropped = 0
        self._lock = threading.Lock()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return "utf-8"

    @property
    def errors(self) -> str | None:  # type: ignore[override]
        return "strict"

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False

    def write(self, s: str) -> int:
        if not isinstance(s, str):
            raise TypeError(f"write() argument must be str, not {type(s).__name__}")
        with self._lock:
            room = self._limit - self._kept
            take = s if len(s) <= room else s[: max(room, 0)]
            if take:
                self._parts.append(take)
                self._pending.append(take)
                self._kept += len(take)
            self.dropped += len(s) - len(take)
        return len(s)

    def flush(self) -> None:
        """Send what was written since the last flush to the parent."""
        with self._lock:
            text = "".join(self._pending)
            self._pending.clear()
        if text and self._channel is not None:
            self._channel.emit(self.kind, text=text)

    def getvalue(self) -> str:
        with self._lock:
            return "".join(self._parts)

    def truncation_note(self) -> str | None:
        """A sentence saying how much text was not kept, or None if nothing was lost."""
        if not self.dropped:
            return None
        return (
            f"The script's {self.kind} was cut after {self._limit:,} characters; "
            f"{self.dropped:,} more characters were not kept."
        )


class OutputPump:
    """A daemon thread that flushes captured streams to the parent every ``interval_s``."""

    def __init__(self, streams: list[BoundedStream], interval_s: float = 0.1) -> None:
        self._streams = streams
        self._interval = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="nneditor-output-pump", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread and flush whatever is still pending."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=2.0)
        for stream in self._streams:
            stream.flush()

    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            for stream in self._streams:
                try:
                    stream.flush()
                except Exception:  # e.g. MemoryError while the script is at the RAM limit
                    continue
