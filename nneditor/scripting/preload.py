"""Worker-side namespace: preloaded libraries and the private copy of the captured tensor.

Invariants:
- Libraries are imported in the worker process only, just before the script runs, never at
  import time of this module. ``numpy`` and ``math`` are required; SciPy (with
  ``scipy.special`` and ``scipy.stats``), scikit-learn and Matplotlib (Agg backend) are
  optional and imported only when the script's text mentions one of their names: a missing
  one is simply absent from the namespace and, if mentioned, named in a note.
- The tensor is read from a read-only file handle into fresh private memory, never mapped and
  never unpickled (object dtypes are refused); in-place operations cannot reach the file.
  The size its header claims is checked against the file size before allocating.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

NPY_MAGIC = b"\x93NUMPY"


class TensorLoadError(Exception):
    """The captured tensor file could not be read; the message is a user-facing sentence."""


@dataclass(frozen=True)
class Library:
    """An optional library: the names it is bound to, what to import, its pip package."""

    names: tuple[str, ...]
    module: str
    extras: tuple[str, ...]
    package: str

    @property
    def top(self) -> str:
        return self.module.split(".")[0]


OPTIONAL_LIBRARIES: tuple[Library, ...] = (
    Library(("scipy",), "scipy", ("scipy.special", "scipy.stats"), "scipy"),
    Library(("sklearn", "scikit"), "sklearn", (), "scikit-learn"),
    Library(("matplotlib",), "matplotlib", (), "matplotlib"),
    Library(("plt",), "matplotlib.pyplot", (), "matplotlib"),
)
ALWAYS = ("np", "math")


def mentioned_names(code: str) -> set[str]:
    """Preloaded names that occur as words anywhere in the script's text."""
    words = {n for lib in OPTIONAL_LIBRARIES for n in lib.names} | set(ALWAYS)
    return {w for w in words if re.search(rf"\b{w}\b", code)}


def preload_libraries(code: str, notes: list[str]) -> tuple[dict[str, Any], dict[str, str | None]]:
    """Import what the script mentions; returns (namespace entries, library -> version|None).

    ``np`` and ``math`` are always bound. An optional library is imported (and all its names
    bound) when the script's text mentions one of its names, so a script that never says
    ``plt`` does not wait for Matplotlib. A mentioned library that is not installed gets a note.
    """
    import math

    import numpy as np

    namespace: dict[str, Any] = {"np": np, "math": math}
    versions: dict[str, str | None] = {"numpy": np.__version__}
    mentioned = mentioned_names(code)
    missing: dict[str, list[str]] = {}  # pip package -> mentioned names it would provide
    for lib in OPTIONAL_LIBRARIES:
        installed = importlib.util.find_spec(lib.top) is not None
        if lib.top not in versions:
            versions[lib.top] = _version(lib.package) if installed else None
        names = [n for n in lib.names if n in mentioned]
        if not names:
            continue
        if not installed:
            missing.setdefault(lib.package, []).extend(names)
            continue
        module = _import_optional(lib, notes)
        if module is not None:
            namespace.update(dict.fromkeys(lib.names, module))
    for package, names in missing.items():
        shown = ", ".join(f"`{n}`" for n in names)
        notes.append(
            f"{package} is not installed, so {shown} is not available in scripts "
            f"(install it with `pip install {package}`)."
        )
    return namespace, versions


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def _import_optional(lib: Library, notes: list[str]) -> Any:
    shown = ", ".join(f"`{n}`" for n in lib.names)
    try:
        if lib.module == "matplotlib.pyplot":
            _select_agg_backend()
        module = importlib.import_module(lib.module)
        for extra in lib.extras:
            importlib.import_module(extra)
    except Exception as exc:  # a broken installation must not stop the run
        notes.append(
            f"{lib.module} could not be imported, so {shown} is not available: "
            f"{type(exc).__name__}: {exc}."
        )
        return None
    return module


