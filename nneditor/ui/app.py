"""Desktop entry point: ``nneditor [PATH] [--screenshot FILE.png] [--level L] [--select NAME] [--size WxH]``.

Invariants:
- ``run_app`` returns the process exit code: 0 on success, 2 on a user error (printed as one
  ``nneditor: <sentence>`` line), never a traceback.
- With ``--screenshot`` the window opens offscreen-capable, waits for the open job, the first
  painted frame and any level/selection change, saves a PNG of the window and exits; it never
  shows a modal dialog (errors go to stderr) and gives up after ``SCREENSHOT_TIMEOUT_S``.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence

from PySide6.QtCore import QTimer, QtMsgType, qInstallMessageHandler
from PySide6.QtWidgets import QApplication

from nneditor.io.scratch import sweep_temp
from nneditor.ui import single_instance, theme
from nneditor.ui.canvas.level import DEPTH_BY_NAME
from nneditor.ui.main_window import MainWindow
from nneditor.ui.model_index import ModelIndex
from nneditor.ui.targets import Target
from nneditor.ui.trace import screenshot as trace_shot

SCREENSHOT_TIMEOUT_S = 180
EXIT_USAGE = 2


class UsageError(Exception):
    pass


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="nneditor", description="Open the NNEditor desktop window.")
    p.add_argument("path", nargs="?", help="a model file or folder to open")
    p.add_argument("--screenshot", metavar="FILE.png", help="save a PNG of the window and exit")
    p.add_argument(
        "--level",
        choices=sorted(DEPTH_BY_NAME, key=DEPTH_BY_NAME.__getitem__),
        help="detail level to show",
    )
    p.add_argument("--select", metavar="NAME", help="select a node, group or value by name")
    p.add_argument(
        "--open-trace",
        metavar="DIR",
        help="show a trace folder written by `nneditor trace` in the Traced model pane "
        "(with --select VALUE: open that value's tensor overlay)",
    )
    p.add_argument(
        "--size", default="1400x900", metavar="WxH", help="window size (default 1400x900)"
    )
    p.add_argument("--dark", action="store_true", help="use the dark theme")
    p.add_argument("--light", action="store_true", help="use the light theme")
    return p.parse_args(list(argv))


def parse_size(text: str) -> tuple[int, int]:
    try:
        w, h = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise UsageError(f"--size must look like 1400x900, got {text!r}") from None
    if not (200 <= w <= 10000 and 200 <= h <= 10000):
        raise UsageError(f"--size must be between 200x200 and 10000x10000, got {text!r}")
    return w, h


def resolve_name(index: ModelIndex, name: str) -> Target | None:
    """A group (name or id), operator (name), or value/tensor name; else the first search match."""
    for g in index.iter_groups():
        if g.kind != "model" and (g.name == name or g.id == name):
            return Target.group(g.id)
    if index.graph is not None:
        for i, node in enumerate(index.graph.nodes):
            if node.name == name:
                return Target.node(i)
    if name in index.producer or name in index.graph_inputs or name in index.doc.tensors:
        return Target.value(name)
    from nneditor.ui.panels.search import SearchIndex

    found = SearchIndex(index).find(name)
    return found[0] if found else None


#: what Qt's offscreen platform prints on every window, which says nothing to a user
_QT_NOISE = ("This plugin does not support propagateSizeHints()",)


def _qt_message(kind: QtMsgType, _context: object, message: str) -> None:
    """Qt's own messages: platform noise dropped, everything else kept on stderr."""
    if kind in (QtMsgType.QtDebugMsg, QtMsgType.QtInfoMsg) or message.startswith(_QT_NOISE):
        return
    print(f"Qt: {message}", file=sys.stderr)


def _display_available() -> bool:
    """False on Linux/BSD without X11/Wayland (and no explicit Qt platform): Qt would abort."""
    if QApplication.instance() is not None or os.environ.get("QT_QPA_PLATFORM"):
        return True
    if sys.platform.startswith(("linux", "freebsd")):
        return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))
    return True


