"""The top bar's "File types": the extensions NNEditor opens, and per-user registration
through nneditor/platform/file_types.py (Linux desktop entry + MIME types, Windows ProgID and
Open with entries followed by Default apps; macOS through the app bundle)."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtWidgets import (
    QDialog,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from nneditor.platform import file_types
from nneditor.platform.resources import icon_path


class FileTypesDialog(QDialog):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("File types")
        intro = QLabel(
            "Register NNEditor for these model files, for your user only. On Windows you then "
            "choose NNEditor in Default apps (a protected default is never replaced); on Linux "
            "a desktop entry and MIME types (with content checks for GGUF and safetensors) are "
            "written to your data folder.",
            self,
        )
        intro.setWordWrap(True)
        table = QTableWidget(len(file_types.FILE_TYPES), 3, self)
        table.setHorizontalHeaderLabels(["Extension", "Kind", "MIME type"])
        for r, t in enumerate(file_types.FILE_TYPES):
            for col, text in enumerate((t.extension, t.description, t.mime)):
                table.setItem(r, col, QTableWidgetItem(text))
        table.resizeColumnsToContents()
        table.verticalHeader().hide()
        self.table = table
        self.status = QPlainTextEdit(self)
        self.status.setReadOnly(True)
        self.status.setMaximumHeight(96)
        self.status.setPlaceholderText("Nothing changed yet.")
        self.register_button = QPushButton("Register for this user", self)
        self.register_button.clicked.connect(self.register)
        self.remove_button = QPushButton("Remove registration", self)
        self.remove_button.clicked.connect(self.unregister)
        close = QPushButton("Close", self)
        close.clicked.connect(self.accept)
        row = QHBoxLayout()
        row.addWidget(self.register_button)
        row.addWidget(self.remove_button)
        row.addStretch(1)
        row.addWidget(close)
        lay = QVBoxLayout(self)
        lay.addWidget(intro)
        lay.addWidget(table, 1)
        lay.addWidget(self.status)
        lay.addLayout(row)
        self.resize(640, 480)

    def register(self) -> list[str]:
        return self._report(lambda: file_types.register(icon_path()))

    def unregister(self) -> list[str]:
        return self._report(file_types.unregister)

    def _report(self, action: Callable[[], list[str]]) -> list[str]:
        try:
            done = action()
        except OSError as exc:
            done = [f"could not change the registration: {exc}"]
        self.status.setPlainText("\n".join(done))
        return list(done)