def _select_agg_backend() -> None:
    os.environ["MPLBACKEND"] = "Agg"
    import matplotlib

    matplotlib.use("Agg")


def load_tensor(path: Path, location: dict[str, Any] | None = None) -> Any:
    """A private, writable copy of the array in ``path`` (an ``.npy`` file), or of the slice
    ``location`` (offset, dtype, shape) of it (a trace's capture container).

    The header is parsed first and the data size it implies is checked against the file size,
    so a header claiming more data than the file holds is refused before anything is
    allocated. The data is then read once into fresh memory (one copy, not map + copy).
    """
    import numpy as np

    if not path.is_file():
        raise TensorLoadError(f"The captured tensor file {path} does not exist.")
    if location:
        return _load_slice(path, location)
    _check_magic(path)
    try:
        with open(path, "rb") as f:  # read-only: nothing can write through this handle
            shape, fortran, dtype = _read_header(f, path)
            count = math.prod(shape)
            available = path.stat().st_size - f.tell()
            if count * dtype.itemsize > available:
                raise TensorLoadError(
                    f"The captured tensor file {path} is damaged: its header describes "
                    f"{count * dtype.itemsize:,} bytes of data but the file holds only "
                    f"{available:,}."
                )
            flat = np.fromfile(f, dtype=dtype, count=count)
    except OSError as exc:
        raise TensorLoadError(f"The captured tensor file {path} cannot be read: {exc}.") from None
    if flat.size != count:
        raise TensorLoadError(f"The captured tensor file {path} is damaged: it ended early.")
    array = flat.reshape(shape, order="F" if fortran else "C")
    return array if array.flags.writeable else array.copy()


def _load_slice(path: Path, location: dict[str, Any]) -> Any:
    import numpy as np

    try:
        dtype = np.dtype(str(location["dtype"]))
        shape = tuple(int(d) for d in location["shape"])
        offset = int(location["offset"])
    except (KeyError, TypeError, ValueError) as exc:
        raise TensorLoadError(f"The tensor's place in {path} is not valid ({exc}).") from None
    if dtype.hasobject or offset < 0 or any(d < 0 for d in shape):
        raise TensorLoadError(f"The tensor's place in {path} is not valid.")
    count = math.prod(shape)
    try:
        if offset + count * dtype.itemsize > path.stat().st_size:
            raise TensorLoadError(
                f"The capture file {path} is damaged: it is shorter than the trace's manifest says."
            )
        with open(path, "rb") as f:  # read-only: nothing can write through this handle
            f.seek(offset)
            flat = np.fromfile(f, dtype=dtype, count=count)
    except OSError as exc:
        raise TensorLoadError(f"The capture file {path} cannot be read: {exc}.") from None
    if flat.size != count:
        raise TensorLoadError(f"The capture file {path} is damaged: it ended early.")
    return flat.reshape(shape)


def _read_header(f: Any, path: Path) -> tuple[tuple[int, ...], bool, Any]:
    import numpy as np

    try:
        version = np.lib.format.read_magic(f)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
        else:
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
    except ValueError as exc:
        raise TensorLoadError(f"The captured tensor file {path} is damaged: {exc}.") from None
    if dtype.hasobject:
        raise TensorLoadError(
            f"The captured tensor file {path} holds Python objects, not numbers; "
            "it is not loaded because that would execute code stored in the file."
        )
    return tuple(int(n) for n in shape), bool(fortran), dtype


def _check_magic(path: Path) -> None:
    try:
        with open(path, "rb") as f:
            head = f.read(6)
    except OSError as exc:
        raise TensorLoadError(f"The captured tensor file {path} cannot be read: {exc}.") from None
    if head == NPY_MAGIC:
        return
    if head.startswith(b"PK"):
        raise TensorLoadError(
            f"The captured tensor file {path} is an .npz archive, not a single .npy array."
        )
    raise TensorLoadError(
        f"The captured tensor file {path} is not an .npy file (it does not start with "
        f"the .npy signature); found {head!r}."
    )
