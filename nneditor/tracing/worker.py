"""The trace worker process: ``python -m nneditor.tracing.worker [--preload[=BACKEND]]``.

Reads one run request (JSON line) from stdin, runs the chosen backend on a private copy of the
model (ONNX) or on the memory-mapped checkpoint (GGUF, Hugging Face: the NumPy decoder), streams
captures into the run folder and answers with JSON-line events on stdout (see
:mod:`nneditor.tracing.protocol`). ``--preload`` imports the runtimes (all of them, or one
backend's) before announcing itself, so a runner can start a worker ahead of the approval (a
warm worker) and the approved run does not pay for interpreter start-up and imports.

Invariants:

- Never imports Qt. Never writes outside the run folder named in the request.
- stdout carries protocol lines only: the original stdout descriptor is kept for the protocol
  and descriptor 1 is pointed at stderr, so library chatter (also from C code) lands in the log.
- On POSIX the address-space ceiling from the request is applied with
  ``resource.setrlimit(RLIMIT_AS)`` before any model or input is read; the parent's RSS
  watchdog enforces the RAM ceiling itself. A checkpoint traced on the NumPy decoder is
  memory-mapped whole (a 27B GGUF maps 7 GB it never holds resident), so its size is added
  to the address-space ceiling; the RSS watchdog still bounds what is resident. A run whose
  providers include an accelerator (CUDA, ROCm, DirectML...) gets no address-space ceiling:
  GPU drivers reserve far more virtual memory than they use (CUDA's unified address space
  alone is larger than any RAM ceiling), so under one the provider fails to start and ONNX
  Runtime runs on CPU instead (seen on an H200 with onnxruntime-gpu 1.31). The RSS watchdog
  still enforces the RAM ceiling, and the run's notes say so.
- Exactly one terminal event (``done`` or ``error``) is sent; a crash without one is detected
  by the parent from the exit status.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from nneditor.tracing.protocol import PROTOCOL_VERSION, ProtocolError, decode, encode, event
from nneditor.tracing.worker_process import PRELOADS

if TYPE_CHECKING:  # the worker imports its modules lazily (a pre-started worker waits)
    from nneditor.tracing.model_bytes import ModelBytes

TEST_HOOKS_ENV = "NNEDITOR_TRACE_TEST_HOOKS"


class Emitter:
    """Writes protocol events; progress events are rate-limited."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream
        self._last_progress = 0.0
        self._lock = threading.Lock()  # capture writer threads report progress too

    def __call__(self, name: str, /, **fields: Any) -> None:
        line = encode(event(name, **fields))
        with self._lock:
            self.stream.write(line)
            self.stream.flush()

    def progress(self, done: int, total: int) -> None:
        now = time.monotonic()
        if done >= total or now - self._last_progress >= 0.1:
            self._last_progress = now
            self("progress", done=done, total=total)


def _protocol_stream() -> IO[str]:
    fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return os.fdopen(fd, "w", encoding="utf-8", buffering=1)


def _limit_address_space(limit: int | None) -> str:
    if not limit or os.name != "posix":
        return ""
    import resource

    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        new = limit if hard == resource.RLIM_INFINITY else min(limit, hard)
        resource.setrlimit(resource.RLIMIT_AS, (new, hard))
    except (ValueError, OSError) as exc:  # pragma: no cover - platform dependent
        return f"address-space limit not applied ({exc})"
    return ""


def _accelerated(request: dict[str, Any]) -> bool:
    """Whether the run may start an accelerator: a GPU or NPU provider of ONNX Runtime, or a
    tracer plugin asked to run on one."""
    from nneditor.tracing.providers import family

    if request.get("device") in ("gpu", "npu"):
        return True
    return any(
        family(str(p[0])) in ("gpu", "npu")
        for p in request.get("providers") or []
        if isinstance(p, (list, tuple)) and p
    )


