"""The tensor-picker button inside a graph input's node assigns a .npy/.npz to that input for
the next trace; the rest of the node still selects it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("PySide6")

from PySide6.QtCore import QPoint, QPointF, Qt  # noqa: E402
from PySide6.QtWidgets import QFileDialog  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "tiny_transformer.onnx"


def _click(qtbot, view, scene_point) -> None:  # noqa: ANN001
    view.centerOn(scene_point)
    p = view.mapFromScene(scene_point)
    qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=QPoint(p.x(), p.y()))


def test_the_picker_button_assigns_a_tensor_file(
    qtbot, open_model, window, tmp_path, monkeypatch
) -> None:  # noqa: ANN001
    ids = np.array([[5, 17, 3, 90]], np.int64)
    np.save(tmp_path / "ids.npy", ids)
    asked: list[str] = []

    def dialog(*args: object, **kw: object) -> tuple[str, str]:
        asked.append(str(args[1]))
        return str(tmp_path / "ids.npy"), ""

    monkeypatch.setattr(QFileDialog, "getOpenFileName", staticmethod(dialog))
    open_model(EXAMPLE)
    scene, view = window.workbench.scene, window.workbench.view
    node = next(it for it in scene.items_by_key.values() if it.spec.kind == "input")
    assert node.picker and node.spec.value == "input_ids"
    outputs = [it for it in scene.items_by_key.values() if it.spec.kind == "output"]
    assert outputs and not any(it.picker for it in outputs)
    # a click on the pill itself selects, no dialog
    _click(qtbot, view, node.mapToScene(QPointF(node.spec.width / 2, node.spec.height / 2)))
    assert not asked and window.session.selection is not None
    _click(qtbot, view, node.mapToScene(node.picker_rect().center()))
    assert asked == ["Tensor for input input_ids"]
    feature = window.trace
    assert window.central.currentWidget() is feature.page
    qtbot.waitUntil(lambda: feature.panel.arrays is not None, timeout=20000)
    np.testing.assert_array_equal(feature.panel.arrays["input_ids"], ids)
    assert "ids.npy" in window.status_label.text()
    assert "input_ids" in feature.panel.plan_text.toPlainText()
