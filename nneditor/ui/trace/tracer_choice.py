"""The Trace panel's tracer choice: NNEditor's built-in tracers or a tracer plugin.

Every discovered plugin is listed; the ones that cannot run the open model (artifact kind,
architecture, device, a missing dependency) or are disabled (malformed manifest, duplicate
id) are listed greyed out with the reason, before anything runs. "Install a tracer folder…"
validates and copies a folder (never importing it); "Reload tracer extensions" discovers
again, e.g. after editing a plugin under development.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QStandardItemModel
from PySide6.QtWidgets import (
    QComboBox,
    QFileDialog,
    QGridLayout,
    QLabel,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from nneditor.tracing.plugins.discovery import PluginRecord, discover
from nneditor.tracing.plugins.manifest import PluginError

BUILTIN = ""


#: artifact kinds as the note names them
_KIND_TEXT = {
    "onnx_model": "ONNX model",
    "gguf_model": "GGUF file",
    "huggingface_model": "Hugging Face snapshot",
    "safetensors_model": "safetensors file",
    "pytorch_model": "PyTorch checkpoint",
    "stablehlo_model": "StableHLO module",
}


class TracerChoice(QWidget):
    changed = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.doc: Any = None
        self.device = "auto"
        self.records: list[PluginRecord] = []
        self.reasons: dict[str, str] = {}
        self.combo = QComboBox(self)
        # plugin labels are long: size to a short text (the list itself shows them whole), so
        # the Trace panel fits its column without a horizontal scroll bar
        self.combo.setSizeAdjustPolicy(
            QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon
        )
        self.combo.setMinimumContentsLength(24)
        self.combo.currentIndexChanged.connect(lambda _i: self.changed.emit())
        self.install_button = QPushButton("Install a tracer folder…", self)
        self.install_button.clicked.connect(self._ask_install)
        self.reload_button = QPushButton("Reload tracer extensions", self)
        self.reload_button.clicked.connect(self.reload)
        self.note = QLabel("", self)
        self.note.setWordWrap(True)
        self.note.setObjectName("Muted")
        self.note.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        buttons = QGridLayout()  # one above the other: the Trace panel's column is narrow
        buttons.setContentsMargins(0, 0, 0, 0)
        buttons.addWidget(self.install_button, 0, 0)
        buttons.addWidget(self.reload_button, 1, 0)
        buttons.setColumnStretch(1, 1)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.combo)
        lay.addLayout(buttons)
        lay.addWidget(self.note)
        self._discovered = False  # discovery hashes plugin files: not at window start-up
        self.combo.addItem("NNEditor's built-in tracers", BUILTIN)

    def selected(self) -> str:
        """The chosen plugin id, or "" for NNEditor's built-in tracers."""
        return str(self.combo.currentData() or BUILTIN)

    def set_context(self, doc: Any, device: str) -> None:
        self.doc, self.device = doc, device
        if self._discovered:
            self._fill()
        else:
            self.reload()

    def reload(self) -> None:
        self.records = discover()
        self._discovered = True
        self._fill()

    def install_folder(self, folder: Path) -> str:
        """Install ``folder`` (validated, copied, never imported); returns the sentence shown."""
        from nneditor.tracing.plugins.install import install

        try:
            manifest, dest = install(folder)
        except PluginError as exc:
            text = f"Not installed: {exc}"
        else:
            text = f"Installed tracer {manifest.id} {manifest.version} into {dest}."
            self.reload()
        self.note.setText(text + ("\n" + self.note.text() if self.note.text() else ""))
        return text

    def _ask_install(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Install a tracer folder")
        if folder:
            self.install_folder(Path(folder))

    def _fill(self) -> None:
        from nneditor.tracing.plugins.compat import artifact_kind, incompatibility

        keep = self.selected()
        self.combo.blockSignals(True)
        self.combo.clear()
        self.combo.addItem("NNEditor's built-in tracers", BUILTIN)
        self.reasons = {}
        other_kinds: dict[str, tuple[str, ...]] = {}  # plugin name -> the kinds it runs
        kind_only: set[str] = set()  # labels of the plugins listed in that line
        kind = artifact_kind(self.doc) if self.doc is not None else ""
        model = self.combo.model()
        for r in self.records:
            m = r.manifest
            label = f"{m.name} ({r.id} {m.version})" if m else f"{r.folder.name} (unreadable)"
            reason = r.reason
            if not reason and m is not None and self.doc is not None:
                reason = incompatibility(m, self.doc, self.device)
            self.combo.addItem(label, r.id if not reason else None)
            if reason:
                self.reasons[label] = reason
                if m is not None and not r.reason and kind not in m.artifact_kinds:
                    other_kinds[m.name] = tuple(m.artifact_kinds)
                    kind_only.add(label)
                if isinstance(model, QStandardItemModel):
                    item = model.item(self.combo.count() - 1)
                    item.setEnabled(False)
                    item.setToolTip(reason)
        index = self.combo.findData(keep) if keep else 0
        self.combo.setCurrentIndex(max(index, 0))
        self.combo.blockSignals(False)
        lines = [
            f"{label}: cannot be used — {why}"
            for label, why in self.reasons.items()
            if label not in kind_only
        ]
        if other_kinds:  # one line for the plugins made for other kinds of files
            each = "; ".join(
                f"{name} (runs {', '.join(_KIND_TEXT.get(k, k) + 's' for k in kinds)})"
                for name, kinds in other_kinds.items()
            )
            lines.append(f"Made for other files than this {_KIND_TEXT.get(kind, kind)}: {each}")
        if not self.records:
            lines = ["No tracer plugins found (bundled, per-user or NNEDITOR_TRACE_PLUGIN_PATH)."]
        self.note.setText("\n".join(lines))
        if self.selected() != keep:
            self.changed.emit()