def _mapped_bytes(request: dict[str, Any]) -> int:
    """Bytes the NumPy decoder maps read-only (the checkpoint file, or a snapshot's files)."""
    if request.get("backend") != "numpy":
        return 0
    path = Path(str(request.get("model") or ""))
    try:
        if path.is_dir():
            return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
        return path.stat().st_size
    except OSError:
        return 0


def _run_test_hooks(hooks: dict[str, Any], emit: Emitter) -> None:
    """Test-only behaviour (enabled by an environment variable): report the address-space
    ceiling, spawn a child, sleep."""
    if not hooks or os.environ.get(TEST_HOOKS_ENV) != "1":
        return
    if hooks.get("report_address_space") and os.name == "posix":
        import resource

        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
        emit("test", address_space=None if soft == resource.RLIM_INFINITY else soft)
    if hooks.get("spawn_child"):
        import subprocess

        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        emit("test", child_pid=child.pid)
    if hooks.get("sleep_s"):
        time.sleep(float(hooks["sleep_s"]))


#: what ``--preload`` imports ahead of the request: everything, or one backend's runtime (a
#: caller that knows the run's likely backend names it, so that a GGUF trace does not wait for
#: onnx and ONNX Runtime). A backend that was not preloaded is imported when the run needs it.
#: set by :func:`main`: the process ends after its one run, so ONNX Runtime sessions are kept
_ONE_RUN_PROCESS = False


def _preload(what: str) -> None:
    import nneditor.inputs.picker  # noqa: F401
    import nneditor.tracing.capture  # noqa: F401

    if what == "numpy":
        import nneditor.tracing.backend_decoder  # noqa: F401
    elif what == "plugin":
        import nneditor.tracing.backend_plugin  # noqa: F401
    else:
        import nneditor.tracing.model_bytes  # noqa: F401
    if what in ("all", "reference"):
        import onnx.reference  # noqa: F401

        import nneditor.tracing.backend_reference  # noqa: F401
    if what in ("all", "onnxruntime"):
        import nneditor.tracing.backend_ort  # noqa: F401

        with contextlib.suppress(ImportError):
            import onnxruntime  # noqa: F401


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m nneditor.tracing.worker")
    ap.add_argument(
        "--preload",
        nargs="?",
        const="all",
        choices=PRELOADS,
        help="import the runtimes (all, or those of one backend) before waiting",
    )
    args = ap.parse_args(argv)
    emit = Emitter(_protocol_stream())
    if args.preload:
        _preload(args.preload)
    global _ONE_RUN_PROCESS
    _ONE_RUN_PROCESS = True  # this process ends after one run (see backend_ort.KEEP_SESSIONS)
    emit("hello", pid=os.getpid(), protocol=PROTOCOL_VERSION, python=sys.version.split()[0])
    try:
        request = _read_request()
        ceiling = int(request.get("address_space_bytes") or 0)
        if ceiling and _accelerated(request):
            ceiling = 0
            limit_note = (
                "no address-space ceiling on an accelerator (its driver reserves more virtual "
                "memory than any RAM ceiling); the RAM ceiling is enforced on resident memory"
            )
        else:
            limit_note = _limit_address_space(ceiling + _mapped_bytes(request) if ceiling else 0)
        _run_test_hooks(request.get("test_hooks") or {}, emit)
        result = execute(request, emit, [limit_note] if limit_note else [])
    except Exception as exc:
        kind = getattr(exc, "kind", None) or (
            "memory" if isinstance(exc, MemoryError) else "internal"
        )
        if kind == "internal":
            traceback.print_exc()
        errno_ = exc.errno if isinstance(exc, OSError) else None
        emit("error", message=_sentence(exc), kind=kind, errno=errno_)
        return 1
    emit("done", **result)
    return 0


