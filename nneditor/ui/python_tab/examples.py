"""Default scripts for the Python tab, chosen from what is known about the captured tensor.

Invariants:
- Qt-free and cheap: only the ``.npy`` header is read (never the data, never unpickled), and
  a damaged or missing file simply gives the generic example.
- A logits-like tensor (floating point, named like logits, fully captured) gets the
  softmax/entropy example of PRODUCT.md with its index adapted to the tensor's rank; for a
  ``(batch, positions, vocabulary)`` tensor the text is exactly the documented one.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path
from typing import Any

NPY_MAGIC = b"\x93NUMPY"
MAX_HEADER_BYTES = 65_536

GENERIC_SCRIPT = """\
# `tensor` is a private copy of the captured values; `metadata` describes them.
print(tensor.shape, tensor.dtype)
tensor.mean()
"""

PARTIAL_SCRIPT = """\
# A partial capture: `tensor` is a flat prefix; the original shape is metadata['shape'].
print(tensor.shape, tensor.dtype, "of", metadata.get("shape"))
tensor.mean()
"""

SOFTMAX_TEMPLATE = """\
logits = np.asarray(tensor){index}.astype(np.float64)
probs = scipy.special.softmax(logits)
top = np.argsort(probs)[-10:][::-1]
print("Top token IDs:", top.tolist())
plt.bar(top.astype(str), probs[top])
plt.xlabel("Token ID")
plt.ylabel("Next-token probability")
plt.tight_layout()
float(scipy.stats.entropy(probs))
"""


@dataclass(frozen=True)
class NpyInfo:
    """What an ``.npy`` header says: shape, dtype text (NumPy's ``descr``) and its kind letter."""

    shape: tuple[int, ...]
    dtype: str
    kind: str


def read_npy_header(path: Path) -> NpyInfo | None:
    """The header of an ``.npy`` file, or None if it cannot be read as one.

    The header is a Python literal; it is parsed with :func:`ast.literal_eval`, never executed.
    """
    try:
        with open(path, "rb") as f:
            head = f.read(10)
            if len(head) < 10 or not head.startswith(NPY_MAGIC):
                return None
            major = head[6]
            if major == 1:
                length = int.from_bytes(head[8:10], "little")
            else:
                length = int.from_bytes(head[8:10] + f.read(2), "little")
            if length > MAX_HEADER_BYTES:
                return None
            text = f.read(length).decode("latin-1")
    except OSError:
        return None
    return _parse_header(text)


def _parse_header(text: str) -> NpyInfo | None:
    try:
        header = ast.literal_eval(text.strip())
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    if not isinstance(header, dict):
        return None
    shape, descr = header.get("shape"), header.get("descr")
    if not isinstance(shape, tuple) or not all(isinstance(n, int) and n >= 0 for n in shape):
        return None
    if not isinstance(descr, str):  # structured dtypes: not a plain tensor
        return None
    kind = descr.lstrip("<>|=")[:1]
    return NpyInfo(tuple(shape), _dtype_name(descr), kind)


def _dtype_name(descr: str) -> str:
    names = {"f2": "float16", "f4": "float32", "f8": "float64", "b1": "bool", "c8": "complex64"}
    names |= {f"i{n}": f"int{8 * n}" for n in (1, 2, 4, 8)}
    names |= {f"u{n}": f"uint{8 * n}" for n in (1, 2, 4, 8)}
    names["c16"] = "complex128"
    return names.get(descr.lstrip("<>|="), descr)


def is_partial(info: NpyInfo | None, metadata: dict[str, Any]) -> bool:
    """True for a partial capture (a flat prefix of a larger tensor)."""
    if metadata.get("partial") is True or metadata.get("status") == "partial":
        return True
    shape = metadata.get("shape")
    if info is None or not isinstance(shape, list | tuple):
        return False
    if len(info.shape) != 1 or not all(isinstance(n, int) for n in shape):
        return False
    return list(info.shape) != list(shape)


def looks_like_logits(info: NpyInfo | None, metadata: dict[str, Any], title: str) -> bool:
    """A floating-point tensor whose name says logits and whose last axis can be a vocabulary."""
    if info is None or info.kind != "f" or not info.shape or info.shape[-1] < 2:
        return False
    if any(n == 0 for n in info.shape) or is_partial(info, metadata):
        return False
    names = [title, str(metadata.get("name") or "")]
    return any("logit" in n.lower() for n in names)


def softmax_script(rank: int) -> str:
    """The PRODUCT.md softmax/entropy example for a tensor of ``rank`` axes (last = vocabulary).

    It takes the last position along the axis before the vocabulary and index 0 of the
    axes before that: ``[0, -1]`` for ``(batch, positions, vocabulary)``.
    """
    index = "" if rank <= 1 else "[" + ", ".join(["0"] * (rank - 2) + ["-1"]) + "]"
    return SOFTMAX_TEMPLATE.format(index=index)


def tensor_info(path: Path | None, location: dict[str, Any] | None = None) -> NpyInfo | None:
    """Shape and dtype of the tensor: from ``location`` (a value inside a trace's capture
    container) or from the .npy header of ``path``."""
    if location:
        import numpy as np  # already loaded by the window; kept out of this module's import

        try:
            dt = np.dtype(str(location["dtype"]))
            return NpyInfo(tuple(int(d) for d in location["shape"]), dt.str, dt.kind)
        except (KeyError, TypeError, ValueError):
            return None
    return read_npy_header(path) if path is not None else None


def default_script(
    npy_path: Path | None,
    metadata: dict[str, Any],
    title: str,
    location: dict[str, Any] | None = None,
) -> str:
    """The example a freshly opened Python tab shows for this tensor."""
    info = tensor_info(npy_path, location)
    if looks_like_logits(info, metadata, title):
        assert info is not None
        return softmax_script(len(info.shape))
    if is_partial(info, metadata):
        return PARTIAL_SCRIPT
    return GENERIC_SCRIPT
