"""The top bar: application title, the open document, model actions and the device indicator.

Invariants: "Save changes…" is visible only while the document is dirty (``set_dirty``);
"Close model" is enabled only while a model is open; the device label sits at the right.
When the bar is too narrow for every label, the model actions take their short labels ("Open",
"Folder", ...) so that the view switcher keeps its whole names.
"""

from __future__ import annotations

from PySide6.QtCore import Signal, SignalInstance
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import QHBoxLayout, QLabel, QToolButton, QWidget

#: full label -> the label used when the bar is narrow
SHORT_LABELS = {
    "Open model": "Open",
    "Open folder": "Folder",
    "Close model": "Close",
    "Save changes…": "Save…",
    "Compare with…": "Compare…",
    "File types": "Types",
}


class TopBar(QWidget):
    openRequested = Signal()
    openFolderRequested = Signal()
    closeRequested = Signal()
    saveRequested = Signal()
    fileTypesRequested = Signal()
    compareRequested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("TopBar")
        layout = QHBoxLayout(self)
        layout.setContentsMargins(14, 8, 14, 8)
        layout.setSpacing(6)
        title = QLabel("NNEditor", self)
        title.setObjectName("AppTitle")
        layout.addWidget(title)
        layout.addSpacing(14)
        self.doc_title = QLabel("", self)
        self.doc_title.setObjectName("DocTitle")
        self.doc_chip = QLabel("", self)
        self.doc_chip.setObjectName("Chip")
        self.doc_chip.hide()
        layout.addWidget(self.doc_title)
        layout.addWidget(self.doc_chip)
        layout.addStretch(1)
        self.open_button = self._button(
            "Open model", "Open a model file (Ctrl+O)", self.openRequested
        )
        self.folder_button = self._button(
            "Open folder",
            "Open a Hugging Face snapshot or .mlpackage folder",
            self.openFolderRequested,
        )
        self.close_button = self._button(
            "Close model", "Close the model and return to the start screen", self.closeRequested
        )
        self.save_button = self._button(
            "Save changes…", "Export the current revision to a new file", self.saveRequested
        )
        self.compare_button = self._button(
            "Compare with…",
            "Compare the open model with another: operators and weight deltas",
            self.compareRequested,
        )
        self.types_button = self._button(
            "File types", "Register NNEditor for model file types", self.fileTypesRequested
        )
        self._actions = (
            self.open_button,
            self.folder_button,
            self.close_button,
            self.save_button,
            self.compare_button,
            self.types_button,
        )
        for b in self._actions:
            layout.addWidget(b)
        self.save_button.hide()
        self.close_button.setEnabled(False)
        self.compare_button.setEnabled(False)
        layout.addSpacing(10)
        self.device = QLabel("CPU", self)
        self.device.setObjectName("DeviceLabel")
        self.device.setToolTip("Execution device of the latest trace (no trace yet)")
        layout.addWidget(self.device)

    def _button(self, text: str, tip: str, signal: SignalInstance) -> QToolButton:
        b = QToolButton(self)
        b.setText(text)
        b.setProperty("fullText", text)
        b.setToolTip(tip)
        b.clicked.connect(signal)
        return b

    def set_document(self, name: str, fmt: str) -> None:
        self.doc_title.setText(name)
        self.doc_chip.setText(fmt)
        self.doc_chip.setVisible(bool(fmt))
        self.close_button.setEnabled(bool(name))
        self.compare_button.setEnabled(bool(name))
        self._fit()

    def set_dirty(self, dirty: bool) -> None:
        """The hook for revisions: Save changes… shows only for a dirty document."""
        self.save_button.setVisible(dirty)
        self._fit()

    def set_device(self, text: str) -> None:
        self.device.setText(text)
        self._fit()

    @property
    def compact(self) -> bool:
        return self.open_button.text() != self.open_button.property("fullText")

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 - Qt override
        super().resizeEvent(event)
        self._fit()

    def _fit(self) -> None:
        """Full labels when they fit the bar's width, short ones otherwise."""
        buttons = self._actions
        for b in buttons:
            b.setText(str(b.property("fullText")))
        layout = self.layout()
        assert layout is not None
        if layout.sizeHint().width() > self.width():
            for b in buttons:
                full = str(b.property("fullText"))
                b.setText(SHORT_LABELS.get(full, full))

    def add_view_switcher(self, widget: QWidget) -> None:
        """Place a view switcher (Model graph / Trace / Traced model) after the document."""
        layout = self.layout()
        assert isinstance(layout, QHBoxLayout)
        layout.insertWidget(layout.indexOf(self.doc_chip) + 1, widget)
        self.doc_title.setMinimumWidth(60)  # a long file name may clip rather than widen
