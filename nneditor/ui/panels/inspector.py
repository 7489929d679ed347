"""The inspector dock: the selected item's explanation, ports, attributes, weights, capabilities.

Invariants: it renders from the session's selection only (never keeps its own state); a click
on a weight emits ``tensorRequested(name)``; a click on a node/group/value link emits
``targetRequested(Target)`` and the owner decides how to navigate.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

from PySide6.QtCore import Qt, QUrl, Signal
from PySide6.QtWidgets import QTextBrowser, QWidget

from nneditor.ui import theme
from nneditor.ui.model_index import ModelIndex
from nneditor.ui.panels.inspector_html import style, target_html
from nneditor.ui.targets import Target


class Inspector(QTextBrowser):
    tensorRequested = Signal(str)
    targetRequested = Signal(object)
    actionRequested = Signal(str)  # a capability's action link, e.g. "export_weights"
    traceValueRequested = Signal(str)  # a captured value of the latest trace

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setOpenLinks(False)
        self.setOpenExternalLinks(False)
        self.anchorClicked.connect(self._on_anchor)
        self.index: ModelIndex | None = None
        self.setPlaceholderText("Open a model to inspect it.")
        self.document().setDocumentMargin(12)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)

    def set_index(self, index: ModelIndex | None) -> None:
        self.index = index
        if index is None:
            self.clear()
        else:
            self.show_target(None)

    def show_target(self, target: Target | None, extra: dict[str, Any] | None = None) -> None:
        if self.index is None:
            self.clear()
            return
        t = theme.current()
        body = target_html(self.index, target, extra)
        self.setHtml(style(t.dark, t.accent.name(), t.muted.name()) + body)

    def _on_anchor(self, url: QUrl) -> None:
        text = url.toString()
        scheme, _, rest = text.partition(":")
        if scheme == "tensor":
            self.tensorRequested.emit(unquote(rest))
        elif scheme == "action":
            self.actionRequested.emit(rest)
        elif scheme == "trace":
            self.traceValueRequested.emit(unquote(rest))
        elif scheme == "select":
            kind, _, ref = rest.partition(":")
            ref = unquote(ref)
            if kind == "node":
                self.targetRequested.emit(Target.node(int(ref)))
            elif kind == "group":
                self.targetRequested.emit(Target.group(ref))
            elif kind == "value":
                self.targetRequested.emit(Target.value(ref))
