"""Tracing in the desktop window: Generate test input, the Trace panel, the Traced model pane
with capture ports, and the tensor overlay of a captured value.

Everything is driven by the Qt-free engines in :mod:`nneditor.inputs` and
:mod:`nneditor.tracing`; :class:`~nneditor.ui.trace.feature.TraceFeature` installs the pages
into the main window. Captures are read from run folders (see :mod:`.store`).
"""

from __future__ import annotations