def _sentence(exc: BaseException) -> str:
    if isinstance(exc, MemoryError):
        return "the worker ran out of memory under its RAM ceiling"
    text = str(exc).strip() or type(exc).__name__
    from nneditor.errors import NNEditorError

    return text if isinstance(exc, NNEditorError) else f"{type(exc).__name__}: {text}"


def _read_request() -> dict[str, Any]:
    line = sys.stdin.readline()
    if not line:
        raise ProtocolError("no request received on stdin")
    msg = decode(line)
    if msg.get("type") != "run" or msg.get("protocol") != PROTOCOL_VERSION:
        raise ProtocolError(f"unsupported request {str(msg)[:200]}")
    request = msg.get("request")
    if not isinstance(request, dict):
        raise ProtocolError("the request carries no run description")
    return request


def execute(request: dict[str, Any], emit: Callable[..., None], notes: list[str]) -> dict[str, Any]:
    """Run one request; returns the ``done`` event fields. Raises on failure."""
    from nneditor.inputs.picker import load_npy
    from nneditor.tracing.backend_errors import BackendError
    from nneditor.tracing.capture import BRANCH_REASON, LOOP_REASON, SUBGRAPH_REASON, CaptureStore

    t0 = time.perf_counter()
    run_dir = Path(request["run_dir"])
    model_path = Path(request["model"])
    limits = request["limits"]
    feeds = {name: load_npy(run_dir / f) for name, f in request["inputs"].items()}
    emit("stage", stage="loading model")
    source: ModelBytes | None = None
    checkpoint = None
    if request["backend"] in ("numpy", "plugin"):  # values of the reader's graph
        from nneditor.tracing.backend_decoder import checkpoint_entries, open_checkpoint

        checkpoint = open_checkpoint(model_path)
        entries = checkpoint_entries(checkpoint, model_path)
    else:
        from nneditor.errors import NNEditorError
        from nneditor.tracing.model_bytes import ModelBytes

        try:
            source = ModelBytes(model_path)
        except (OSError, ValueError, NNEditorError) as exc:
            raise BackendError(f"the model could not be read: {exc}", "model") from None
        entries = source.entries
    load_s = time.perf_counter() - t0
    selection = request.get("capture")
    selected = None if selection is None else set(selection)
    chosen = [e for e in entries if selected is None or e.name in selected]
    progress = getattr(emit, "progress", None)
    # ONNX Runtime hands over every value at once after its run: writing them in turn is
    # quicker than through writer threads (PP-OCRv4, 861 values, 127 MB: 43 ms against 60-90 ms
    # here). The other backends produce values while they compute, which the threads overlap.
    writers = 0 if request["backend"] == "onnxruntime" else 2
    store = CaptureStore(
        run_dir,
        int(limits["capture_mb"] * 2**20),
        int(limits["chunk_mb"] * 2**20),
        progress,
        writers=writers,
    )
    for e in chosen:
        store.register(e.name, e.scope, e.producer, e.op_type)
    wanted = [e.name for e in chosen if e.producer and not e.scope]
    nested = {e.name for e in chosen if e.scope and not e.in_loop}
    try:
        for e in chosen:
            if not e.producer:  # a graph input: its capture is the input file itself
                store.write(e.name, feeds[e.name], run_dir / request["inputs"][e.name])
        backend_source = checkpoint if checkpoint is not None else source
        info = _run_backend(request, model_path, backend_source, feeds, wanted, nested, store, emit)
    except BaseException:
        store.abort()
        raise
    finally:
        if source is not None:
            source.close()
    pending = set(store.pending)
    for e in chosen:
        if e.scope and e.name in pending:
            if info["backend"] != "reference":
                store.drop(e.name, SUBGRAPH_REASON)
            else:
                store.drop(e.name, LOOP_REASON if e.in_loop else BRANCH_REASON)
    store.finish_pending("not produced by the run (an optional output that was not computed)")
    run = {
        "backend": info.pop("backend"),
        "backend_request": request.get("backend_request", request["backend"]),
        "device": request.get("device", "auto"),
        **info,
        "notes": notes + info.get("notes", []),
        "limits": limits,
        "approval": request.get("approval"),
        "model": str(model_path),
        "revision": request.get("revision", "source"),
        "edits_of": str(request.get("edits_of") or ""),
        "inputs_digest": request.get("inputs_digest"),
        "inputs": dict(request["inputs"]),
        "input_notes": dict(request.get("input_notes") or {}),
        "load_s": round(load_s, 6),
        "write_busy_s": round(store.write_s, 6),
        "worker_s": round(time.perf_counter() - t0, 6),
        "partial": store.budget_hit,
    }
    store.write_manifest(run)
    store.close()
    return {"partial": store.budget_hit, "counts": store.counts(), "provider": run["provider"]}


