"""The output pane (printed text, tracebacks, notes) and the one-line result summary.

Invariants:
- The output pane is read-only; each kind of text (stdout, stderr, error, note, result) has its
  own colour, so stderr and tracebacks stand out from printed output.
- Appending never moves the view away from what the user scrolled to, unless the view was
  already at the bottom (then it follows the new text).
- No paragraph of the pane grows beyond ``MAX_LINE_CHARS``: a longer printed line is broken
  there (Qt lays out one huge paragraph in quadratic time; a 1 MB line froze the GUI for a
  minute), so the pane shows such a line as several.
- The result line is one line: long reprs are cut to their first line and ``RESULT_LINE_CHARS``;
  the whole repr is in the output pane.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QFontDatabase, QTextCharFormat, QTextCursor
from PySide6.QtWidgets import QLabel, QPlainTextEdit, QSizePolicy, QWidget

from nneditor.scripting.results import ScriptResult
from nneditor.ui.python_tab.editor import is_dark

RESULT_LINE_CHARS = 160
MAX_LINE_CHARS = 2000
STDOUT, STDERR, ERROR, NOTE, RESULT = "stdout", "stderr", "error", "note", "result"

COLORS_LIGHT = {
    STDOUT: None,
    STDERR: "#b45309",
    ERROR: "#b91c1c",
    NOTE: "#5b6471",
    RESULT: "#1d4ed8",
}
COLORS_DARK = {
    STDOUT: None,
    STDERR: "#fbbf24",
    ERROR: "#f87171",
    NOTE: "#9aa3ad",
    RESULT: "#93c5fd",
}


class OutputView(QPlainTextEdit):
    """Read-only, colour-coded text output of a run."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("ScriptOutput")
        self.setReadOnly(True)
        self.setUndoRedoEnabled(False)
        font = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
        font.setPointSizeF(max(font.pointSizeF(), 9.5))
        self.setFont(font)
        self.setPlaceholderText("Printed output, the result and errors appear here.")
        self._formats: dict[str, QTextCharFormat] = {}
        self._build_formats()

    def _build_formats(self) -> None:
        colors = COLORS_DARK if is_dark(self) else COLORS_LIGHT
        for kind, color in colors.items():
            fmt = QTextCharFormat()
            if color is not None:
                fmt.setForeground(QColor(color))
            if kind == RESULT:
                fmt.setFontWeight(600)
            if kind == NOTE:
                fmt.setFontItalic(True)
            self._formats[kind] = fmt

    def append_text(self, kind: str, text: str) -> None:
        """Append ``text`` (no newline added) in the colour of ``kind``."""
        if not text:
            return
        bar = self.verticalScrollBar()
        follow = bar.value() >= bar.maximum() - 4
        cursor = QTextCursor(self.document())
        cursor.movePosition(QTextCursor.MoveOperation.End)
        text = break_long_lines(text, cursor.positionInBlock())
        cursor.insertText(text, self._formats.get(kind, self._formats[STDOUT]))
        if follow:
            bar.setValue(bar.maximum())

    def append_block(self, kind: str, text: str) -> None:
        """Append ``text`` as its own paragraph (starting on a new line)."""
        if not text:
            return
        current = self.toPlainText()
        if current and not current.endswith("\n"):
            self.append_text(STDOUT, "\n")
        self.append_text(kind, text if text.endswith("\n") else text + "\n")


def break_long_lines(text: str, column: int, limit: int = MAX_LINE_CHARS) -> str:
    """``text`` with a newline wherever a line (which starts at ``column``) passes ``limit``."""
    if column + len(text) <= limit:
        return text
    out: list[str] = []
    for i, line in enumerate(text.split("\n")):
        if i:
            out.append("\n")
            column = 0
        while column + len(line) > limit:
            room = limit - column
            out.extend((line[:room], "\n"))
            line, column = line[room:], 0
        out.append(line)
        column += len(line)
    return "".join(out)


def result_summary(result: ScriptResult) -> str:
    """The result line's text for a finished run ("" when there is nothing to show)."""
    if result.result_repr is None:
        if result.ok:
            return "No result: end the script with an expression or assign `result`."
        return ""
    kind = result.result_type or "value"
    if result.result_shape is not None:
        kind = f"{kind}, shape {tuple(result.result_shape)}"
        if result.result_dtype:
            kind += f", {result.result_dtype}"
    return f"Result ({kind}): {short_repr(result.result_repr)}"


def short_repr(text: str, limit: int = RESULT_LINE_CHARS) -> str:
    """The first line of a repr, cut to ``limit`` characters with an ellipsis."""
    lines = text.strip().splitlines() or [""]
    first = lines[0]
    cut = len(first) > limit or len(lines) > 1
    return (first[:limit].rstrip() + " …") if cut else first


class ResultLine(QLabel):
    """One selectable line that summarizes the run's result."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("ScriptResult")
        self.setTextFormat(Qt.TextFormat.PlainText)
        self.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Fixed)
        font = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
        self.setFont(font)
        accent = COLORS_DARK[RESULT] if is_dark(self) else COLORS_LIGHT[RESULT]
        self.setStyleSheet(
            f"QLabel#ScriptResult {{ color: {accent}; font-weight: 600; padding: 4px 8px;"
            f" border: 1px solid {accent}; border-radius: 5px; }}"
        )

    def show_result(self, result: ScriptResult | None) -> None:
        text = "" if result is None else result_summary(result)
        self.setText(text)
        self.setToolTip(result.result_repr or "" if result is not None else "")
        self.setVisible(bool(text))
