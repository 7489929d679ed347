"""A failure at any stage of showing a model reaches the user: opening, indexing, building a
level, laying it out, painting it. The canvas says why, the rest of the window stays usable,
and ``--screenshot`` exits 2 with one ``nneditor:`` line within seconds instead of waiting."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from PySide6.QtWidgets import QMessageBox

from nneditor.ui.canvas import items as canvas_items

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "tiny_transformer.onnx"


def _boom(*_a: object, **_k: object) -> None:
    raise RuntimeError("injected failure")


def _no_dialogs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    shown: list[str] = []
    monkeypatch.setattr(
        QMessageBox, "critical", staticmethod(lambda _p, _t, text, *a: shown.append(text))
    )
    return shown


@pytest.mark.parametrize("stage", ["open", "index"])
def test_open_and_index_failures_are_reported(qtbot, window, monkeypatch, stage):  # noqa: ANN001
    shown = _no_dialogs(monkeypatch)
    target = "nneditor.ui.main_window." + ("api.open" if stage == "open" else "index_document")
    import nneditor.ui.main_window as main_window

    original = main_window.api.open if stage == "open" else main_window.index_document
    monkeypatch.setattr(target, _boom)
    with qtbot.waitSignal(window.openFailed, timeout=10000) as sig:
        window.open_path(str(EXAMPLE))
    assert "injected failure" in sig.args[0] and "Traceback" not in sig.args[0]
    assert shown == [sig.args[0]]
    assert window.central_widget is window.start and window.index is None
    # restore only this patch: undo() would also drop the per-test home of conftest.py and
    # let the real user folders (their edit journals) into the test
    monkeypatch.setattr(target, original)
    with qtbot.waitSignal(window.firstFrame, timeout=30000):
        window.open_path(str(EXAMPLE))


def _shows_failure(window, phrase: str) -> None:  # noqa: ANN001
    wb = window.workbench
    assert wb.stack.currentWidget() is wb.empty
    text = wb.empty.text()
    assert text.startswith(phrase) and "injected failure" in text, text
    assert wb.scene.item_count == 0


@pytest.mark.parametrize(
    ("stage", "phrase"),
    [
        ("build", "This level could not be built:"),
        ("layout", "This level could not be laid out:"),
    ],
)
def test_level_failures_show_on_the_canvas(qtbot, window, monkeypatch, stage, phrase):  # noqa: ANN001
    import nneditor.layout.cache
    import nneditor.ui.session

    _no_dialogs(monkeypatch)
    module, name = (
        (nneditor.ui.session, "build_level")
        if stage == "build"
        else (nneditor.layout.cache, "layered_layout")
    )
    original = getattr(module, name)
    monkeypatch.setattr(module, name, _boom)
    with qtbot.waitSignal(window.viewFailed, timeout=10000) as sig:
        window.open_path(str(EXAMPLE))
    assert sig.args[0].startswith(phrase)
    _shows_failure(window, phrase)
    # the rest of the window works: the structure tree, the inspector, another level
    assert window.index is not None and window.left_dock.isVisible()
    assert window.tree.tree.model().rowCount() > 0
    monkeypatch.setattr(module, name, original)  # only this patch (see above)
    with qtbot.waitSignal(window.workbench.levelShown, timeout=10000):
        window.session.set_depth(3)
    assert window.workbench.stack.currentWidget() is window.workbench.view
    assert window.workbench.scene.item_count > 0


def test_paint_failure_shows_on_the_canvas(qtbot, window, open_model, monkeypatch):  # noqa: ANN001
    open_model(EXAMPLE)
    monkeypatch.setattr(canvas_items.NodeItem, "paint", canvas_items.guarded_paint(_boom))
    with qtbot.waitSignal(window.viewFailed, timeout=10000) as sig:
        window.session.set_depth(2)
        window.workbench.view.viewport().repaint()
    assert sig.args[0].startswith("This level could not be drawn:")
    _shows_failure(window, "This level could not be drawn:")


_SCRIPT = """
import sys
import nneditor.layout.cache as cache
from nneditor.ui.app import run_app

def boom(*a, **k):
    raise RuntimeError("injected failure")

cache.layered_layout = boom
sys.exit(run_app([sys.argv[1], "--screenshot", sys.argv[2]]))
"""


def test_screenshot_exits_with_one_line_when_a_level_fails(tmp_path: Path) -> None:
    out = tmp_path / "shot.png"
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_SCRIPT), str(EXAMPLE), str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        env={"QT_QPA_PLATFORM": "offscreen", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )
    assert time.monotonic() - start < 60
    assert proc.returncode == 2, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert lines == [lines[0]] and lines[0].startswith("nneditor: This level could not be laid out")
    assert "injected failure" in lines[0]
    assert not out.exists()
