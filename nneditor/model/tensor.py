"""Tensor references: what a tensor is, where its bytes are, and how to decode them lazily."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from nneditor.errors import TensorNotFoundError
from nneditor.tensors.loaders import AffineMatrix, TensorLoader
from nneditor.tensors.slicing import Key, parse_slice

if TYPE_CHECKING:
    import numpy as np
else:
    from nneditor.platform.lazy_numpy import np


@dataclass(eq=False, slots=True)
class TensorRef:
    """One stored tensor.

    Attributes:
        name: unique name within the artifact.
        dtype: logical dtype of decoded values ("float32", "bfloat16", ...). For block-quantized
            storage (GGUF) this is the decoded dtype, and ``encoding`` names the stored format.
        shape: logical shape (numpy order, outermost first).
        nbytes: bytes occupied by the stored encoding.
        encoding: how the bytes are stored ("raw", "int32_data", "external", "Q4_K", ...).
        offset: absolute byte offset of the stored bytes in ``location`` (None if not a range).
        location: file holding the bytes when it is not the artifact file itself.
        loader: decodes values; reads touch only the byte ranges needed.
        info: format-specific extras shown in the inspector (graph, block size, ...).
    """

    name: str
    dtype: str
    shape: tuple[int, ...]
    nbytes: int
    encoding: str
    loader: TensorLoader
    offset: int | None = None
    location: str | None = None
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def size(self) -> int:
        """Number of elements."""
        return math.prod(self.shape)

    def read(self, key: Key | str | None = None) -> np.ndarray:
        """Decoded values, or a slice given as a key tuple or a string like ``"0:2,:,5"``."""
        if isinstance(key, str):
            key = parse_slice(key, self.shape)
        elif key is not None:
            key = parse_slice(",".join(_key_text(k) for k in key), self.shape)
        return self.loader.read(self.shape, key)

    def read_affine(self) -> AffineMatrix | None:
        """The whole matrix as scaled values plus per-group offsets, where its format stores
        it that way (see :class:`~nneditor.tensors.loaders.AffineMatrix`), else None."""
        return self.loader.read_affine(self.shape)

    def release_pages(self) -> None:
        """Drop this tensor's memory-mapped pages from the process's resident set (streaming
        readers call it after each chunk; a later read maps them again). A no-op for
        tensors not read from a mapped file."""
        source = getattr(self.loader, "source", None)
        offset = getattr(self.loader, "offset", None)
        if source is not None and isinstance(offset, int) and hasattr(source, "release"):
            source.release(offset, self.nbytes)

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "dtype": self.dtype,
            "shape": list(self.shape),
            "nbytes": self.nbytes,
            "encoding": self.encoding,
        }


def _key_text(k: object) -> str:
    if k is Ellipsis:
        return "..."
    if isinstance(k, slice):
        if k.step not in (None, 1):
            return (
                f"{'' if k.start is None else k.start}:{'' if k.stop is None else k.stop}:{k.step}"
            )
        return f"{'' if k.start is None else k.start}:{'' if k.stop is None else k.stop}"
    return str(int(k))  # type: ignore[call-overload]


class TensorCatalog(Mapping[str, TensorRef]):
    """Ordered, name-unique collection of tensor refs."""

    def __init__(self, refs: Iterator[TensorRef] | list[TensorRef] | None = None) -> None:
        self._refs: dict[str, TensorRef] = {}
        self._next_suffix: dict[str, int] = {}  # name -> first "#n" not yet tried
        for ref in refs or []:
            self.add(ref)

    def add(self, ref: TensorRef) -> TensorRef:
        """Add ``ref``; a clashing name gets a ``#2``, ``#3``... suffix so names stay unique."""
        name = ref.name
        if name in self._refs:
            # Resume where the last clash of this name stopped: thousands of copies of one
            # name cost linear time, not quadratic.
            n = self._next_suffix.get(name, 2)
            while f"{name}#{n}" in self._refs:
                n += 1
            self._next_suffix[name] = n + 1
            ref.name = f"{name}#{n}"
        self._refs[ref.name] = ref
        return ref

    def __getitem__(self, name: str) -> TensorRef:
        try:
            return self._refs[name]
        except KeyError:
            raise TensorNotFoundError(name, len(self._refs)) from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._refs)

    def __len__(self) -> int:
        return len(self._refs)

    @property
    def total_bytes(self) -> int:
        return sum(r.nbytes for r in self._refs.values())
