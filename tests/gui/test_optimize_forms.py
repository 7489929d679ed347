"""Quantization and pruning in the window's Edit tab: the numbers are shown before Commit is
enabled, they are the numbers of the weights as stored (checked with numpy on the model read
by onnx), and a commit becomes a revision whose saved model ONNX Runtime runs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

pytest.importorskip("PySide6")

from PySide6.QtWidgets import QMessageBox  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "tiny_transformer.onnx"


@pytest.fixture(autouse=True)
def _discard_on_close(monkeypatch):  # noqa: ANN001, ANN202
    discard = QMessageBox.StandardButton.Discard
    monkeypatch.setattr(QMessageBox, "question", staticmethod(lambda *a: discard))


@pytest.fixture
def editing(qtbot, open_model):  # noqa: ANN001, ANN201
    window = open_model(EXAMPLE)
    qtbot.waitUntil(lambda: window.edit.session is not None, timeout=20000)
    window.left_tabs.setCurrentWidget(window.edit_panel)
    return window


def _preview(qtbot, panel) -> str:  # noqa: ANN001
    panel.preview_button.click()
    assert not panel.commit_button.isEnabled()  # nothing to commit before the numbers
    qtbot.waitUntil(
        lambda: panel._pending is None and panel.numbers is not None and bool(panel.numbers[1]),
        timeout=30000,
    )
    return panel.result_view.toPlainText()


def _weights() -> dict[str, np.ndarray]:
    model = onnx.load(str(EXAMPLE))
    return {
        t.name: numpy_helper.to_array(t).astype(np.float64)
        for t in model.graph.initializer
        if t.data_type == onnx.TensorProto.FLOAT and np.prod(t.dims) >= 1024
    }


def test_quantize_shows_error_and_size_then_commits(qtbot, editing) -> None:  # noqa: ANN001
    window = editing
    panel = window.edit_panel
    form = panel.choose("Quantize weights (8-bit)")
    text = _preview(qtbot, panel)
    assert panel.commit_button.isEnabled(), text
    matmul = {n.input[1] for n in onnx.load(str(EXAMPLE)).graph.node if n.op_type == "MatMul"}
    weights = {n: w for n, w in _weights().items() if n in matmul}  # the embedding is not
    # symmetric per-tensor int8 by hand: scale = max|w| / 127, round half to even, clip
    signal = noise = 0.0
    for w in weights.values():
        scale = np.float32(np.abs(w).max() / 127)
        q = np.clip(np.round(w.astype(np.float32) / scale), -127, 127)
        noise += float(((q * scale - w) ** 2).sum())
        signal += float((w**2).sum())
    sqnr = 10 * np.log10(signal / noise)
    assert f"{len(weights)} weights" in text
    assert f"SQNR {sqnr:.1f} dB" in text
    before = sum(w.size * 4 for w in weights.values())
    assert "stored size" in text and "less" in text and f"{before / 1024:,.1f} KiB" in text
    assert "not measured" in text or "was not measured" in text  # no speed claim
    # changing a field withdraws the preview
    form.per_channel.setChecked(True)
    assert not panel.commit_button.isEnabled()
    form.per_channel.setChecked(False)
    _preview(qtbot, panel)
    panel.commit_button.click()
    qtbot.waitUntil(
        lambda: any(n.op_type == "DequantizeLinear" for n in window.index.graph.nodes),
        timeout=20000,
    )
    assert window.edit.session.chain.cursor == 1


def test_threshold_pruning_reports_sparsity_not_size(qtbot, editing) -> None:  # noqa: ANN001
    window = editing
    panel = window.edit_panel
    form = panel.choose("Prune weights")
    form.threshold.setText("0.05")
    text = _preview(qtbot, panel)
    matmul = {n.input[1] for n in onnx.load(str(EXAMPLE)).graph.node if n.op_type == "MatMul"}
    weights = {n: w for n, w in _weights().items() if n in matmul}
    total = sum(w.size for w in weights.values())
    pruned = sum(int(((np.abs(w) < 0.05) & (w != 0)).sum()) for w in weights.values())
    assert f"{pruned:,} of {total:,} values set to zero" in text
    assert "stored size unchanged" in text and "not a smaller or faster" not in text.lower()
    assert "dense zeros" in text
    assert panel.commit_button.isEnabled()
    panel.commit_button.click()
    qtbot.waitUntil(lambda: window.edit.session.chain.cursor == 1, timeout=20000)


def test_channel_pruning_shows_the_proof_and_a_bad_form_says_why(qtbot, editing) -> None:  # noqa: ANN001
    window = editing
    panel = window.edit_panel
    form = panel.choose("Prune weights")
    form.method.setCurrentIndex(3)  # channels
    assert not form.threshold.isVisible() and form.node.isVisible()
    panel.preview_button.click()
    assert "Choose the terminal MatMul" in panel.result_view.toPlainText()
    form.node.setText("/lm_head/MatMul")
    form.channels.setText("3,7")
    text = _preview(qtbot, panel)
    assert "96 → 94 output channels" in text and "Why this is safe" in text
    assert panel.commit_button.isEnabled()
    form.node.setText("/ln_f/LayerNormalization_47")  # not a MatMul: refused with a sentence
    _preview(qtbot, panel)
    assert not panel.commit_button.isEnabled()
    assert "MatMul" in panel.result_view.toPlainText()
