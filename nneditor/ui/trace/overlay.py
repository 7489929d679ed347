"""The tensor overlay of a captured value: View / Statistics / Visualization (the tensor
panel on the capture file) and Python (the Python tab on the same file and its metadata).

Invariants:
- The capture is opened with ``np.load(allow_pickle=False, mmap_mode="r")`` (via
  :class:`~nneditor.ui.trace.store.TraceRun`); the overlay never copies it whole.
- A partial capture (a flat prefix) is labelled "partial" in the title, the tensor panel and
  the Python tab's metadata (``metadata['shape']`` is the original shape).
- Closing the overlay stops its script worker and its statistics jobs.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import numpy as np
from PySide6.QtGui import QCloseEvent
from PySide6.QtWidgets import QDialog, QLabel, QTabWidget, QVBoxLayout, QWidget

from nneditor.ui.trace.ports import STATUS_TEXT
from nneditor.ui.trace.store import TraceRun


class TensorOverlay(QDialog):
    """A large non-modal panel for one captured value of one trace run."""

    def __init__(
        self,
        run: TraceRun,
        name: str,
        parent: QWidget | None = None,
        compared: Path | None = None,
    ) -> None:
        super().__init__(parent)
        self.run = run
        self.name = name
        self.metadata: dict[str, Any] = run.metadata(name)
        self.array: np.ndarray = run.load(name)
        partial = bool(self.metadata.get("partial"))
        self.setWindowTitle(f"{name} — captured tensor{' (partial)' if partial else ''}")
        self.resize(1100, 760)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(8, 8, 8, 8)
        status = STATUS_TEXT.get(str(self.metadata.get("status")), "?")
        producer = self.metadata.get("producer") or "graph input"
        op = self.metadata.get("op_type") or ""
        info = QLabel(
            f"<b>{_esc(name)}</b> · {status} · produced by {_esc(str(producer))}"
            f"{f' ({_esc(op)})' if op else ''} · trace {_esc(run.path.name)} on "
            f"{_esc(run.provider_name)}",
            self,
        )
        info.setWordWrap(True)
        lay.addWidget(info)
        if partial:
            note = QLabel(
                f"Partial capture: {_esc(str(self.metadata.get('reason', '')))}. The values are "
                f"a flat prefix of the original shape {self.metadata.get('shape')}.",
                self,
            )
            note.setWordWrap(True)
            note.setStyleSheet("color: #c2410c;")
            lay.addWidget(note)
        self.tabs = QTabWidget(self)
        lay.addWidget(self.tabs, 1)
        self.tensor_panel = self._tensor_panel()
        self.tabs.addTab(self.tensor_panel, "Values")
        self.tokens_tab = self._tokens_tab()
        if self.tokens_tab is not None:
            self.tabs.addTab(self.tokens_tab, "Tokens")
        self.python_tab = self._python_tab()
        if self.python_tab is not None:
            self.tabs.addTab(self.python_tab, "Python")
        self.compared_panel: QWidget | None = None
        self.difference_panel: QWidget | None = None
        self.comparison_text = ""
        if compared is not None:
            self._add_comparison(Path(compared))

    def _add_comparison(self, other: Path) -> None:
        """The same value in the compared trace, and A - B, each with View, Statistics and
        Visualization; the label says how far they are apart."""
        from nneditor.diff.deltas import Delta
        from nneditor.diff.traces import load_value
        from nneditor.ui.tensor import TensorPanel

        b = load_value(other, self.name)
        if b is None or b.shape != self.array.shape or self.metadata.get("partial"):
            self.tabs.addTab(
                QLabel(f"{self.name} is not captured with the same shape in {other}.", self),
                "Compared",
            )
            return
        delta = Delta()
        delta.add(self.array, b)
        base = {"usage": [f"the same value in the compared trace {other}"]}
        panel_b = TensorPanel(self)
        panel_b.set_array(np.asarray(b), f"{self.name} (B)", base)
        diff = np.asarray(self.array, dtype=np.float64) - np.asarray(b, dtype=np.float64)
        panel_d = TensorPanel(self)
        panel_d.set_array(
            diff,
            f"{self.name} (A − B)",
            {"usage": [f"this trace minus {other.name}"], **delta.as_dict()},
        )
        self.compared_panel, self.difference_panel = panel_b, panel_d
        self.tabs.addTab(panel_b, f"Compared ({other.name})")
        self.tabs.addTab(panel_d, "Difference (A − B)")
        self.comparison_text = (
            f"relative L2 {delta.rel_l2:.3g}, max |A − B| {delta.max_abs:.3g}, "
            f"cosine {delta.cosine:.6f}"
        )
        self.tabs.setTabToolTip(self.tabs.count() - 1, self.comparison_text)
        label = QLabel(f"Compared with {other}: {self.comparison_text}", self)
        label.setWordWrap(True)
        label.setObjectName("Muted")
        layout = self.layout()
        if isinstance(layout, QVBoxLayout):
            layout.insertWidget(1, label)

    def _tensor_panel(self) -> QWidget:
        from nneditor.ui.tensor import TensorPanel

        panel = TensorPanel(self)
        meta = {k: v for k, v in self.metadata.items() if v not in (None, "")}
        meta["usage"] = [f"captured value of {self.metadata.get('producer') or 'graph input'}"]
        panel.set_array(self.array, self.name, meta)
        panel.show_tab("View")
        return panel

    def _tokens_tab(self) -> QWidget | None:
        """Decode token ids / inspect next-token predictions, for values that can be either."""
        from nneditor.ui.trace.tokens_tab import TokensTab, tokens_kind

        producer = str(self.metadata.get("producer") or "")
        if self.metadata.get("partial") or not tokens_kind(self.array, self.name, producer):
            return None
        notes = self.run.run.get("input_notes") or {}
        note = notes.get(self.name) if isinstance(notes, dict) else None
        # an edited revision's run traced a private copy: its vocabulary (a tokenizer.json
        # beside the model) is the source's
        model = self.run.edits_of or self.run.model
        prompt = None  # the traced prompt: a masked-language model is read at its mask
        if self.name != "tokens" and self.run.file("tokens") is not None:
            with contextlib.suppress(Exception):  # (unreadable: the last position, as before)
                prompt = self.run.load("tokens")
        return TokensTab(self.array, self.name, model, producer, self, note, prompt)

    def _python_tab(self) -> QWidget | None:
        from nneditor.ui.python_tab import PythonTab

        path = self.run.file(self.name)
        if path is None:
            return None
        tab = PythonTab(self)
        tab.set_tensor(path, dict(self.metadata), self.name, self.run.location(self.name))
        return tab

    def show_tab(self, name: str) -> None:
        """ "View", "Statistics", "Visualization", "Metadata", "Hex", "Tokens" or "Python"."""
        if name == "Python" and self.python_tab is not None:
            self.tabs.setCurrentWidget(self.python_tab)
            return
        if name == "Tokens" and self.tokens_tab is not None:
            self.tabs.setCurrentWidget(self.tokens_tab)
            return
        self.tabs.setCurrentWidget(self.tensor_panel)
        self.tensor_panel.show_tab(name)  # type: ignore[attr-defined]

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802 - Qt override
        self.shutdown()
        super().closeEvent(event)

    def shutdown(self) -> None:
        for w in (self.python_tab, self.tensor_panel):
            stop = getattr(w, "shutdown", None)
            if stop is not None:
                stop()


def _esc(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
