"""A small Python syntax highlighter for the script editor.

It colours keywords, builtins, the names the Python tab preloads, strings (triple-quoted ones
across lines), comments, numbers and decorators. Each line is scanned once, left to right, by
one regular expression, so a ``#`` inside a string is not a comment and a quote inside a
comment does not open a string.

Invariants:
- Block state ``-1``/``0`` means a line ends outside a string; ``1`` inside ``'''`` and ``2``
  inside a triple double-quoted string, so a multi-line string continues on the next block.
- Formats are built once per highlighter (light or dark palette), never per line.
"""

from __future__ import annotations

import builtins
import keyword
import re

from PySide6.QtGui import QColor, QFont, QSyntaxHighlighter, QTextCharFormat, QTextDocument

KEYWORDS = frozenset(keyword.kwlist) | frozenset(keyword.softkwlist) - {"_"}
BUILTINS = frozenset(n for n in dir(builtins) if not n.startswith("_")) - KEYWORDS
PRELOADED = frozenset(
    {"tensor", "metadata", "np", "math", "scipy", "sklearn", "scikit", "matplotlib", "plt"}
)

TOKEN = re.compile(
    r"""
    (?P<comment>\#.*)
  | (?P<triple>(?<![\w])[rRbBuUfF]{0,2}(?:'''|\"\"\"))
  | (?P<string>(?<![\w])[rRbBuUfF]{0,2}(?:'(?:[^'\\\n]|\\.)*'?|"(?:[^"\\\n]|\\.)*"?))
  | (?P<number>\b(?:0[xX][0-9a-fA-F_]+|0[bB][01_]+|0[oO][0-7_]+
        |(?:\d[\d_]*\.?[\d_]*|\.\d[\d_]*)(?:[eE][+-]?\d+)?j?)\b)
  | (?P<decorator>^\s*@[\w.]+)
  | (?P<word>[A-Za-z_]\w*)
    """,
    re.VERBOSE,
)

OUTSIDE, IN_SINGLE, IN_DOUBLE = 0, 1, 2
DELIMITERS = {IN_SINGLE: "'''", IN_DOUBLE: '"""'}

LIGHT = {
    "keyword": ("#a626a4", True),
    "builtin": ("#0e7490", False),
    "preloaded": ("#1d4ed8", True),
    "string": ("#50a14f", False),
    "comment": ("#8a94a3", False),
    "number": ("#c2410c", False),
    "decorator": ("#b45309", False),
    "definition": ("#1d4ed8", False),
}
DARK = {
    "keyword": ("#c678dd", True),
    "builtin": ("#56b6c2", False),
    "preloaded": ("#61afef", True),
    "string": ("#98c379", False),
    "comment": ("#7f8896", False),
    "number": ("#d19a66", False),
    "decorator": ("#e5c07b", False),
    "definition": ("#61afef", False),
}


def _format(color: str, bold: bool, italic: bool = False) -> QTextCharFormat:
    fmt = QTextCharFormat()
    fmt.setForeground(QColor(color))
    if bold:
        fmt.setFontWeight(QFont.Weight.DemiBold)
    fmt.setFontItalic(italic)
    return fmt


class PythonHighlighter(QSyntaxHighlighter):
    """Highlights Python in a :class:`QTextDocument`."""

    def __init__(self, document: QTextDocument, dark: bool = False) -> None:
        super().__init__(document)
        self.formats: dict[str, QTextCharFormat] = {}
        self.set_dark(dark)

    def set_dark(self, dark: bool) -> None:
        """Switch between the light and dark colour sets and re-highlight."""
        scheme = DARK if dark else LIGHT
        self.formats = {
            name: _format(color, bold, italic=name == "comment")
            for name, (color, bold) in scheme.items()
        }
        self.rehighlight()

    def highlightBlock(self, text: str) -> None:  # noqa: N802 (Qt override)
        state = self.previousBlockState()
        pos = 0
        if state in DELIMITERS:
            pos = self._continue_string(text, 0, DELIMITERS[state], state)
            if pos < 0:
                return
        self.setCurrentBlockState(OUTSIDE)
        previous_word = ""
        while pos < len(text):
            match = TOKEN.search(text, pos)
            if match is None:
                return
            kind = match.lastgroup or ""
            start, end = match.span()
            if kind == "triple":
                delimiter = match.group()[-3:]
                opened = IN_SINGLE if delimiter == "'''" else IN_DOUBLE
                pos = self._continue_string(text, start, delimiter, opened, skip=end - start)
                if pos < 0:
                    return
                continue
            if kind == "word":
                self._word(match.group(), start, previous_word)
                previous_word = match.group()
            elif kind in self.formats:
                self.setFormat(start, end - start, self.formats[kind])
            pos = max(end, pos + 1)

    def _word(self, word: str, start: int, previous: str) -> None:
        if word in KEYWORDS:
            kind = "keyword"
        elif previous in ("def", "class"):
            kind = "definition"
        elif word in PRELOADED:
            kind = "preloaded"
        elif word in BUILTINS:
            kind = "builtin"
        else:
            return
        self.setFormat(start, len(word), self.formats[kind])

    def _continue_string(
        self, text: str, start: int, delimiter: str, state: int, skip: int = 0
    ) -> int:
        """Colour a triple-quoted string from ``start``; returns where scanning resumes or -1."""
        close = _find_closing(text, start + skip, delimiter)
        if close < 0:
            self.setFormat(start, len(text) - start, self.formats["string"])
            self.setCurrentBlockState(state)
            return -1
        end = close + len(delimiter)
        self.setFormat(start, end - start, self.formats["string"])
        return end


def _find_closing(text: str, pos: int, delimiter: str) -> int:
    """Index of the unescaped ``delimiter`` at or after ``pos``, or -1."""
    while True:
        found = text.find(delimiter, pos)
        if found < 0:
            return -1
        backslashes = len(text[:found]) - len(text[:found].rstrip("\\"))
        if backslashes % 2 == 0:
            return found
        pos = found + 1
