"""``nneditor PATH --open-trace DIR [--select VALUE] [--screenshot FILE.png]`` support.

Invariants: the trace folder is read with :func:`~nneditor.ui.trace.store.load_run` (a bad
folder is a sentence, never a traceback); with ``--select`` the value is revealed in the
Traced model pane and its overlay is opened; the screenshot is the window with the overlay
drawn centred over it, as a user sees the dialog.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import QPoint
from PySide6.QtGui import QColor, QPainter, QPixmap

from nneditor.errors import NNEditorError
from nneditor.ui.targets import Target

if TYPE_CHECKING:
    from nneditor.ui.host import WindowHost


def open_trace(window: WindowHost, folder: str, select: str | None = None) -> str | None:
    """Show ``folder``'s trace (and ``select``'s overlay); returns an error sentence or None."""
    feature = window.trace
    try:
        run = feature.open_trace_folder(folder)
    except NNEditorError as exc:
        return str(exc)
    if not select:
        return None
    if run.record(select) is None:
        return f"the trace in {folder} has no value named {select!r}"
    session = feature.traced.session
    if session is not None:
        session.select(Target.value(select), reveal=True)
    if feature.open_overlay(select) is None:
        return f"the captured value {select!r} cannot be shown"
    return None


def grab(window: WindowHost) -> QPixmap:
    """The window, with the newest tensor overlay (if any) drawn centred over it."""
    shot = window.grab()
    overlays = window.trace.overlays
    if not overlays:
        return shot
    top = overlays[-1]
    w = min(top.width(), shot.width() - 80)
    h = min(top.height(), shot.height() - 80)
    top.resize(w, h)
    pix = top.grab()
    painter = QPainter(shot)
    painter.fillRect(shot.rect(), _shade(70))
    at = QPoint((shot.width() - pix.width()) // 2, (shot.height() - pix.height()) // 2)
    painter.drawPixmap(at, pix)
    painter.setPen(_shade(160))
    painter.drawRect(at.x() - 1, at.y() - 1, pix.width() + 1, pix.height() + 1)
    painter.end()
    return shot


def _shade(alpha: int) -> QColor:
    return QColor(0, 0, 0, alpha)
