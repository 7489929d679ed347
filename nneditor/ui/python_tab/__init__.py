"""The Python tab of a captured tensor's overlay: edit a script, run it in a worker, see output.

:class:`PythonTab` is the widget; hosts call ``set_tensor(npy_path, metadata, title)`` and
``shutdown()`` (or close it) when the overlay goes away. The engine is
:mod:`nneditor.scripting`; this package only drives it from the GUI thread.
"""

from __future__ import annotations

from nneditor.ui.python_tab.widget import PythonTab

__all__ = ["PythonTab"]
