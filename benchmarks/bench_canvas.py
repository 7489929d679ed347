#!/usr/bin/env python3
"""Canvas benchmark (offscreen Qt): open → first painted frame, and frame times while panning
and zooming through the operator level of the largest block.

    QT_QPA_PLATFORM=offscreen python benchmarks/bench_canvas.py [--json] [--skip-real]

Models: a generated ~100k-operator transformer (``synthetic_models.make_transformer``) and the
real PP-OCRv4 recognizer (fetched by ``tools/testdata.py``; skipped when unavailable).
Targets: first frame < 1 s after the index is built, p95 frame < 33 ms, <= ~2k scene items.
Frames are forced with ``viewport().repaint()`` and timed one by one.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks"), str(ROOT / "tools")]

from PySide6.QtCore import QEventLoop, QTimer  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from nneditor.ui import theme  # noqa: E402
from nneditor.ui.canvas.level import OPERATORS  # noqa: E402
from nneditor.ui.main_window import MainWindow  # noqa: E402

ZOOMS = (0.08, 0.2, 0.35, 0.6, 1.0)
FRAMES = 150


def wait_for(signal: Any, timeout_s: float = 600) -> None:
    loop = QEventLoop()
    signal.connect(loop.quit)
    QTimer.singleShot(int(timeout_s * 1000), loop.quit)
    loop.exec()
    signal.disconnect(loop.quit)


def settle(win: MainWindow) -> None:
    app = QApplication.instance()
    assert app is not None
    while win.runner.busy:
        app.processEvents(QEventLoop.ProcessEventsFlag.AllEvents, 20)
    app.processEvents()


def frame_times(win: MainWindow) -> list[float]:
    """Repaint the viewport after each pan/zoom step; returns milliseconds per frame."""
    view = win.workbench.view
    rect = win.workbench.scene.sceneRect()
    times = []
    for k in range(FRAMES):
        zoom = ZOOMS[(k // 10) % len(ZOOMS)]
        view.set_zoom(zoom)
        u = (k % 10) / 9
        # sweep along the top ranks (where the wide fan-out of the block lies) and down the spine
        view.centerOn(
            rect.left() + u * rect.width(), rect.top() + (k % 7) / 6 * min(rect.height(), 4000)
        )
        t0 = time.perf_counter()
        view.viewport().repaint()
        times.append((time.perf_counter() - t0) * 1000)
    return times


def run_one(win: MainWindow, path: Path, label: str) -> dict[str, Any]:
    app = QApplication.instance()
    assert app is not None
    t0 = time.perf_counter()
    win.open_path(str(path))
    wait_for(win.firstFrame)
    settle(win)
    t = win.timings
    s = win.session
    assert s is not None and win.index is not None
    out: dict[str, Any] = {
        "model": label,
        "operators": win.index.node_count,
        "open_to_index_s": round(t["index_ready"] - t0, 3),
        "index_to_first_frame_s": round(t["first_frame"] - t["index_ready"], 3),
        "architecture_items": win.workbench.scene.item_count,
    }
    blocks = [g for g in s.index.iter_groups() if g.kind == "block"]
    blocks = blocks or [g for g in s.index.iter_groups() if g.kind != "model"]
    largest = max(blocks, key=lambda g: g.node_count)
    t1 = time.perf_counter()
    s.open_group(largest)
    s.set_depth(OPERATORS)
    settle(win)
    app.processEvents()
    win.workbench.view.viewport().repaint()
    out["largest_block"] = largest.name
    out["block_operators"] = largest.node_count
    out["open_block_to_frame_s"] = round(time.perf_counter() - t1, 3)
    out["scene_items"] = win.workbench.scene.item_count
    out["level_items"] = len(s.level.items)
    times = frame_times(win)
    times.sort()
    out["frame_median_ms"] = round(statistics.median(times), 2)
    out["frame_p95_ms"] = round(times[int(0.95 * (len(times) - 1))], 2)
    out["frame_max_ms"] = round(times[-1], 2)
    win.close_model()
    return out


def synthetic(tmp: Path) -> Path:
    from synthetic_models import make_transformer

    path = tmp / "synthetic_100k.onnx"
    make_transformer(path, blocks=48, dim=64, ffn=128, heads=4, nodes_per_block=2080)
    return path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="print one JSON list")
    ap.add_argument("--skip-real", action="store_true", help="only the generated model")
    args = ap.parse_args()
    app = QApplication.instance() or QApplication([])
    theme.apply(app, dark=False)  # type: ignore[arg-type]
    win = MainWindow(interactive=False)
    win.resize(1400, 900)
    win.show()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        results.append(run_one(win, synthetic(Path(tmp)), "synthetic transformer (48 blocks)"))
        if not args.skip_real:
            try:
                import testdata

                real = testdata.ensure("ch_PP-OCRv4_rec_infer.onnx")
            except Exception as exc:  # offline: report and continue
                print(f"note: PP-OCRv4 recognizer unavailable ({exc})", file=sys.stderr)
            else:
                results.append(run_one(win, real, "PP-OCRv4 recognizer"))
    win.runner.shutdown()
    win.close()
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        for r in results:
            print(f"\n{r['model']}: {r['operators']:,} operators")
            for k, v in r.items():
                if k not in ("model", "operators"):
                    print(f"  {k:24s} {v}")
        print("\ntargets: index_to_first_frame_s < 1, frame_p95_ms < 33, scene_items <= ~2000")
    return 0


if __name__ == "__main__":
    sys.exit(main())
