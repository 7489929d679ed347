"""ONNX Runtime backend (worker side): one session, one run, every selected value captured.

Invariants:

- The model copy exposes the selected main-graph values as extra graph outputs, so capturing
  happens in the same run as normal inference (no second pass, no per-node hooks).
- The provider that actually ran is ``session.get_providers()[0]`` and is reported as such.
  A strict (explicit GPU/NPU) request whose provider did not initialise is an error, never a
  silent CPU run; "auto" may retry on CPU and says so.
- Outputs are handed to the capture store one at a time, in graph order, and released
  immediately afterwards.
- Graph optimisations are disabled by default so that every capture equals the value ONNX
  Runtime computes when that value alone is exposed (fusions differ by rounding otherwise).
- The session is created from bytes: the source file followed by the extra outputs
  (:class:`~nneditor.tracing.model_bytes.ModelBytes`); nothing is decoded, re-encoded or
  written. External data keeps its relative locations and the session option
  ``EXTERNAL_FOLDER_KEY`` points ONNX Runtime at the model's own folder; nothing is copied or
  linked (verified with ONNX Runtime 1.32; a runtime without the option refuses the model and
  "auto" falls back to the reference evaluator).
- Failures are raised as :class:`BackendError` with ``kind`` ("model", "device", "memory").
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from nneditor.platform.runtime_env import quiet_runtimes
from nneditor.tracing import providers as prov
from nneditor.tracing.backend_errors import BackendError, classify
from nneditor.tracing.capture import CaptureStore
from nneditor.tracing.model_bytes import ModelBytes

EXTERNAL_FOLDER_KEY = "session.model_external_initializers_file_folder_path"
#: Graph optimisation levels. "disabled" (default) computes every node as written, so each
#: capture equals what the same value gives when it alone is exposed as an output (fusions
#: would otherwise differ between the two runs by rounding).
_OPT_LEVELS: dict[str, Callable[[Any], Any]] = {
    "disabled": lambda ort: ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
    "basic": lambda ort: ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
    "extended": lambda ort: ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
    "all": lambda ort: ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
}
OPTIMIZATION_LEVELS = tuple(_OPT_LEVELS)


#: Set to a list by the worker process: sessions are kept there instead of being torn down
#: after the run (the process ends right after it; tearing down costs time and would not lower
#: the peak, which is reached when the run returns). None elsewhere, e.g. in-process tests.
KEEP_SESSIONS: list[Any] | None = None


def run_onnxruntime(
    model_path: Path,
    source: ModelBytes,
    feeds: dict[str, np.ndarray],
    capture_names: list[str],
    store: CaptureStore,
    provider_list: list[tuple[str, dict[str, str]]],
    strict: bool,
    emit: Callable[..., None],
    optimization: str = "disabled",
) -> dict[str, Any]:
    """Run the model once with ``capture_names`` exposed; returns run info for the manifest."""
    if optimization not in _OPT_LEVELS:
        raise BackendError(f"unknown graph optimisation level {optimization!r}", "input")
    quiet_runtimes()  # the worker's environment has it already; a direct call may not
    import onnxruntime as ort

    t0 = time.perf_counter()
    blob, outputs = source.with_outputs(capture_names)
    source.close()  # the map is not needed any more: less address space under RLIMIT_AS
    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.graph_optimization_level = _OPT_LEVELS[optimization](ort)
    # The model arrives as bytes: external data resolves against the model's own folder.
    options.add_session_config_entry(EXTERNAL_FOLDER_KEY, str(model_path.resolve().parent))
    if any(p == "DmlExecutionProvider" for p, _ in provider_list):
        options.enable_mem_pattern = False  # required by DirectML
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    emit("stage", stage="creating session")
    try:
        session, note = _session(ort, blob, options, provider_list, strict)
    except BackendError as exc:
        if exc.kind != "model":
            raise
        # Older runtimes refuse untyped graph outputs: retry once with inferred types.
        del blob
        import onnx

        from nneditor.tracing.model_copy import expose_outputs

        model = onnx.load(str(model_path), load_external_data=False)
        outputs = expose_outputs(model, capture_names, infer_types=True)
        blob = model.SerializeToString()
        del model
        session, note = _session(ort, blob, options, provider_list, strict)
    del blob
    used = session.get_providers()[0]
    emit("provider", provider=used, name=prov.display_name(used))
    t1 = time.perf_counter()
    emit("stage", stage="running")
    try:
        results = session.run(outputs, feeds)
    except Exception as exc:
        kind = classify(exc)
        if kind == "memory":
            found = re.search(r"Failed to allocate memory[^\n]*", str(exc))
            detail = found.group(0) if found else _short(exc)
            raise BackendError(f"ONNX Runtime could not allocate memory ({detail})", kind) from None
        raise BackendError(
            f"ONNX Runtime failed while running the model: {_short(exc)}", kind
        ) from None
    t2 = time.perf_counter()
    if KEEP_SESSIONS is not None:
        KEEP_SESSIONS.append(session)
    del session
    emit("stage", stage="writing captures")
    index = {name: i for i, name in enumerate(outputs)}
    for name in capture_names:  # graph order, so a budget keeps the earliest values
        i = index[name]
        value, results[i] = results[i], None  # released as soon as it is on disk
        store.write(name, value)
        del value
    del results
    store.flush()
    t3 = time.perf_counter()
    return {
        "provider": used,
        "provider_name": prov.display_name(used),
        "session_s": round(t1 - t0, 6),
        "inference_s": round(t2 - t1, 6),
        "capture_s": round(t3 - t2, 6),
        "graph_optimization": optimization,
        "notes": [n for n in (note, _precision_note(ort, used)) if n],
    }


def _session(
    ort: Any,
    model: bytes,
    options: Any,
    provider_list: list[tuple[str, dict[str, str]]],
    strict: bool,
) -> tuple[Any, str]:
    names = [p for p, _ in provider_list]
    opts = [_full_precision(ort, p, o) for p, o in provider_list]
    try:
        session = ort.InferenceSession(model, options, providers=names, provider_options=opts)
    except Exception as exc:
        accel = [p for p in names if p != prov.CPU]
        if strict and accel:
            raise BackendError(
                f"the {prov.display_name(accel[0])} execution provider could not run this model "
                f"({_short(exc)}); NNEditor does not fall back to CPU for an explicit device",
                "device",
            ) from None
        if accel and prov.CPU in names:
            try:
                session = ort.InferenceSession(model, options, providers=[prov.CPU])
            except Exception as exc2:
                raise BackendError(
                    f"ONNX Runtime refused the model: {_short(exc2)}", classify(exc2)
                ) from None
            return session, (
                f"{prov.display_name(accel[0])} could not run the model ({_short(exc)}); ran on CPU"
            )
        raise BackendError(
            f"ONNX Runtime refused the model: {_short(exc)}", classify(exc)
        ) from None
    used = session.get_providers()[0]
    if strict and used != names[0]:
        raise BackendError(
            f"{prov.display_name(names[0])} was requested but ONNX Runtime initialised {used} "
            "instead (check the accelerator's drivers); NNEditor does not fall back to CPU for "
            "an explicit device",
            "device",
        )
    note = ""
    if names and used != names[0]:
        note = f"{prov.display_name(names[0])} was not usable; ran on {prov.display_name(used)}"
    return session, note


def _full_precision(ort: Any, provider: str, options: dict[str, str]) -> dict[str, str]:
    """``options`` with TensorFloat-32 turned off on CUDA (ONNX Runtime 1.18+ knows the key).

    A trace is read as the model's float32 values, and TF32 rounds the inputs of matrix
    products to 10 mantissa bits: on an H200 it moved PP-OCRv4's values up to 3.4% from the
    CPU's (1.3e-5 without it) at no measurable cost in time.
    """
    opts = dict(options)
    if provider == "CUDAExecutionProvider" and _version(ort) >= (1, 18):
        opts.setdefault("use_tf32", "0")
    return opts


def _precision_note(ort: Any, used: str) -> str:
    if used != "CUDAExecutionProvider":
        return ""
    if _version(ort) >= (1, 18):
        return "CUDA ran float32 matrix products at full precision (TF32 off)"
    return "CUDA may round float32 matrix products to TF32 (this ONNX Runtime cannot turn it off)"


def _version(ort: Any) -> tuple[int, ...]:
    found = re.match(r"(\d+)\.(\d+)", str(getattr(ort, "__version__", "")))
    return (int(found.group(1)), int(found.group(2))) if found else (0, 0)


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:400]
