"""The script worker: ``python -m nneditor.scripting.worker RUN_FOLDER`` (one process per run).

It reads ``request.json`` from the run folder, preloads libraries, lowers its RAM ceiling,
loads a private copy of the captured tensor, runs the script as a notebook cell with its
output captured, saves figures and an array result into the run folder, writes
``result.json`` and exits with :func:`os._exit` (threads the script left behind cannot keep
it alive). The protocol is described in :mod:`nneditor.scripting.protocol`.

Invariants:
- Never imports Qt; Matplotlib always uses the Agg backend.
- ``result.json`` is written for every outcome the worker can observe (ok, error, memory);
  timeouts, stops and crashes are decided by the parent, which sees no result file.
- If the app that started the worker dies (the worker is re-parented or the event channel
  breaks), the worker kills its own process group: no run outlives the app.
- This is isolation, not security: the script runs with the user's rights, can import any
  installed library and write anywhere; the worker only keeps it out of the app's process.
"""

from __future__ import annotations

import builtins
import contextlib
import faulthandler
import os
import signal
import sys
import threading
import time
import types
from pathlib import Path
from typing import Any

from nneditor.scripting.capture import BoundedStream, Channel, OutputPump
from nneditor.scripting.cell import (
    CELL_ERROR,
    CELL_MEMORY,
    CellOutcome,
    bounded_repr,
    check_syntax,
    json_scalar,
    run_cell,
    type_name,
)
from nneditor.scripting.limits import RamLimit, apply_ram_limit, lift_ram_limit, memory_message
from nneditor.scripting.outputs import save_figures, save_result_array
from nneditor.scripting.preload import TensorLoadError, load_tensor, preload_libraries
from nneditor.scripting.protocol import (
    ERROR,
    EV_DONE,
    EV_FIGURE,
    EV_NOTE,
    EV_PHASE,
    EV_STARTED,
    EV_STDERR,
    EV_STDOUT,
    MAX_FIGURES,
    MAX_OUTPUT_CHARS,
    MAX_REPR_CHARS,
    MEMORY,
    NATIVE_STDERR_FILE,
    NATIVE_STDOUT_FILE,
    OK,
    PHASE_LOADING,
    PHASE_RUNNING,
    PHASE_SAVING,
    PROTOCOL_VERSION,
    REQUEST_FILE,
    RESULT_FILE,
    read_json,
    write_json_atomic,
)

SCRIPT_ARGV0 = "<script>"
RESERVE_BYTES = 2 * 1024 * 1024  # freed on MemoryError so the worker can still report it


