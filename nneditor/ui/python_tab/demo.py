"""Render the Python tab after the PRODUCT.md softmax example: ``python -m
nneditor.ui.python_tab.demo OUT.png [--dark]`` (works with ``QT_QPA_PLATFORM=offscreen``).

The tensor is a seeded ``(1, 3, 32)`` float32 "logits" array written to a temporary folder,
which is deleted afterwards. Exit code 0 when the run ended ``ok`` and the PNG was written.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np
from PySide6.QtCore import QEventLoop, QTimer
from PySide6.QtWidgets import QApplication

from nneditor.ui import theme
from nneditor.ui.python_tab.widget import PythonTab

SIZE = (980, 760)
RUN_LIMIT_MS = 120_000


def render(out: Path, dark: bool = False) -> str:
    """Run the example in a fresh tab and save its screenshot; returns the run's status."""
    app = QApplication.instance() or QApplication([])
    assert isinstance(app, QApplication)
    theme.apply(app, dark=dark)
    with tempfile.TemporaryDirectory(prefix="nneditor-python-tab-demo-") as tmp:
        path = Path(tmp) / "logits.npy"
        rng = np.random.default_rng(1234)
        np.save(path, (rng.standard_normal((1, 3, 32)) * 3).astype(np.float32))
        tab = PythonTab(workdir=Path(tmp) / "runs")
        tab.resize(*SIZE)
        tab.set_tensor(path, {"name": "logits", "shape": [1, 3, 32]}, "logits")
        tab.show()
        tab.setFocus()
        loop = QEventLoop()
        tab.runFinished.connect(lambda _result: loop.quit())
        QTimer.singleShot(RUN_LIMIT_MS, loop.quit)
        tab.run()
        loop.exec()
        for _ in range(5):
            app.processEvents()
        status = tab.status
        out.parent.mkdir(parents=True, exist_ok=True)
        tab.grab().save(str(out), "PNG")
        tab.close()
        tab.deleteLater()
    return status


def main(argv: list[str]) -> int:
    args = [a for a in argv if not a.startswith("--")]
    if len(args) != 1:
        print("usage: python -m nneditor.ui.python_tab.demo OUT.png [--dark]", file=sys.stderr)
        return 2
    status = render(Path(args[0]), dark="--dark" in argv)
    print(f"status: {status}; screenshot: {args[0]}")
    return 0 if status == "ok" else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
