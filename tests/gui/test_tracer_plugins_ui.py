"""Tracer plugins in the window: the Trace view lists every discovered tracer, greys out the
ones that cannot run the open model with the reason, installs a folder without importing it,
reloads, and runs the chosen plugin through Approve & run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("PySide6")

from nneditor.tracing.plugins import install  # noqa: E402
from nneditor.tracing.plugins.discovery import PATH_ENV  # noqa: E402
from nneditor.tracing.plugins.manifest import MANIFEST  # noqa: E402


@pytest.mark.realdata
def test_trace_view_chooses_installs_and_runs_plugins(
    qtbot,  # noqa: ANN001
    open_model,  # noqa: ANN001
    window,  # noqa: ANN001
    zoo_artifact,  # noqa: ANN001
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("NNEDITOR_HOME", str(tmp_path / "home"))
    lib = tmp_path / "lib"
    install.create(lib / "mine")  # example.mine: the llm template
    onnx_only = install.create(lib / "onnx-only")
    data = json.loads((onnx_only / MANIFEST).read_text())
    (onnx_only / MANIFEST).write_text(json.dumps({**data, "artifact_kinds": ["onnx_model"]}))
    monkeypatch.setenv(PATH_ENV, str(lib))
    open_model(zoo_artifact("decoder-llama.gguf"))
    feature = window.trace
    feature.show_view("Trace")
    panel = feature.panel
    choice = panel.tracer
    choice.reload()
    labels = [choice.combo.itemText(i) for i in range(choice.combo.count())]
    assert labels[0] == "NNEditor's built-in tracers"
    assert any("example.mine" in t for t in labels) and any(
        "example.onnx-only" in t for t in labels
    )
    note = choice.note.text()
    assert "Made for other files than this GGUF file: " in note
    assert "onnx-only (NumPy decoder) (runs ONNX models)" in note
    onnx_index = next(i for i, t in enumerate(labels) if "onnx-only" in t)
    assert choice.combo.itemData(onnx_index) is None  # not selectable
    tip = choice.combo.model().item(onnx_index).toolTip()  # the item keeps the whole reason
    assert tip == "runs onnx_model; this artifact is a gguf_model (artifact kind)"
    choice.combo.setCurrentIndex(choice.combo.findData("example.mine"))
    assert panel.plan is not None, panel.plan_text.toPlainText()
    text = panel.plan_text.toPlainText()
    assert "tracer plugin" in text and "example.mine 0.1.0" in text
    assert not panel.backend.isEnabled()
    window.grab().save(str(tmp_path / "plugins.png"))
    runs: list = []
    panel.traceFinished.connect(runs.append)
    assert panel.approve_and_run(), panel.plan_text.toPlainText()
    qtbot.waitUntil(lambda: not panel.running, timeout=120000)
    assert runs, panel.outcome.text()
    assert runs[0].run["plugin"]["id"] == "example.mine"
    assert (runs[0].path / "tracer-plugin" / "tracer.py").is_file()
    device = window.top_bar.device.text()
    assert device == "mine (NumPy decoder) 0.1.0 (tracer plugin)", device

    other = install.create(tmp_path / "elsewhere" / "second")
    said = choice.install_folder(other)
    assert said.startswith("Installed tracer example.second 0.1.0")
    assert choice.combo.findData("example.second") > 0
    assert "already installed" in choice.install_folder(other)


@pytest.mark.realdata
def test_unet_traces_on_the_bundled_diffusion_tracer(
    qtbot,  # noqa: ANN001
    open_model,  # noqa: ANN001
    window,  # noqa: ANN001
    zoo_artifact,  # noqa: ANN001
    tmp_path: Path,
) -> None:
    """A diffusers UNet: the built-in tracers refuse it and name the bundled plugin; choosing
    it plans, runs, and the Traced model pane has ports on the skip tensors."""
    pytest.importorskip("diffusers")
    open_model(zoo_artifact("unet-sd"))
    feature = window.trace
    feature.show_view("Trace")
    panel = feature.panel
    assert panel.plan is None
    assert "tracer plugin nneditor.diffusion-unet can run it" in panel.plan_text.toPlainText()
    choice = panel.tracer
    choice.combo.setCurrentIndex(choice.combo.findData("nneditor.diffusion-unet"))
    assert panel.plan is not None, panel.plan_text.toPlainText()
    runs: list = []
    panel.traceFinished.connect(runs.append)
    assert panel.approve_and_run(), panel.plan_text.toPlainText()
    qtbot.waitUntil(lambda: not panel.running, timeout=120000)
    assert runs, panel.outcome.text()
    pane = feature.traced
    pane.session.set_depth(4)
    qtbot.waitUntil(lambda: bool(pane.port_items()), timeout=20000)
    ported = {v for p in pane.port_items() for v in p.port.values}
    assert {"down_blocks.0.res.2", "mid_block", "conv_out"} <= ported, sorted(ported)
    window.grab().save(str(tmp_path / "unet_traced.png"))
