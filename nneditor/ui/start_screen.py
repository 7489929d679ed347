"""The start screen: Open model, Open folder, recent files, and drag-and-drop of a file or folder.

Invariants: it only emits ``openRequested(path)`` / ``openFileDialog`` / ``openFolderDialog``;
it never opens anything itself. Missing recent entries are shown disabled, not removed.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QDragEnterEvent, QDropEvent
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

FORMATS = "ONNX · safetensors · GGUF · PyTorch · Hugging Face snapshots · StableHLO"


def dropped_path(event: QDropEvent | QDragEnterEvent) -> str | None:
    """The first local file or folder of a drag, if any."""
    mime = event.mimeData()
    if not mime.hasUrls():
        return None
    for url in mime.urls():
        if url.isLocalFile():
            return url.toLocalFile()
    return None


class StartScreen(QWidget):
    openRequested = Signal(str)
    openFileDialog = Signal()
    openFolderDialog = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setAcceptDrops(True)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(24, 24, 24, 24)
        outer.addStretch(1)
        row = QHBoxLayout()
        row.addStretch(1)
        card = QFrame(self)
        card.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        card.setObjectName("Card")
        card.setMinimumWidth(380)
        card.setMaximumWidth(640)
        row.addWidget(card)
        row.addStretch(1)
        outer.addLayout(row)
        outer.addStretch(2)

        lay = QVBoxLayout(card)
        lay.setContentsMargins(32, 28, 32, 24)
        lay.setSpacing(10)
        title = QLabel("Open a model to begin", card)
        title.setStyleSheet("font-size: 20px; font-weight: 700;")
        lay.addWidget(title)
        sub = QLabel(
            f"{FORMATS}.<br>Formats are detected from the file contents. NNEditor reads lazily, "
            "never runs code stored in a model, and never modifies the file.",
            card,
        )
        sub.setObjectName("Muted")
        sub.setWordWrap(True)
        lay.addWidget(sub)
        lay.addSpacing(8)
        buttons = QHBoxLayout()
        buttons.setSpacing(10)
        self.open_button = QPushButton("Open model…", card)
        self.open_button.setObjectName("Primary")
        self.open_button.clicked.connect(self.openFileDialog)
        self.folder_button = QPushButton("Open folder…", card)
        self.folder_button.setObjectName("Secondary")
        self.folder_button.setToolTip("Hugging Face snapshots and Core ML .mlpackage bundles")
        self.folder_button.clicked.connect(self.openFolderDialog)
        buttons.addWidget(self.open_button)
        buttons.addWidget(self.folder_button)
        buttons.addStretch(1)
        drop = QLabel("or drop a file or folder here", card)
        drop.setObjectName("Muted")
        buttons.addWidget(drop)
        lay.addLayout(buttons)
        lay.addSpacing(14)
        recent_title = QLabel("Recent", card)
        recent_title.setStyleSheet("font-weight: 600;")
        lay.addWidget(recent_title)
        self.recents = QListWidget(card)
        self.recents.setObjectName("Recents")
        self.recents.setMinimumHeight(120)
        self.recents.itemActivated.connect(self._on_recent)
        self.recents.itemClicked.connect(self._on_recent)
        lay.addWidget(self.recents)
        self.no_recents = QLabel("Files you open appear here.", card)
        self.no_recents.setObjectName("Muted")
        lay.addWidget(self.no_recents)

    def set_recents(self, paths: list[str]) -> None:
        self.recents.clear()
        for p in paths:
            path = Path(p)
            item = QListWidgetItem(f"{path.name}    —    {path.parent}")
            item.setData(Qt.ItemDataRole.UserRole, p)
            item.setToolTip(p)
            if not path.exists():
                item.setFlags(Qt.ItemFlag.NoItemFlags)
                item.setToolTip(f"{p} (not found)")
            self.recents.addItem(item)
        self.recents.setVisible(bool(paths))
        self.no_recents.setVisible(not paths)

    def _on_recent(self, item: QListWidgetItem) -> None:
        path = item.data(Qt.ItemDataRole.UserRole)
        if path and item.flags() & Qt.ItemFlag.ItemIsEnabled:
            self.openRequested.emit(str(path))

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:  # noqa: N802 - Qt override
        if dropped_path(event):
            event.acceptProposedAction()

    def dropEvent(self, event: QDropEvent) -> None:  # noqa: N802 - Qt override
        path = dropped_path(event)
        if path:
            event.acceptProposedAction()
            self.openRequested.emit(path)
