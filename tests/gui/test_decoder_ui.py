"""A GGUF language model in the window: the Trace view plans the NumPy decoder on CPU, the Text
tokens box writes the prompt's ids, the trace runs, the Traced model pane shows ports on the
synthesized blocks, and the logits' Tokens tab names the next token."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("PySide6")

ROOT = Path(__file__).resolve().parents[2]
SMOL = "SmolLM2-135M-Instruct.Q4_1.gguf"


@pytest.mark.realdata
def test_gguf_prompt_trace_and_next_token(qtbot, open_model, window, realdata, tmp_path) -> None:  # noqa: ANN001
    path = realdata(SMOL)
    open_model(path)
    feature = window.trace
    feature.show_view("Trace")
    panel, inputs = feature.panel, feature.inputs
    assert panel.plan is not None, panel.plan_text.toPlainText()
    text = panel.plan_text.toPlainText()
    assert "NumPy decoder" in text and "device: CPU (NumPy)" in text and "30 layers" in text
    assert inputs.text_box.isVisibleTo(window) and "'tokens'" in inputs.text_box.title()
    inputs.prompt.setCurrentText("The capital of France is")
    inputs.folder.setText(str(tmp_path / "set"))
    assert inputs.generate_text_tokens(), inputs.status.text()
    assert panel.arrays["tokens"].tolist() == [[504, 3575, 282, 4649, 314]]
    window.grab().save(str(tmp_path / "trace_view.png"))
    runs: list = []
    panel.traceFinished.connect(runs.append)
    assert panel.approve_and_run(), panel.plan_text.toPlainText()
    qtbot.waitUntil(lambda: not panel.running, timeout=120000)
    assert runs, panel.outcome.text()
    run = runs[0]
    assert window.top_bar.device.text() == "NumPy decoder (CPU)"
    pane = feature.traced
    assert window.central.currentWidget() is pane
    pane.session.set_depth(2)  # blocks
    qtbot.waitUntil(lambda: bool(pane.port_items()), timeout=20000)
    ported = {v for p in pane.port_items() for v in p.port.values}
    assert {"blk.0.output", "blk.29.output"} <= ported, sorted(ported)
    window.grab().save(str(tmp_path / "traced.png"))

    overlay = feature.open_overlay("result_output")
    assert overlay is not None and overlay.tokens_tab is not None
    overlay.show_tab("Tokens")
    tab = overlay.tokens_tab
    assert f"49,152 tokens from {SMOL}" in tab.source.text()
    result = tab.inspect_predictions()
    assert result is not None and result["position"] == 4 and result["complete"]
    assert result["top"][0]["text"] == " Paris"
    logits = run.load("result_output")
    assert result["top"][0]["id"] == int(logits[0, -1].argmax()) == 7042
    refs = json.loads((ROOT / "tests" / "data" / "llama_cpp_logit_refs.json").read_text("utf-8"))
    assert refs[SMOL][0]["top1"][-1] == 7042  # llama.cpp's next token too
    overlay.resize(900, 600)
    overlay.grab().save(str(tmp_path / "tokens.png"))


@pytest.mark.realdata
def test_prism_hybrid_gguf_traces_with_ports_on_every_mixer_part(
    qtbot,  # noqa: ANN001
    open_model,  # noqa: ANN001
    window,  # noqa: ANN001
    zoo_artifact,  # noqa: ANN001
    tmp_path,  # noqa: ANN001
) -> None:
    """A qwen35 hybrid with PTQ1_0 weights and a Hadamard fold (tools/prism_pack.py): the plan
    names the hybrid stack and the fold, the prompt tokenizes with the file's own vocabulary,
    and the Traced model pane has ports on the recurrence's and the gated attention's parts."""
    path = zoo_artifact("decoder-qwen35-ptq1_0.gguf")
    open_model(path)
    feature = window.trace
    feature.show_view("Trace")
    panel, inputs = feature.panel, feature.inputs
    assert panel.plan is not None, panel.plan_text.toPlainText()
    text = panel.plan_text.toPlainText()
    assert "2 Gated DeltaNet and 2 attention layers" in text, text
    assert "Prism Hadamard fold v2 (block 128)" in text, text
    inputs.prompt.setCurrentText("The capital of France is")
    inputs.folder.setText(str(tmp_path / "set"))
    assert inputs.generate_text_tokens(), inputs.status.text()
    assert panel.arrays["tokens"].tolist() == [[504, 3575, 282, 4649, 314]]  # SmolLM2's vocab
    runs: list = []
    panel.traceFinished.connect(runs.append)
    assert panel.approve_and_run(), panel.plan_text.toPlainText()
    qtbot.waitUntil(lambda: not panel.running, timeout=120000)
    assert runs, panel.outcome.text()
    pane = feature.traced
    pane.session.set_depth(4)  # inside the mixers
    qtbot.waitUntil(lambda: bool(pane.port_items()), timeout=20000)
    ported = {v for p in pane.port_items() for v in p.port.values}
    want = {"blk.0.ssm_conv", "blk.0.ssm_delta", "blk.0.ssm_gated_norm", "blk.1.attn_gated"}
    assert want <= ported, sorted(ported)
    delta = runs[0].load("blk.0.ssm_delta")
    assert delta.shape == (1, 5, 4 * 96) and np.isfinite(delta).all()
    window.grab().save(str(tmp_path / "hybrid_traced.png"))
