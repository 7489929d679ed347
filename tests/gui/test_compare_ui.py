"""Compare in the window: "Compare with…" shows an ONNX model against its quantized export as
weight deltas; the Traced model pane colours ports by drift against a trace of a perturbed
copy, and says where the drift starts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

pytest.importorskip("PySide6")

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "tiny_transformer.onnx"


def _cli(*args: object) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "nneditor", *map(str, args)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr


def test_compare_models_and_traces(qtbot, open_model, window, tmp_path: Path) -> None:  # noqa: ANN001
    quantized = tmp_path / "q.onnx"
    _cli("quantize", EXAMPLE, "--out", quantized)
    open_model(EXAMPLE)
    assert window.top_bar.compare_button.isEnabled()
    window.compare_with(str(quantized))
    qtbot.waitUntil(lambda: window.compare_dialog is not None, timeout=60000)
    dialog = window.compare_dialog
    table = dialog.tensor_table
    assert table.rowCount() == 30 and table.item(0, 2).text() == "changed"
    assert float(table.item(0, 3).text()) > 1e-3  # the largest quantization error first
    assert "13 weights compared with the DequantizeLinear output" in dialog.summary.text()
    dialog.grab().save(str(tmp_path / "compare_models.png"))

    model = onnx.load(str(EXAMPLE))
    init = next(t for t in model.graph.initializer if t.name == "blocks.1.mlp.fc1.weight")
    w = numpy_helper.to_array(init).copy()
    w[0, :] += np.float32(0.5)  # one input row: a column would meet a zero-mean LayerNorm output
    init.CopyFrom(numpy_helper.from_array(w, init.name))
    perturbed = tmp_path / "perturbed.onnx"
    onnx.save(model, str(perturbed))
    np.savez(tmp_path / "in.npz", input_ids=np.array([[3, 1, 4, 1]], np.int64))
    _cli("trace", perturbed, "--inputs", tmp_path / "in.npz", "--out", tmp_path / "b", "--yes")
    feature = window.trace
    feature.show_view("Trace")
    panel = feature.panel
    panel.set_inputs({"input_ids": np.array([[3, 1, 4, 1]], np.int64)}, "test")
    runs: list = []
    panel.traceFinished.connect(runs.append)
    assert panel.approve_and_run(), panel.plan_text.toPlainText()
    qtbot.waitUntil(lambda: not panel.running, timeout=120000)
    assert runs, panel.outcome.text()
    pane = feature.traced
    pane.session.set_depth(4)
    qtbot.waitUntil(lambda: bool(pane.port_items()), timeout=20000)
    said = pane.show_comparison(tmp_path / "b")
    assert "drift starts at" in said and "(blocks.1)" in said, said
    colored = [p for p in pane.port_items() if p.drift is not None]
    assert colored and any(p.drift == 0.0 for p in colored) and any(p.drift > 1e-3 for p in colored)
    assert "relative L2 vs b" in colored[0].toolTip()
    pane.session.set_depth(2)  # blocks: block 0 green, block 1 hot
    qtbot.waitUntil(lambda: any(p.drift for p in pane.port_items()), timeout=20000)
    boxes = pane.workbench.scene.items_by_key.values()
    heats = {b.spec.label: b.heat.hue() for b in boxes if getattr(b, "heat", None) is not None}
    assert heats["blocks.0"] > 100 and heats["blocks.1"] < 20, heats  # green, then red
    window.grab().save(str(tmp_path / "compare_traces.png"))
    table = pane.show_drift_table()
    assert table is not None and table.value_table.rowCount() > 20

    drifting = next(v for v in pane.compared["values"] if v.get("status") == "drift")
    overlay = feature.open_overlay(drifting["name"])
    assert overlay is not None and overlay.difference_panel is not None
    tabs = [overlay.tabs.tabText(i) for i in range(overlay.tabs.count())]
    assert "Compared (b)" in tabs and "Difference (A − B)" in tabs
    from nneditor.diff.traces import load_value

    want = np.asarray(load_value(runs[0].path, drifting["name"]), np.float64) - np.asarray(
        load_value(tmp_path / "b", drifting["name"]), np.float64
    )
    np.testing.assert_array_equal(overlay.difference_panel.ref.read(), want)
    assert "relative L2" in overlay.comparison_text
    overlay.grab().save(str(tmp_path / "difference.png"))
