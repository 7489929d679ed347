"""Any artifact kind a tracer plugin declares can be planned in the window: the Trace view gets
the document (the built-in tracers' plan says why they cannot run it), and the plugin is
offered and planned."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("PySide6")

from nneditor.tracing.plugins import install  # noqa: E402
from nneditor.tracing.plugins.discovery import PATH_ENV  # noqa: E402
from nneditor.tracing.plugins.manifest import MANIFEST  # noqa: E402


@pytest.mark.realdata
def test_a_stablehlo_plugin_is_offered_and_planned(
    qtbot,  # noqa: ANN001
    open_model,  # noqa: ANN001
    window,  # noqa: ANN001
    zoo_artifact,  # noqa: ANN001
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    lib = tmp_path / "lib"
    plugin = install.create(lib / "hlo")
    data = json.loads((plugin / MANIFEST).read_text())
    data.update(artifact_kinds=["stablehlo_model"], architectures=[])
    (plugin / MANIFEST).write_text(json.dumps(data))
    monkeypatch.setenv(PATH_ENV, str(lib))
    open_model(zoo_artifact("jax_mlp.mlir"))
    feature = window.trace
    feature.show_view("Trace")
    panel = feature.panel
    assert panel.doc is not None and panel.doc.format == "stablehlo"
    assert panel.doc.capabilities["trace"].available  # the inspector's "what you can do"
    assert panel.doc.capabilities["trace"].reason == f"with the tracer plugin {data['id']}"
    assert panel.plan is None
    text = panel.plan_text.toPlainText()
    assert "cannot run" in text and "stablehlo" in text  # why the built-in tracers cannot
    assert data["id"] in text  # ... and which installed plugin could
    choice = panel.tracer
    choice.reload()
    k = choice.combo.findData(data["id"])
    assert k > 0, choice.note.text()
    choice.combo.setCurrentIndex(k)
    assert panel.plan is not None, panel.plan_text.toPlainText()
    assert f"{data['id']} {data['version']}" in panel.plan_text.toPlainText()


def test_a_graphless_artifact_is_told_what_traces_it(
    qtbot, open_model, window, tmp_path: Path
) -> None:  # noqa: ANN001
    import numpy as np
    from safetensors.numpy import save_file

    model = tmp_path / "w.safetensors"
    save_file({"layer.weight": np.ones((4, 4), np.float32)}, str(model))
    open_model(model)
    window.trace.show_view("Trace")
    panel = window.trace.panel
    assert panel.doc is not None and panel.plan is None
    text = panel.plan_text.toPlainText()
    assert "is a safetensors artifact" in text and "traces ONNX models" in text
    cap = panel.doc.capabilities["trace"]
    assert not cap.available and "a tracer plugin can add safetensors artifacts" in cap.reason
