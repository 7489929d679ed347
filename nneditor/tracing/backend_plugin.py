"""Tracer-plugin backend (worker side): imports the approved plugin snapshot and calls its
entry point with a :class:`~nneditor.tracing.sdk.TraceContext`.

Invariants:

- The code imported is the copy the parent took at approval time and checked against the
  approved fingerprint; the worker checks it once more before importing.
- Captures pass through the same store as built-in backends (selection, byte budget,
  streaming); values the plugin never publishes are marked by the host, not by the plugin.
- A :class:`~nneditor.tracing.sdk.TracePluginError` is the plugin's own sentence (kind
  "plugin"); any other exception is reported with its type and the plugin's id.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from nneditor.tracing.backend_errors import BackendError

if TYPE_CHECKING:
    from nneditor.model.document import Document


def run_plugin(
    doc: Document,
    plugin: dict[str, str],
    feeds: dict[str, np.ndarray],
    wanted: list[str],
    store: Any,
    emit: Callable[..., None],
    limits: dict[str, Any],
) -> dict[str, Any]:
    from nneditor.tracing.plugins.loader import load_entry
    from nneditor.tracing.plugins.manifest import PluginError, fingerprint
    from nneditor.tracing.sdk import TraceContext, TraceOutcome, TracePluginError

    t0 = time.perf_counter()
    folder = Path(plugin["folder"])
    pid = plugin["id"]
    try:
        if fingerprint(folder) != plugin["fingerprint"]:
            raise BackendError(
                f"the snapshot of tracer {pid} does not match its approval", "plugin"
            )
        emit("stage", stage=f"importing tracer plugin {pid}")
        entry = load_entry(folder, plugin["entry_file"], plugin["entry_function"])
    except PluginError as exc:
        raise BackendError(str(exc), "plugin") from None
    capture = set(wanted)

    def publish(name: str, value: np.ndarray) -> None:
        if name in capture:
            store.write(name, value)

    context = TraceContext(doc, feeds, limits, publish)
    emit("provider", provider=f"plugin:{pid}", name=plugin["name"])
    emit("stage", stage=f"running tracer plugin {pid}")
    t1 = time.perf_counter()
    try:
        outcome = entry(context)
    except TracePluginError as exc:
        raise BackendError(f"tracer {pid}: {exc}", "plugin") from None
    except (MemoryError, KeyboardInterrupt):
        raise
    except Exception as exc:
        raise BackendError(f"tracer {pid} failed: {type(exc).__name__}: {exc}", "plugin") from None
    finally:
        doc.close()
    t2 = time.perf_counter()
    if outcome is not None and not isinstance(outcome, TraceOutcome):
        raise BackendError(
            f"tracer {pid} returned {type(outcome).__name__}; return TraceOutcome or None",
            "plugin",
        )
    store.flush()
    t3 = time.perf_counter()
    provider = (outcome.provider if outcome else "") or f"plugin:{pid}"
    return {
        "provider": provider,
        "provider_name": f"{plugin['name']} {plugin['version']} (tracer plugin)",
        "session_s": round(t1 - t0, 6),
        "inference_s": round(t2 - t1, 6),
        "capture_s": round(t3 - t2, 6),
        "plugin": {k: plugin[k] for k in ("id", "name", "version", "fingerprint")},
        "notes": [f"tracer plugin {pid} {plugin['version']}", *(outcome.notes if outcome else ())],
    }