class ScriptWorker:
    """One run inside the worker process."""

    def __init__(self, run_dir: Path, request: dict[str, Any], channel: Channel) -> None:
        self.run_dir = run_dir
        self.request = request
        self.channel = channel
        self.notes: list[str] = []
        self.fields: dict[str, Any] = {}
        self.output_limit = int(request.get("max_output_chars", MAX_OUTPUT_CHARS))

    def run(self) -> dict[str, Any]:
        """Run the script; returns the ``result.json`` payload."""
        self.channel.emit(EV_PHASE, phase=PHASE_LOADING)
        code = str(self.request.get("code", ""))
        syntax = check_syntax(code)
        if syntax is not None:  # no need to import anything to report it
            self.fields["error_line"] = syntax.error_line
            return self._finish(ERROR, syntax.error)
        namespace, versions = preload_libraries(code, self.notes)
        self.fields["libraries"] = versions
        limit = apply_ram_limit(int(self.request.get("max_ram_mb", 0)), self.notes)
        self.fields["ram_limit_mb"] = limit.max_ram_mb if limit.enforced else None
        self.fields["ram_baseline_mb"] = round(limit.baseline_mb, 1)
        reserve = bytearray(RESERVE_BYTES)
        try:
            namespace["tensor"] = self._load_tensor()
        except TensorLoadError as exc:
            return self._finish(ERROR, str(exc))
        except MemoryError:
            del reserve
            lift_ram_limit(limit)
            return self._finish(MEMORY, memory_message(limit, "Loading the captured tensor"))
        namespace["metadata"] = self.request.get("metadata") or {}
        outcome = self._execute(namespace)
        del reserve
        lift_ram_limit(limit)
        return self._report(outcome, limit)

    def _load_tensor(self) -> Any:
        path = self.request.get("tensor_path")
        if path is None:
            return None
        return load_tensor(Path(path), self.request.get("tensor_location"))

    def _execute(self, namespace: dict[str, Any]) -> CellOutcome:
        module = types.ModuleType("__main__")
        module.__dict__.update(namespace, __builtins__=builtins)
        out = BoundedStream(EV_STDOUT, self.channel, self.output_limit)
        err = BoundedStream(EV_STDERR, self.channel, self.output_limit)
        native_starts = [
            _file_size(self.run_dir / n) for n in (NATIVE_STDOUT_FILE, NATIVE_STDERR_FILE)
        ]
        pump = OutputPump([out, err])
        saved = sys.stdout, sys.stderr, sys.argv, sys.modules.get("__main__")
        sys.stdout, sys.stderr, sys.argv = out, err, [SCRIPT_ARGV0]
        sys.modules["__main__"] = module
        pump.start()
        self.channel.emit(EV_PHASE, phase=PHASE_RUNNING)
        t0 = time.perf_counter()
        try:
            outcome = run_cell(str(self.request.get("code", "")), module.__dict__)
        finally:
            self.fields["script_s"] = round(time.perf_counter() - t0, 4)
            sys.stdout, sys.stderr, sys.argv = saved[0], saved[1], saved[2]
            if saved[3] is not None:
                sys.modules["__main__"] = saved[3]
        pump.stop()
        self._collect_text(out, err, native_starts)
        return outcome

    def _collect_text(self, out: BoundedStream, err: BoundedStream, starts: list[int]) -> None:
        """Script text, then what reached descriptors 1 and 2 meanwhile, within the limit."""
        texts = []
        for stream, name, start in zip(
            (out, err), (NATIVE_STDOUT_FILE, NATIVE_STDERR_FILE), starts, strict=True
        ):
            text = stream.getvalue()
            room = max(0, self.output_limit - len(text))
            native, more = _read_from(self.run_dir / name, start, room)
            if native:
                text += native
                self.notes.append(
                    f"Output written straight to the process's {stream.kind} (by C code or by "
                    "programs the script started) is shown after the script's own output."
                )
            note = stream.truncation_note()
            if note or more:
                self.notes.append(
                    note
                    or f"The script's {stream.kind} was cut after {self.output_limit:,} characters."
                )
            texts.append(text)
        self.fields["stdout"], self.fields["stderr"] = texts

    def _report(self, outcome: CellOutcome, limit: RamLimit) -> dict[str, Any]:
        self.notes.extend(outcome.notes)
        self.channel.emit(EV_PHASE, phase=PHASE_SAVING)
        figures = save_figures(
            self.run_dir, int(self.request.get("max_figures", MAX_FIGURES)), self.notes
        )
        for name in figures:
            self.channel.emit(EV_FIGURE, path=name)
        self.fields["figures"] = figures
        self.fields["error_line"] = outcome.error_line
        if outcome.kind == CELL_MEMORY:
            where = f" (line {outcome.error_line})" if outcome.error_line else ""
            sentence = memory_message(limit).rstrip(".") + f"{where}."
            return self._finish(MEMORY, f"{sentence}\n\n{outcome.error or ''}".rstrip())
        if outcome.kind == CELL_ERROR:
            return self._finish(ERROR, outcome.error)
        if outcome.has_value:
            self._describe_value(outcome.value)
        return self._finish(OK, None)

    def _describe_value(self, value: Any) -> None:
        max_repr = int(self.request.get("max_repr_chars", MAX_REPR_CHARS))
        self.fields["result_repr"] = bounded_repr(value, max_repr)
        self.fields["result_type"] = type_name(value)
        self.fields["result_value"] = json_scalar(value)
        self.fields.update(save_result_array(value, self.run_dir, self.notes))

    def _finish(self, status: str, error: str | None) -> dict[str, Any]:
        for note in self.notes:
            self.channel.emit(EV_NOTE, text=note)
        return {"status": status, "error": error, "notes": self.notes, **self.fields}


def _file_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _read_from(path: Path, start: int, limit: int) -> tuple[str, bool]:
    """Up to ``limit`` characters written to ``path`` after byte ``start``; and whether more."""
    try:
        with open(path, "rb") as f:
            f.seek(start)
            data = f.read(max(0, limit) * 4 + 1)
    except OSError:
        return "", False
    text = data.decode("utf-8", errors="replace")
    return text[:limit], len(text) > limit


def _redirect_native_stdout(run_dir: Path) -> None:
    """Point descriptor 1 at ``native-stdout.txt`` (the event channel has its own descriptor)."""
    fd = os.open(run_dir / NATIVE_STDOUT_FILE, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.close(fd)


def _watch_parent(channel: Channel, interval_s: float = 0.5) -> None:
    """End this worker and its process group if the app that started it goes away."""
    if os.name != "posix":
        return
    parent = os.getppid()

    def loop() -> None:
        while True:
            time.sleep(interval_s)
            if os.getppid() != parent or channel.broken:
                if os.getpgrp() == os.getpid():  # only a group of our own, never a shell's
                    with contextlib.suppress(OSError):
                        os.killpg(0, signal.SIGKILL)
                os._exit(1)

    threading.Thread(target=loop, name="nneditor-parent-watch", daemon=True).start()


def main(argv: list[str]) -> int:
    """Run one request; returns the process exit code (0 when ``result.json`` was written)."""
    if len(argv) != 2:
        print("usage: python -m nneditor.scripting.worker RUN_FOLDER", file=sys.stderr)
        return 2
    run_dir = Path(argv[1]).resolve()
    channel = Channel.take_stdout()
    faulthandler.enable()  # a hard crash leaves a Python traceback in the stderr file
    channel.emit(EV_STARTED, pid=os.getpid(), protocol=PROTOCOL_VERSION)
    _watch_parent(channel)
    try:
        _redirect_native_stdout(run_dir)
        request = read_json(run_dir / REQUEST_FILE)
    except (OSError, ValueError) as exc:
        result = {
            "status": ERROR,
            "error": f"The run request could not be read: {exc}.",
            "notes": [],
        }
    else:
        result = ScriptWorker(run_dir, request, channel).run()
    write_json_atomic(run_dir / RESULT_FILE, result)
    channel.emit(EV_DONE, status=result["status"])
    return 0


if __name__ == "__main__":
    code = main(sys.argv)
    sys.stderr.flush()
    os._exit(code)
