"""The tensor panel: metadata, paged values, statistics, plots, hex and export for one tensor.

Invariants shared by the package:
- Values are only ever read through ``TensorRef.read(key)`` with a key that selects what is
  on screen (a table page, a bounded 2-D plane, a bounded strided sample); no widget reads a
  whole tensor except the explicit whole-tensor .npy export, which streams in chunks.
- Long work (statistics, whole-tensor export) runs on a :class:`~nneditor.ui.jobs.QtJobRunner`;
  results are delivered on the GUI thread and a cancelled run is labelled partial.
- pyqtgraph is imported by :mod:`nneditor.ui.tensor.viz` only, when the Visualization tab is
  first needed.
"""

from __future__ import annotations

from nneditor.ui.tensor.panel import TensorPanel
from nneditor.ui.tensor.table_model import TensorTableModel

__all__ = ["TensorPanel", "TensorTableModel"]
