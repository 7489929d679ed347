#!/usr/bin/env python3
"""Editing benchmark (offscreen Qt): a ~50k-operator model edited in the desktop window.

    QT_QPA_PLATFORM=offscreen python benchmarks/bench_edit_view.py [--json] [--blocks N]

Measures, from the user's side: open → edit session ready (SHA-256 + journal, background),
Preview of a rename (onnx.checker + strict shape inference on the weight-free skeleton),
Commit → the canvas showing the revision (revision Graph + hierarchy + index, background),
Undo → the source view, Redo → the revision view again, and Save changes… (validated export).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

from PySide6.QtCore import QEventLoop  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from nneditor.ui import theme  # noqa: E402
from nneditor.ui.main_window import MainWindow  # noqa: E402
from nneditor.ui.targets import Target  # noqa: E402


def wait(cond: Any, timeout_s: float = 600) -> float:
    app = QApplication.instance()
    assert app is not None
    t0 = time.perf_counter()
    while not cond():
        if time.perf_counter() - t0 > timeout_s:
            raise TimeoutError("the window did not reach the expected state")
        app.processEvents(QEventLoop.ProcessEventsFlag.AllEvents, 10)
    return round(time.perf_counter() - t0, 3)


def run(path: Path, out_dir: Path) -> dict[str, Any]:
    win = MainWindow(interactive=False)
    win.resize(1400, 900)
    win.show()
    t0 = time.perf_counter()
    win.open_path(str(path))
    wait(lambda: win.session is not None)
    res: dict[str, Any] = {"operators": win.index.node_count if win.index else 0}
    res["open_s"] = round(time.perf_counter() - t0, 3)
    res["session_ready_after_open_s"] = wait(lambda: win.edit.session is not None)
    panel = win.edit_panel
    win.left_tabs.setCurrentWidget(panel)  # as when editing: completers follow each revision
    i = win.index.node_count // 2 if win.index else 0
    win.session.select(Target.node(i), reveal=True)  # type: ignore[union-attr]
    form = panel.choose("Rename node")
    form.new.setText("renamed_by_benchmark")
    panel.preview()
    res["preview_s"] = wait(lambda: panel._pending is None)
    assert panel.commit_button.isEnabled(), panel.result_view.toPlainText()
    source = win.index
    t1 = time.perf_counter()
    panel.commit()
    res["commit_s"] = round(time.perf_counter() - t1, 3)
    wait(lambda: win.index is not source)
    res["commit_to_revision_view_s"] = round(time.perf_counter() - t1, 3)
    revision = win.index
    t1 = time.perf_counter()
    win.edit.undo()
    wait(lambda: win.index is source)
    res["undo_to_view_s"] = round(time.perf_counter() - t1, 3)
    t1 = time.perf_counter()
    win.edit.redo()
    wait(lambda: win.index is not source and win.index is not revision)
    res["redo_to_view_s"] = round(time.perf_counter() - t1, 3)
    dest = out_dir / "edited.onnx"
    session = win.edit.session
    assert session is not None
    t1 = time.perf_counter()
    report = session.export(dest)
    res["export_s"] = round(time.perf_counter() - t1, 3)
    res["export_checks"] = report.checks
    win.edit.interactive = False
    win.close()
    return res


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--blocks", type=int, default=200)
    args = ap.parse_args()
    app = QApplication.instance() or QApplication([])
    theme.apply(app, dark=False)  # type: ignore[arg-type]
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["NNEDITOR_HOME"] = str(Path(tmp) / "home")
        from synthetic_models import make_transformer

        path = Path(tmp) / "synthetic_50k.onnx"
        make_transformer(path, blocks=args.blocks, dim=64, ffn=128, heads=4, nodes_per_block=250)
        res = run(path, Path(tmp))
    print(json.dumps(res, indent=None if args.json else 2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
