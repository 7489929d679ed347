"""The top bar's File types: the dialog lists the twelve extensions, registers this user on
Linux (files read back in a temporary XDG home) and removes the registration again; the
window carries the app icon."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("PySide6")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="XDG registration")
def test_file_types_dialog_registers_and_removes(window, tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    window.top_bar.fileTypesRequested.emit()
    dialog = window.file_types_dialog
    exts = [dialog.table.item(r, 0).text() for r in range(dialog.table.rowCount())]
    assert exts == [
        ".onnx",
        ".pb",
        ".pt2",
        ".pt",
        ".pth",
        ".ckpt",
        ".bin",
        ".safetensors",
        ".mlir",
        ".stablehlo",
        ".dlc",
        ".gguf",
    ]
    done = dialog.register()
    assert (tmp_path / "applications" / "nneditor.desktop").is_file(), done
    assert "nneditor.desktop" in dialog.status.toPlainText()
    dialog.grab().save(str(tmp_path / "file_types.png"))
    dialog.unregister()
    assert not (tmp_path / "applications" / "nneditor.desktop").exists()
    assert "removed" in dialog.status.toPlainText()
