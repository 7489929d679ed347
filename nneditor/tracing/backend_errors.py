"""The error every trace backend raises, and how a runtime's exception is classified.

Kept apart from the backends so that a backend (the NumPy decoder, a tracer plugin) raises it
without importing onnx or ONNX Runtime: the worker imports only the runtime its run uses.
"""

from __future__ import annotations

from nneditor.errors import NNEditorError

_MEMORY_MARKERS = (
    "bad_alloc",
    "Failed to allocate",
    "MemoryError",
    "out of memory",
    "std::bad_alloc",
)


class BackendError(NNEditorError):
    """A backend could not run; ``kind`` is "model", "device", "memory" or "internal"."""

    def __init__(self, message: str, kind: str = "model") -> None:
        super().__init__(message)
        self.kind = kind


def classify(exc: BaseException) -> str:
    """ "memory" for an allocation failure (also one a runtime reports as text), else "model"."""
    text = f"{type(exc).__name__}: {exc}"
    return (
        "memory"
        if isinstance(exc, MemoryError) or any(m in text for m in _MEMORY_MARKERS)
        else "model"
    )