def _run_backend(
    request: dict[str, Any],
    model_path: Path,
    source: Any,
    feeds: dict[str, Any],
    wanted: list[str],
    nested: set[str],
    store: Any,
    emit: Callable[..., None],
) -> dict[str, Any]:
    """``source``: the open checkpoint Document (numpy backend) or the ModelBytes (ONNX)."""
    from nneditor.tracing.backend_errors import BackendError

    if request["backend"] == "numpy":
        from nneditor.tracing.backend_decoder import run_decoder

        return {"backend": "numpy", **run_decoder(source, feeds, wanted, store, emit)}
    if request["backend"] == "plugin":
        from nneditor.tracing.backend_plugin import run_plugin

        info = run_plugin(source, request["plugin"], feeds, wanted, store, emit, request["limits"])
        return {"backend": "plugin", **info}
    assert source is not None
    if request["backend"] == "onnxruntime":
        try:
            return {
                "backend": "onnxruntime",
                **_run_ort(request, model_path, source, feeds, wanted, store, emit),
            }
        except BackendError as exc:
            if request.get("backend_request") != "auto" or exc.kind != "model":
                raise
            emit("warning", message=f"{exc}; falling back to the reference evaluator")
            try:
                info = _run_reference(model_path, feeds, wanted, nested, store, emit)
            except BackendError as ref_exc:  # neither runs it: say why each refused
                raise BackendError(f"{exc}; and {ref_exc}", ref_exc.kind) from None
            info["notes"] = [f"{exc}; used the reference evaluator instead", *info["notes"]]
            return {"backend": "reference", **info}
    return {
        "backend": "reference",
        **_run_reference(model_path, feeds, wanted, nested, store, emit),
    }


def _run_reference(
    model_path: Path,
    feeds: dict[str, Any],
    wanted: list[str],
    nested: set[str],
    store: Any,
    emit: Callable[..., None],
) -> dict[str, Any]:
    import onnx

    from nneditor.tracing.backend_reference import run_reference

    model = onnx.load(str(model_path), load_external_data=False)
    return run_reference(model_path, model, feeds, wanted, nested, store, emit)


def _run_ort(
    request: dict[str, Any],
    model_path: Path,
    source: ModelBytes,
    feeds: dict[str, Any],
    wanted: list[str],
    store: Any,
    emit: Callable[..., None],
) -> dict[str, Any]:
    from nneditor.tracing import backend_ort
    from nneditor.tracing.backend_ort import BackendError, run_onnxruntime

    if _ONE_RUN_PROCESS and backend_ort.KEEP_SESSIONS is None:
        backend_ort.KEEP_SESSIONS = []
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        raise BackendError(
            "ONNX Runtime is not installed in the worker's environment", "model"
        ) from None
    providers = [
        (str(p), dict(o)) for p, o in request.get("providers") or [["CPUExecutionProvider", {}]]
    ]
    return run_onnxruntime(
        model_path,
        source,
        feeds,
        wanted,
        store,
        providers,
        bool(request.get("strict_device")),
        emit,
        str(request.get("ort_optimization", "disabled")),
    )


if __name__ == "__main__":
    sys.exit(main())
