"""What a feature of the window (the Trace page, the Traced model pane, screenshots) may use of
the window it plugs into. Features type against :class:`WindowHost`, never import
``MainWindow``: the window builds its features, so an import back would close a circle.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from PySide6.QtCore import QObject, SignalInstance
    from PySide6.QtGui import QPixmap
    from PySide6.QtWidgets import QLabel, QStackedWidget, QWidget

    from nneditor.ui.jobs import QtJobRunner
    from nneditor.ui.model_index import ModelIndex
    from nneditor.ui.top_bar import TopBar
    from nneditor.ui.workbench import Workbench


class WindowHost(Protocol):
    runner: QtJobRunner
    central: QStackedWidget
    top_bar: TopBar
    workbench: Workbench
    status_label: QLabel
    index: ModelIndex | None
    source_index: ModelIndex | None
    trace: Any  # the TraceFeature the window built
    edit: Any  # the EditController (``dirty``)
    _quit_confirmed: bool

    @property
    def documentOpened(self) -> SignalInstance: ...  # noqa: N802 - Qt signal name

    @property
    def documentClosed(self) -> SignalInstance: ...  # noqa: N802 - Qt signal name

    def installEventFilter(self, obj: QObject) -> None: ...  # noqa: N802 - Qt method

    def grab(self) -> QPixmap: ...

    def as_widget(self) -> QWidget:
        """The window itself, as the parent of the feature's objects and dialogs."""
        ...
