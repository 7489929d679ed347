"""Weights for the NumPy decoder, read one tensor at a time from the checkpoint's memory map.

Every read goes through the document's own tensor loaders (ggml block decoders, safetensors
rows, ml_dtypes for bf16/fp8) and is widened to float32. After a tensor is read, the mapped
pages it came from are released (``madvise(MADV_DONTNEED)``), so a trace's resident memory
holds the float32 weights of the layer being computed, not the file.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np

from nneditor.decoder.config import DecoderConfig, DecoderUnsupported
from nneditor.decoder.hadamard import regroup

if TYPE_CHECKING:
    from nneditor.model.document import Document
    from nneditor.model.tensor import TensorRef

#: rows of the vocabulary projection computed at once: 8,192 rows x 5,376 features is 176 MB
#: of float32 for the largest Gemma 3; a 576-feature model uses 19 MB per chunk
VOCAB_CHUNK_ROWS = 8192
#: float32 bytes of one matrix decoded at once by :meth:`Weights.linear`; larger matrices (a
#: 27B model's 17,408 x 5,120 feed-forward is 356 MB) are multiplied in row chunks
MATRIX_CHUNK_BYTES = 64 << 20


class Weights:
    def __init__(self, doc: Document, cfg: DecoderConfig) -> None:
        self.doc = doc
        self.cfg = cfg
        self.bytes_read = 0

    def ref(self, key: str) -> TensorRef:
        name = self.cfg.tensor(key)
        if name is None or name not in self.doc.tensors:
            raise DecoderUnsupported(f"the checkpoint has no tensor for {key}")
        return self.doc.tensors[name]

    def has(self, key: str) -> bool:
        return self.cfg.tensor(key) is not None

    def get(self, key: str) -> np.ndarray:
        """The whole tensor as float32 ([out, in] for matrices, as torch.nn.Linear stores)."""
        ref = self.ref(key)
        try:
            arr = ref.read()
        except Exception as exc:
            raise DecoderUnsupported(f"tensor {ref.name} could not be decoded: {exc}") from None
        self._release(ref)
        arr = np.asarray(arr, dtype=np.float32)
        self.bytes_read += ref.nbytes
        if key in self.cfg.transposed:
            return arr.T.copy()
        if arr.ndim == 3 and key.endswith(("ssm_conv1d.weight", "shortconv.conv.weight")):
            # torch Conv1d [C, 1, K]
            return arr.reshape(arr.shape[0], arr.shape[-1])
        return arr

    def linear(self, key: str, x: np.ndarray, bias: str | None = None) -> np.ndarray:
        """``x @ W.T (+ b)`` for the [out, in] matrix ``key``, in row chunks of at most
        :data:`MATRIX_CHUNK_BYTES` float32 so a large matrix is never whole in memory; a
        Hadamard-folded matrix (Prism) gets its input transformed instead of its weights."""
        ref = self.ref(key)
        x = self.fold_input(key, x)
        b = self.optional(bias) if bias else None
        rows, width = (int(ref.shape[0]), int(np.prod(ref.shape[1:]))) if ref.shape else (0, 0)
        chunk = max(1, MATRIX_CHUNK_BYTES // max(4 * width, 1))
        if key in self.cfg.transposed or rows <= chunk:
            y = x @ self.get(key).T
        else:
            y = np.empty((*x.shape[:-1], rows), np.float32)
            for start, block in self.row_chunks(key, chunk):
                y[..., start : start + block.shape[0]] = x @ block.T
                del block
        return y + b if b is not None else y

    def fold_input(self, key: str, x: np.ndarray) -> np.ndarray:
        """The activation a folded matrix multiplies: ``H_B(s * P(x))`` (see hadamard.py)."""
        fold = self.cfg.hadamard
        if fold is None:
            return x
        name = self.ref(key).name
        tied_head = fold.tied_output and key == "token_embd.weight"
        if name not in fold.folded and not tied_head:
            return x
        if fold.v_grouped and key.endswith("ssm_out.weight") and self.cfg.ssm is not None:
            x = regroup(x, self.cfg.ssm.n_k_heads, self.cfg.ssm.n_v_heads)
        return fold.forward(x)

    def optional(self, key: str) -> np.ndarray | None:
        return self.get(key) if self.has(key) else None

    def rows(self, key: str, ids: np.ndarray) -> np.ndarray:
        """Rows ``ids`` of a [rows, features] table (the token embedding), read row by row."""
        ref = self.ref(key)
        out = np.empty((len(ids), ref.shape[-1]), np.float32)
        for n, i in enumerate(ids.tolist()):
            out[n] = ref.read(f"{i}:{i + 1}")[0]
        fold = self.cfg.hadamard
        if fold is not None and ref.name in fold.inverse:
            out = fold.inverse_rows(out)
        return out

    def row_chunks(
        self, key: str, chunk: int = VOCAB_CHUNK_ROWS
    ) -> Iterator[tuple[int, np.ndarray]]:
        """(first row, float32 rows) of a [rows, features] matrix, ``chunk`` rows at a time."""
        ref = self.ref(key)
        total = ref.shape[0]
        for start in range(0, total, chunk):
            stop = min(total, start + chunk)
            block = np.asarray(ref.read(f"{start}:{stop}"), dtype=np.float32)
            self._release(ref)
            yield start, block
        self.bytes_read += ref.nbytes

    @staticmethod
    def _release(ref: TensorRef) -> None:
        ref.release_pages()
