"""The script editor: a monospace plain-text editor with Python-friendly indentation.

Invariants:
- Tab inserts spaces up to the next multiple of four (never a tab character); with a
  multi-line selection Tab indents and Shift+Tab dedents every selected line by four spaces.
- Return keeps the current line's indentation (one level more after a trailing ``:``).
- Ctrl+Return / Ctrl+Enter never inserts a newline: it emits :attr:`ScriptEditor.runRequested`.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QEvent, Qt, Signal
from PySide6.QtGui import (
    QColor,
    QFontDatabase,
    QKeyEvent,
    QPalette,
    QTextCursor,
    QTextFormat,
)
from PySide6.QtWidgets import QPlainTextEdit, QTextEdit, QWidget

from nneditor.ui.python_tab.highlighter import PythonHighlighter

INDENT = 4
RUN_KEYS = (Qt.Key.Key_Return, Qt.Key.Key_Enter)


def is_dark(widget: QWidget) -> bool:
    """True when the widget's base colour is dark (the dark theme)."""
    return widget.palette().color(QPalette.ColorRole.Base).lightness() < 128


class ScriptEditor(QPlainTextEdit):
    """Plain-text Python editor; ``runRequested`` fires on Ctrl+Return."""

    runRequested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        font = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
        font.setPointSizeF(max(font.pointSizeF(), 10.0))
        self.setFont(font)
        self.setTabStopDistance(self.fontMetrics().horizontalAdvance(" ") * INDENT)
        self.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.setTabChangesFocus(False)
        self.setPlaceholderText("Python script: tensor, metadata, np, scipy, plt … are preloaded")
        self.highlighter = PythonHighlighter(self.document(), dark=is_dark(self))

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802 (Qt override)
        super().changeEvent(event)
        highlighter = getattr(self, "highlighter", None)  # None while __init__ runs
        if event.type() == QEvent.Type.PaletteChange and highlighter is not None:
            highlighter.set_dark(is_dark(self))

    def keyPressEvent(self, event: QKeyEvent) -> None:  # noqa: N802 (Qt override)
        key, mods = event.key(), event.modifiers()
        if key in RUN_KEYS and mods & Qt.KeyboardModifier.ControlModifier:
            self.runRequested.emit()
            event.accept()
        elif key == Qt.Key.Key_Tab and not mods & ~Qt.KeyboardModifier.KeypadModifier:
            self.indent()
        elif key == Qt.Key.Key_Backtab:
            self.dedent()
        elif key in RUN_KEYS and not mods & ~Qt.KeyboardModifier.KeypadModifier:
            self._newline()
        else:
            super().keyPressEvent(event)

    def indent(self) -> None:
        """Tab: spaces to the next indent stop, or indent every line of a multi-line selection."""
        cursor = self.textCursor()
        if not self._spans_lines(cursor):
            column = cursor.positionInBlock()
            cursor.insertText(" " * (INDENT - column % INDENT))
            return
        self._for_selected_lines(cursor, lambda line: line.insertText(" " * INDENT))

    def dedent(self) -> None:
        """Shift+Tab: remove up to four leading spaces from each line touched by the cursor."""

        def strip(line: QTextCursor) -> None:
            text = line.block().text()
            count = len(text) - len(text.lstrip(" "))
            for _ in range(min(INDENT, count)):
                line.deleteChar()

        self._for_selected_lines(self.textCursor(), strip)

    def _newline(self) -> None:
        cursor = self.textCursor()
        text = cursor.block().text()[: cursor.positionInBlock()]
        indent = text[: len(text) - len(text.lstrip(" "))]
        if text.rstrip().endswith(":"):
            indent += " " * INDENT
        cursor.insertText("\n" + indent)
        self.ensureCursorVisible()

    @staticmethod
    def _spans_lines(cursor: QTextCursor) -> bool:
        if not cursor.hasSelection():
            return False
        doc = cursor.document()
        first = doc.findBlock(cursor.selectionStart()).blockNumber()
        return doc.findBlock(cursor.selectionEnd()).blockNumber() != first

    def _for_selected_lines(self, cursor: QTextCursor, edit: Callable[[QTextCursor], None]) -> None:
        doc = self.document()
        first = doc.findBlock(cursor.selectionStart())
        last = doc.findBlock(cursor.selectionEnd())
        if cursor.hasSelection() and cursor.selectionEnd() == last.position() and last != first:
            last = last.previous()  # a selection ending at a line start leaves that line alone
        cursor.beginEditBlock()
        block = first
        while block.isValid():
            line = QTextCursor(block)
            edit(line)
            if block == last:
                break
            block = block.next()
        cursor.endEditBlock()

    def mark_line(self, line: int | None) -> None:
        """Highlight a 1-based line (the one an error points at), or clear it with None."""
        if line is None or not 1 <= line <= self.blockCount():
            self.setExtraSelections([])
            return
        selection = QTextEdit.ExtraSelection()
        color = QColor("#7f1d1d") if is_dark(self) else QColor("#fde2e2")
        selection.format.setBackground(color)  # type: ignore[attr-defined]
        selection.format.setProperty(QTextFormat.Property.FullWidthSelection, True)  # type: ignore[attr-defined]
        selection.cursor = QTextCursor(self.document().findBlockByNumber(line - 1))  # type: ignore[attr-defined]
        self.setExtraSelections([selection])
