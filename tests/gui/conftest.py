"""GUI test fixtures: an isolated config folder, generated models, and a main window."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

sys.path.insert(0, str(Path(__file__).parent))
from tests_gui_models import make_nested_model  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "tiny_transformer.onnx"


@pytest.fixture(autouse=True)
def _isolated_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Recent files and edit journals go to a temporary folder, never the user's."""
    monkeypatch.setenv("NNEDITOR_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("NNEDITOR_HOME", str(tmp_path / "home"))


@pytest.fixture
def nested_model(tmp_path: Path) -> Path:
    return make_nested_model(tmp_path / "nested.onnx")


@pytest.fixture
def window(qtbot) -> Iterator:  # noqa: ANN001
    from nneditor.ui import theme
    from nneditor.ui.main_window import MainWindow

    theme.apply(qtbot_app(), dark=False)
    win = MainWindow(interactive=True)
    qtbot.addWidget(win)
    win.resize(1400, 900)
    win.show()
    yield win
    win.close()


def qtbot_app():  # noqa: ANN201
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance()
    assert app is not None
    return app


@pytest.fixture
def open_model(qtbot, window) -> Callable[[Path], object]:  # noqa: ANN001
    """``open_model(path)`` opens a file and waits until the first level is painted."""

    def go(path: Path) -> object:
        with qtbot.waitSignal(window.firstFrame, timeout=30000):
            window.open_path(str(path))
        return window

    return go
