"""Figures a script produced: a strip of thumbnails, a larger view, and "Save figure…".

Invariants:
- A figure's PNG bytes are read once into memory when it is shown, so the run folder can be
  deleted while the figure stays visible; "Save figure…" writes exactly those bytes.
- A file that is not a readable PNG becomes a labelled placeholder, never an exception.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QByteArray, QSize, Qt, Signal
from PySide6.QtGui import QContextMenuEvent, QCursor, QMouseEvent, QPixmap, QResizeEvent
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFrame,
    QHBoxLayout,
    QLabel,
    QMenu,
    QMessageBox,
    QScrollArea,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

THUMB_HEIGHT = 170
MIN_THUMB_HEIGHT, MAX_THUMB_HEIGHT = 90, 480
MAX_FIGURE_BYTES = 64 * 1024 * 1024


class Figure:
    """One figure: its name (``figure-1.png``), PNG bytes and decoded pixmap."""

    def __init__(self, name: str, data: bytes) -> None:
        self.name = name
        self.data = data
        self.pixmap = QPixmap()
        self.pixmap.loadFromData(QByteArray(data), "PNG")

    @classmethod
    def load(cls, path: Path) -> Figure:
        try:
            if path.stat().st_size > MAX_FIGURE_BYTES:
                return cls(path.name, b"")
            return cls(path.name, path.read_bytes())
        except OSError:
            return cls(path.name, b"")

    @property
    def valid(self) -> bool:
        return not self.pixmap.isNull()

    def save(self, target: Path) -> None:
        """Write the PNG bytes to ``target`` (raises OSError)."""
        target.write_bytes(self.data)


def ask_save_path(parent: QWidget, figure: Figure) -> Path | None:
    """Ask where to save a figure; None when cancelled."""
    start = str(Path.home() / figure.name)
    name, _ = QFileDialog.getSaveFileName(parent, "Save figure", start, "PNG image (*.png)")
    if not name:
        return None
    path = Path(name)
    return path if path.suffix else path.with_suffix(".png")


def save_with_dialog(parent: QWidget, figure: Figure) -> Path | None:
    """ "Save figure…": ask for a path, write the PNG; a failure is shown, not raised."""
    path = ask_save_path(parent, figure)
    if path is None:
        return None
    try:
        figure.save(path)
    except OSError as exc:
        QMessageBox.warning(
            parent, "Save figure", f"The figure could not be saved to {path}: {exc}."
        )
        return None
    return path


class FigureThumb(QLabel):
    """A clickable thumbnail: click opens the figure larger; the context menu saves it."""

    clicked = Signal()

    def __init__(self, figure: Figure, height: int = THUMB_HEIGHT, parent: QWidget | None = None):
        super().__init__(parent)
        self.figure = figure
        self.setObjectName("FigureThumb")
        self.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.setSizePolicy(QSizePolicy.Policy.Fixed, QSizePolicy.Policy.Fixed)
        if figure.valid:
            self.setCursor(QCursor(Qt.CursorShape.PointingHandCursor))
            self.setToolTip(f"{figure.name}: click to enlarge; right-click to save")
        else:
            self.setText(f"{figure.name}\n(not a readable PNG)")
        self.set_height(height)

    def set_height(self, height: int) -> None:
        """Scale the thumbnail to ``height`` pixels (keeping the figure's aspect ratio)."""
        if not self.figure.valid:
            self.setFixedSize(height * 4 // 3, height)
            return
        if self.pixmap().isNull() or self.pixmap().height() != height:
            mode = Qt.TransformationMode.SmoothTransformation
            self.setPixmap(self.figure.pixmap.scaledToHeight(height, mode))
            self.setFixedSize(self.pixmap().size() + QSize(4, 4))

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:  # noqa: N802 (Qt override)
        if event.button() == Qt.MouseButton.LeftButton and self.figure.valid:
            self.clicked.emit()
        super().mouseReleaseEvent(event)

    def contextMenuEvent(self, event: QContextMenuEvent) -> None:  # noqa: N802 (Qt override)
        self.menu().exec(event.globalPos())

    def menu(self) -> QMenu:
        menu = QMenu(self)
        menu.addAction("Open larger", self.clicked.emit).setEnabled(self.figure.valid)
        menu.addAction("Save figure…", lambda: save_with_dialog(self, self.figure))
        return menu


class FigureDialog(QDialog):
    """A figure at full size (scrollable) with "Save figure…"."""

    def __init__(self, figure: Figure, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.figure = figure
        self.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose, True)
        self.setWindowTitle(f"Figure — {figure.name}")
        layout = QVBoxLayout(self)
        image = QLabel(self)
        image.setPixmap(figure.pixmap)
        image.setAlignment(Qt.AlignmentFlag.AlignCenter)
        scroll = QScrollArea(self)
        scroll.setWidget(image)
        scroll.setWidgetResizable(True)
        layout.addWidget(scroll)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, self)
        self.save_button = buttons.addButton("Save figure…", QDialogButtonBox.ButtonRole.ActionRole)
        self.save_button.clicked.connect(lambda: save_with_dialog(self, self.figure))
        buttons.rejected.connect(self.reject)
        layout.addWidget(buttons)
        size = figure.pixmap.size()
        self.resize(min(size.width() + 40, 1200), min(size.height() + 90, 900))


class FigureStrip(QScrollArea):
    """A horizontal, scrollable row of figure thumbnails."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("FigureStrip")
        self.setWidgetResizable(True)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAsNeeded)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setFrameShape(QFrame.Shape.NoFrame)
        body = QWidget(self)
        self._row = QHBoxLayout(body)
        self._row.setContentsMargins(0, 4, 0, 4)
        self._row.setSpacing(8)
        self._row.addStretch(1)
        self.setWidget(body)
        self.thumbs: list[FigureThumb] = []
        self.setMinimumHeight(MIN_THUMB_HEIGHT + 28)

    def thumb_height(self) -> int:
        """Thumbnails fill the strip's height (within bounds), leaving room for a scroll bar."""
        room = self.viewport().height() - 8 - self.horizontalScrollBar().sizeHint().height()
        return max(MIN_THUMB_HEIGHT, min(MAX_THUMB_HEIGHT, room))

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 (Qt override)
        super().resizeEvent(event)
        height = self.thumb_height()
        for thumb in self.thumbs:
            thumb.set_height(height)

    def clear(self) -> None:
        for thumb in self.thumbs:
            self._row.removeWidget(thumb)
            thumb.deleteLater()
        self.thumbs = []

    def add(self, figure: Figure) -> FigureThumb:
        thumb = FigureThumb(figure, self.thumb_height(), parent=self.widget())
        thumb.clicked.connect(lambda: self.open(thumb.figure))
        self._row.insertWidget(len(self.thumbs), thumb)
        self.thumbs.append(thumb)
        return thumb

    def open(self, figure: Figure) -> FigureDialog:
        """Show a figure larger (non-modal); returns the dialog."""
        dialog = FigureDialog(figure, self.window())
        dialog.show()
        return dialog
