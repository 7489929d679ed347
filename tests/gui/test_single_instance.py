"""Opening a file while NNEditor runs hands it to the running window: a second launch with a
path connects to the window's local server, which opens the model; with no window running the
launch goes on by itself."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

pytest.importorskip("PySide6")

from nneditor.ui import single_instance  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "tiny_transformer.onnx"


def test_a_second_launch_opens_its_file_in_the_running_window(qtbot, window, monkeypatch) -> None:  # noqa: ANN001
    name = f"nneditor-test-{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv(single_instance.NAME_ENV, name)
    server = single_instance.InstanceServer(window)
    assert server.listening
    env = {**os.environ, single_instance.NAME_ENV: name, "QT_QPA_PLATFORM": "offscreen"}
    env.pop("DISPLAY", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "nneditor", str(EXAMPLE)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    )
    qtbot.waitUntil(lambda: proc.poll() is not None, timeout=30000)
    out, err = proc.communicate()
    assert proc.returncode == 0, err
    assert "opened" in out and "in the running window" in out
    qtbot.waitUntil(
        lambda: window.index is not None and Path(window.index.doc.path) == EXAMPLE,
        timeout=30000,
    )
    server.server.close()


def test_without_a_running_window_nothing_is_forwarded(monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.setenv(single_instance.NAME_ENV, f"nneditor-none-{uuid.uuid4().hex[:8]}")
    assert not single_instance.forward(str(EXAMPLE), timeout_ms=200)
