"""Weights for the NumPy decoder, read one tensor at a time from the checkpoint's memory map.

Every read goes through the document's own tensor loaders (ggml block decoders, safetensors
rows, ml_dtypes for bf16/fp8) and is widened to float32. After a tensor is read, the mapped
pages it came from are released (``madvise(MADV_DONTNEED)``), so a trace's resident memory
holds the float32 weights of the layer being computed, not the file: the matrix in use, and
when the forward is pipelined (prefetch.py) up to ``AHEAD_BYTES`` decoded ahead of it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np

from nneditor.decoder.config import DecoderConfig, DecoderUnsupported
from nneditor.decoder.hadamard import regroup
from nneditor.decoder.prefetch import ReadAhead
from nneditor.tensors.loaders import AffineMatrix

if TYPE_CHECKING:
    from nneditor.model.document import Document
    from nneditor.model.tensor import TensorRef

#: rows of the vocabulary projection computed at once: 8,192 rows x 5,376 features is 176 MB
#: of float32 for the largest Gemma 3; a 576-feature model uses 19 MB per chunk
VOCAB_CHUNK_ROWS = 8192
#: float32 bytes of one matrix decoded at once by :meth:`Weights.linear`; larger matrices (a
#: 27B model's 17,408 x 5,120 feed-forward is 356 MB) are multiplied in row chunks
MATRIX_CHUNK_BYTES = 64 << 20


#: the tensors of an attention block, in the order forward.py reads them
BLOCK_ORDER = (
    *("attn_norm", "attn_qkv", "attn_q", "attn_k", "attn_v", "attn_q_norm", "attn_k_norm"),
    *("attn_output", "post_attention_norm", "ffn_norm", "ffn_up", "ffn_gate", "ffn_down"),
    "post_ffw_norm",
)


class Weights:
    def __init__(self, doc: Document, cfg: DecoderConfig) -> None:
        self.doc = doc
        self.cfg = cfg
        self.ahead: ReadAhead | None = None
        self._wanted: list[str] = []  # keys to read ahead, in the order they will be used
        # a block's tensor suffixes in the order blocks use them: an attention block's to
        # start with, then as the blocks read them
        self._order: list[str] = [f"{n}.{part}" for n in BLOCK_ORDER for part in ("weight", "bias")]

    def start_read_ahead(self) -> None:
        """From now on a second thread reads the queued layers' tensors ahead of their use
        (see prefetch.py); :meth:`close` stops it."""
        if self.ahead is None:
            self.ahead = ReadAhead()

    def read_ahead(self, layer: int) -> None:
        """Queue block ``layer``'s tensors (those read whole) in the order blocks use them."""
        if self.ahead is None:
            return
        prefix = f"blk.{layer}."
        known = {prefix + s: n for n, s in enumerate(self._order)}
        keys = sorted(self._layer_keys(layer), key=lambda k: known.get(k, len(known)))
        keys = [k for k in keys if "_exps" not in k]  # experts: those the router picks, later
        self._wanted += [k for k in keys if 0 < self._float_bytes(k) <= MATRIX_CHUNK_BYTES]
        self._top_up()

    def matrices(self, layer: int) -> list[TensorRef]:
        """Block ``layer``'s stored matrices."""
        refs = (self._stored(k) for k in self._layer_keys(layer))
        return [r for r in refs if r is not None and len(r.shape) == 2]

    def _layer_keys(self, layer: int) -> list[str]:
        prefix = f"blk.{layer}."
        return [k for k in self.cfg.names if k.startswith(prefix)]

    def _stored(self, key: str) -> TensorRef | None:
        name = self.cfg.tensor(key)
        return self.doc.tensors.get(name) if name is not None else None

    def done_with(self, layer: int) -> None:
        """Block ``layer`` is computed: what was read ahead for it and not used is dropped."""
        prefix = f"blk.{layer}."
        self._wanted = [k for k in self._wanted if not k.startswith(prefix)]
        if self.ahead is not None:
            self.ahead.drop(prefix)

    def close(self) -> None:
        if self.ahead is not None:
            self.ahead.close()
            self.ahead = None
        self._wanted.clear()

    def _top_up(self) -> None:
        while self.ahead is not None and self._wanted:
            key = self._wanted[0]
            if not self.ahead.submit(key, self._float_bytes(key), self._read):
                return
            self._wanted.pop(0)

    def _float_bytes(self, key: str) -> int:
        ref = self._stored(key)
        return 4 * ref.size if ref is not None else 0

    def ref(self, key: str) -> TensorRef:
        name = self.cfg.tensor(key)
        if name is None or name not in self.doc.tensors:
            raise DecoderUnsupported(f"the checkpoint has no tensor for {key}")
        return self.doc.tensors[name]

    def has(self, key: str) -> bool:
        return self.cfg.tensor(key) is not None

    def get(self, key: str) -> np.ndarray:
        """The whole tensor as float32 ([out, in] for matrices, as torch.nn.Linear stores)."""
        found = self._fetch(key)
        return found.dense() if isinstance(found, AffineMatrix) else found

    def _fetch(self, key: str) -> np.ndarray | AffineMatrix:
        """The tensor as :meth:`_read` gives it: from the read-ahead thread if it was read
        ahead, else read now."""
        if key.startswith("blk."):
            suffix = key.split(".", 2)[-1]
            if suffix not in self._order:
                self._order.append(suffix)
        waiting = self.ahead.take(key) if self.ahead is not None else None
        if waiting is not None:
            found = waiting.result()
            self._top_up()
            return found
        if key in self._wanted:  # read here: not again on the read-ahead thread
            self._wanted.remove(key)
        return self._read(key)

    def _read(self, key: str) -> np.ndarray | AffineMatrix:
        """The tensor as float32; a block-quantized matrix with per-block offsets as its two
        parts (:class:`AffineMatrix`), which :meth:`linear` multiplies without joining."""
        ref = self.ref(key)
        parts = None
        try:
            if key not in self.cfg.transposed and len(ref.shape) == 2:
                parts = ref.read_affine()
            arr = ref.read() if parts is None else None
        except Exception as exc:
            raise DecoderUnsupported(f"tensor {ref.name} could not be decoded: {exc}") from None
        self._release(ref)
        if parts is not None:
            return parts
        arr = np.asarray(arr, dtype=np.float32)
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
        rows, width = (int(ref.shape[0]), int(np.prod(ref.shape[1:]))) if ref.shape else (0, 0)
        unpacked = str(ref.dtype).startswith(("float", "bfloat"))  # (packed ones: other widths)
        flat = len(ref.shape) == 2 and key not in self.cfg.transposed
        if unpacked and flat and x.shape[-1] != width:
            raise DecoderUnsupported(
                f"tensor {self.cfg.names.get(key, key)!r} ({key}) takes {width} inputs, but the "
                f"value reaching it has {x.shape[-1]}: the checkpoint's shapes do not fit its "
                "configuration (config.json or the GGUF's metadata)"
            )
        chunk = max(1, MATRIX_CHUNK_BYTES // max(4 * width, 1))
        if key in self.cfg.transposed or rows <= chunk:
            found = self._fetch(key)
            y = found.product(x) if isinstance(found, AffineMatrix) else x @ found.T
        else:
            y = np.empty((*x.shape[:-1], rows), np.float32)
            for start, block in self.row_chunks(key, chunk):
                y[..., start : start + block.shape[0]] = x @ block.T
                del block
        b = self.optional(bias) if bias else None  # after the matrix, as the blocks queue them
        return y + b if b is not None else y

    def expert(self, layer: int, part: str, e: int) -> np.ndarray:
        """Expert ``e``'s [out, in] float32 matrix ``part`` (gate, up, down or gate_up) of layer
        ``layer``: its slice of the stacked GGUF tensor (only that expert's blocks are
        decoded), or the snapshot's own tensor of that expert."""
        stacked = f"blk.{layer}.ffn_{part}_exps.weight"
        if not self.has(stacked):
            return self.get(f"blk.{layer}.ffn_{part}_exps.{e}.weight")
        arr = self._slice(stacked, e)
        return arr.T.copy() if stacked in self.cfg.transposed else arr

    def expert_bias(self, layer: int, part: str, e: int) -> np.ndarray | None:
        """Expert ``e``'s bias of matrix ``part`` (gpt-oss), or None."""
        key = f"blk.{layer}.ffn_{part}_exps.bias"
        return self._slice(key, e) if self.has(key) else None

    def stacked(self, key: str, e: int) -> np.ndarray:
        """Entry ``e`` of a stacked tensor (a GGUF's experts, Gemma 3n's AltUp projections)."""
        return self._slice(key, e)

    def _slice(self, key: str, e: int) -> np.ndarray:
        """Entry ``e`` of a stacked tensor's first axis as float32, its pages released."""
        ref = self.ref(key)
        try:
            arr = np.asarray(ref.read(f"{e}:{e + 1}"), dtype=np.float32)[0]
        except Exception as exc:
            raise DecoderUnsupported(f"tensor {ref.name} could not be decoded: {exc}") from None
        self._release(ref)
        return arr

    def expert_gate_up(
        self, layer: int, e: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None]:
        """Expert ``e``'s gate and up matrices and their biases (None when unbiased); one
        read where they are stored as one matrix per expert (``ffn_gate_up_exps``: halves,
        or alternating rows when the mixture says ``interleaved``)."""
        if not self.has(f"blk.{layer}.ffn_gate_up_exps.weight"):
            return (
                self.expert(layer, "gate", e),
                self.expert(layer, "up", e),
                self.expert_bias(layer, "gate", e),
                self.expert_bias(layer, "up", e),
            )
        both = self.expert(layer, "gate_up", e)
        bias = self.expert_bias(layer, "gate_up", e)
        if self.cfg.moe is not None and self.cfg.moe.interleaved:
            pick = (slice(0, None, 2), slice(1, None, 2))
        else:
            half = both.shape[0] // 2
            pick = (slice(0, half), slice(half, None))
        return (
            both[pick[0]],
            both[pick[1]],
            None if bias is None else bias[pick[0]],
            None if bias is None else bias[pick[1]],
        )

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
        for start in range(0, total, chunk):  # on this thread, read-ahead or not (its bound)
            stop = min(total, start + chunk)
            block = np.asarray(ref.read(f"{start}:{stop}"), dtype=np.float32)
            self._release(ref)
            yield start, block

    @staticmethod
    def _release(ref: TensorRef) -> None:
        ref.release_pages()
