"""numpy, imported on first use.

A look at an ONNX file (``nneditor inspect m.onnx``) reads names, shapes and byte offsets and
needs no array: importing numpy would be ~65 ms of a 0.35 s command. The modules on that path
bind ``np`` to :data:`np` here, a stand-in module that imports numpy the first time one of its
attributes is read and from then on holds numpy's own names, so later reads cost what a plain
module's do::

    if TYPE_CHECKING:
        import numpy as np
    else:
        from nneditor.platform.lazy_numpy import np

Why not ``importlib.util.LazyLoader``: on Python 3.11 its first attribute read is not
thread-safe (a second thread can see a half-run numpy; fixed in 3.12), and the window's jobs
run on threads. Here the import runs under a lock.
"""

from __future__ import annotations

import threading
import types
from typing import Any

_LOCK = threading.Lock()


class _LazyNumpy(types.ModuleType):
    def __getattr__(self, name: str) -> Any:
        # Called only for names not yet in this module's dict: every name before the
        # import, afterwards the submodules numpy itself loads lazily (numpy.random, ...).
        with _LOCK:
            import numpy

            if "ndarray" not in self.__dict__:
                self.__dict__.update(
                    (k, v) for k, v in vars(numpy).items() if not k.startswith("__")
                )
        return getattr(numpy, name)


#: numpy, imported when first used (see the module's docstring)
np = _LazyNumpy("numpy", "numpy, imported on first use")


def loaded() -> bool:
    """True once :data:`np` has imported numpy."""
    return "ndarray" in np.__dict__