def run_app(argv: Sequence[str]) -> int:
    try:
        args = parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    try:
        size = parse_size(args.size)
    except UsageError as exc:
        print(f"nneditor: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.screenshot and not args.path:
        print("nneditor: --screenshot needs a model PATH to open", file=sys.stderr)
        return EXIT_USAGE
    for what, value in (("", args.path), ("--open-trace ", args.open_trace)):
        if value and not os.path.exists(value):
            print(
                f"nneditor: {what}{value}: no such file or folder; check the path", file=sys.stderr
            )
            return EXIT_USAGE
    single = not args.screenshot and not args.open_trace and single_instance.enabled()
    if single and args.path and single_instance.forward(args.path):
        print(f"nneditor: opened {args.path} in the running window")
        return 0
    if not _display_available():
        if not args.screenshot:
            print(
                "nneditor: no display found (DISPLAY/WAYLAND_DISPLAY unset); the window needs a "
                "desktop session — use --screenshot FILE.png to render offscreen, or the "
                "headless commands (nneditor inspect PATH)",
                file=sys.stderr,
            )
            return EXIT_USAGE
        os.environ["QT_QPA_PLATFORM"] = "offscreen"
    sweep_temp()  # scratch folders of NNEditor processes that were killed
    qInstallMessageHandler(_qt_message)
    existing = QApplication.instance()
    app = (
        existing
        if isinstance(existing, QApplication)
        else QApplication(sys.argv[:1] or ["nneditor"])
    )
    app.setApplicationName("NNEditor")
    _set_icon(app)
    app.setOrganizationName("NNEditor")
    forced = True if args.dark else (False if args.light else None)
    theme.apply(app, dark=forced)
    window = MainWindow(interactive=not args.screenshot)
    if forced is None:
        app.styleHints().colorSchemeChanged.connect(lambda _s: _follow_scheme(app, window))
    window.resize(*size)
    window.show()
    if single:
        window.instance_server = single_instance.InstanceServer(window)
    if args.screenshot:
        return _screenshot(app, window, args)
    if args.path:
        if args.open_trace:
            _open_trace_when_ready(window, args.open_trace, args.select)
        window.open_path(args.path)
    code = app.exec()
    window.runner.shutdown()
    return int(code)


def _follow_scheme(app: QApplication, window: MainWindow) -> None:
    """The system switched between light and dark: restyle and repaint everything."""
    theme.apply(app)
    window.workbench.scene.setBackgroundBrush(theme.current().canvas)
    window.workbench.scene.update()
    window.workbench.minimap.rebuild()
    if window.session is not None:
        window.inspector.show_target(window.session.selection)


def _open_trace_when_ready(window: MainWindow, folder: str, select: str | None) -> None:
    def go() -> None:
        window.documentOpened.disconnect(go)
        problem = trace_shot.open_trace(window, folder, select)
        if problem:
            window.report_error("Cannot open this trace", problem)

    window.documentOpened.connect(go)


def _screenshot(app: QApplication, window: MainWindow, args: argparse.Namespace) -> int:
    outcome = {"code": EXIT_USAGE}

    def fail(message: str) -> None:
        print(f"nneditor: {message}", file=sys.stderr)
        outcome["code"] = EXIT_USAGE
        app.exit(EXIT_USAGE)

    def settle_then(action: Callable[[], None]) -> None:
        def poll() -> None:
            if window.runner.busy:
                QTimer.singleShot(40, poll)
                return
            QTimer.singleShot(120, action)

        poll()

    def capture() -> None:
        app.processEvents()
        shot = trace_shot.grab(window) if args.open_trace else window.grab()
        if not shot.save(args.screenshot):
            fail(f"could not write the screenshot to {args.screenshot}")
            return
        outcome["code"] = 0
        app.exit(0)

    def adjust() -> None:
        if args.open_trace:
            problem = trace_shot.open_trace(window, args.open_trace, args.select)
            if problem:
                fail(problem)
                return
            settle_then(capture)
            return
        s = window.session
        if s is None:
            if args.level or args.select:
                fail("this artifact has no graph, so --level and --select do not apply")
                return
            settle_then(capture)
            return
        depth = DEPTH_BY_NAME[args.level] if args.level else None
        target = None
        if args.select:
            assert window.index is not None
            target = resolve_name(window.index, args.select)
            if target is None:
                fail(f"nothing named {args.select!r} in this model")
                return
        group = (
            s.index.group_by_id.get(str(target.ref)) if target and target.kind == "group" else None
        )
        if group is not None and depth is not None and depth > group.level:
            s.open_group(group)  # "--select BLOCK --level layers": show the block opened
            s.set_depth(depth)
            s.select(target)
        else:
            if depth is not None:
                s.set_depth(depth)
            if target is not None:
                s.select(target, reveal=True)
        settle_then(capture)

    window.firstFrame.connect(lambda _d: settle_then(adjust))
    window.openFailed.connect(fail)
    window.viewFailed.connect(fail)
    QTimer.singleShot(SCREENSHOT_TIMEOUT_S * 1000, lambda: fail("timed out waiting for the window"))
    window.open_path(args.path)
    app.exec()
    window.runner.shutdown()
    window.close()
    return outcome["code"]


def _set_icon(app: QApplication) -> None:
    """The app and window icon from resources/ (a missing file leaves Qt's default)."""
    from PySide6.QtGui import QIcon

    from nneditor.platform.resources import icon_path

    icon = icon_path()
    if icon.is_file():
        app.setWindowIcon(QIcon(str(icon)))
