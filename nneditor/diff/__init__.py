"""Compare two models, or two traces: ``diff_paths(A, B)`` decides which from the paths.

- models (:mod:`.models`): operators added, removed and changed; tensors matched by name (by
  llama.cpp's canonical names between a GGUF and a snapshot; through DequantizeLinear for a
  quantized ONNX export) with streamed deltas (max abs, relative L2, cosine);
- traces (:mod:`.traces`): per-value relative L2 and cosine, and where drift starts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nneditor.diff.traces import diff_traces, is_trace


def diff_paths(a: str | Path, b: str | Path, threshold: float = 1e-3) -> dict[str, Any]:
    pa, pb = Path(a), Path(b)
    if is_trace(pa) and is_trace(pb):
        return diff_traces(pa, pb, threshold)
    if is_trace(pa) or is_trace(pb):
        from nneditor.diff.traces import TraceDiffError

        raise TraceDiffError(
            "compare two trace folders, or two models; one of these is a trace folder and the "
            "other is not"
        )
    import nneditor
    from nneditor.diff.models import diff_documents

    with nneditor.open(pa) as da, nneditor.open(pb) as db:
        return diff_documents(da, db).as_dict()
