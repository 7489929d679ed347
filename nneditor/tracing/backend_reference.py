"""Reference backend (worker side): ``onnx.reference.ReferenceEvaluator`` on a normalised copy.

Invariants:

- The evaluator runs the private copy after :func:`normalize_scans`, so Scans over nonzero
  axes or in reverse run with identical semantics.
- Intermediate values come from ``run(..., intermediate=True)``, the evaluator's documented
  way to return every result of a graph; each is handed to the capture store and removed from
  the result dictionary at once.
- Values inside subgraphs are captured through the evaluator class itself: onnx builds the
  evaluator of every If/Loop/Scan body with ``self.__class__``, so a subclass whose ``run``
  asks for ``intermediate=True`` sees each body's results. Only values the worker allows
  (``nested``: bodies outside Loop/Scan, which run at most once) are stored, first run only.
- External data is loaded by onnx from the model's own folder (onnx refuses locations outside
  it); the source file is never modified.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from nneditor.tracing.backend_errors import BackendError, classify
from nneditor.tracing.capture import CaptureStore
from nneditor.tracing.model_copy import has_external_data
from nneditor.tracing.reference_fixes import NEW_OPS
from nneditor.tracing.scan_normalize import ScanRewriteError, normalize_scans


def _ranks(model: onnx.ModelProto) -> dict[str, int]:
    try:
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False)
    except Exception:
        return {}
    out = {}
    for vi in (*inferred.graph.value_info, *inferred.graph.input, *inferred.graph.output):
        t = vi.type.tensor_type
        if vi.type.HasField("tensor_type") and t.HasField("shape"):
            out[vi.name] = len(t.shape.dim)
    return out


def _capturing_class(nested: set[str], store: CaptureStore) -> type:
    """A ReferenceEvaluator subclass that stores allowed subgraph values as bodies run."""
    from onnx.reference import ReferenceEvaluator

    class CapturingEvaluator(ReferenceEvaluator):  # type: ignore[misc]
        def run(  # type: ignore[override]
            self,
            output_names: Any,
            feed_inputs: dict[str, Any],
            attributes: dict[str, Any] | None = None,
            intermediate: bool = False,
            **kwargs: Any,
        ) -> Any:
            if intermediate or not nested or not isinstance(self.proto_, onnx.GraphProto):
                return super().run(output_names, feed_inputs, attributes, intermediate, **kwargs)
            results = super().run(None, feed_inputs, attributes, True, **kwargs)
            assert isinstance(results, dict)
            outputs = [results[n] for n in (output_names or self.output_names)]
            for name in nested.intersection(results):
                nested.discard(name)  # first run only
                store.write(name, results[name])
            return outputs

    return CapturingEvaluator


def run_reference(
    model_path: Path,
    model: onnx.ModelProto,
    feeds: dict[str, np.ndarray],
    capture_names: list[str],
    nested: set[str],
    store: CaptureStore,
    emit: Callable[..., None],
) -> dict[str, Any]:
    """Evaluate ``model`` once and capture ``capture_names`` (and ``nested`` subgraph values
    where bodies run once); returns run info."""
    t0 = time.perf_counter()
    if has_external_data(model):
        onnx.load_external_data_for_model(model, str(model_path.resolve().parent))
    try:
        rewritten = normalize_scans(model, lambda: _ranks(model))
    except ScanRewriteError as exc:
        raise BackendError(str(exc), "model") from None
    emit("stage", stage="preparing reference evaluator")
    try:
        evaluator = _capturing_class(set(nested), store)(model, new_ops=NEW_OPS)
    except Exception as exc:
        raise BackendError(
            f"the reference evaluator refused the model: {exc}", classify(exc)
        ) from None
    emit("provider", provider="reference", name="ONNX reference evaluator (CPU)")
    t1 = time.perf_counter()
    emit("stage", stage="running")
    try:
        results = evaluator.run(None, feeds, intermediate=True)
    except Exception as exc:
        raise BackendError(
            f"the reference evaluator failed while running the model: {type(exc).__name__}: {exc}",
            classify(exc),
        ) from None
    t2 = time.perf_counter()
    assert isinstance(results, dict)
    del evaluator
    emit("stage", stage="writing captures")
    for name in capture_names:
        if name in results:
            store.write(name, results.pop(name))
    results.clear()
    store.flush()
    t3 = time.perf_counter()
    return {
        "provider": "reference",
        "provider_name": "ONNX reference evaluator (CPU)",
        "session_s": round(t1 - t0, 6),
        "inference_s": round(t2 - t1, 6),
        "capture_s": round(t3 - t2, 6),
        "notes": [f"normalised {rewritten} Scan node(s) to axis 0 for the reference evaluator"]
        if rewritten
        else [],
    }
