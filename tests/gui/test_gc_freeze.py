"""An open document's objects are frozen out of full collections and released on close."""

from __future__ import annotations

import gc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "tiny_transformer.onnx"


def test_open_freezes_and_close_unfreezes(qtbot, open_model, window) -> None:  # noqa: ANN001
    gc.unfreeze()
    open_model(EXAMPLE)
    assert gc.get_freeze_count() > 0
    open_model(EXAMPLE)  # replacing the document: the old one is unfrozen first
    assert gc.get_freeze_count() > 0
    window.close_model()
    assert window.index is None and gc.get_freeze_count() == 0
