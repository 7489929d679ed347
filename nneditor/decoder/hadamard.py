"""Prism's Hadamard fold (``prism.hadamard.*`` GGUF metadata), applied to activations.

A folded matrix ``W`` is stored rotated: the model's own weight row is ``s * H_B(w_stored_row)``,
with ``H_B`` the normalised Sylvester-Walsh-Hadamard matrix applied to each contiguous slice of
``B`` inputs and ``s`` a ±1 vector chosen by the input width. Because ``H_B`` is symmetric and
orthonormal, ``W x = W_stored H_B(s * x)``: the decoder transforms the activation once and
multiplies by the stored (decoded) weights, never rebuilding the primal matrix.

- inverse weights (the token embedding): a looked-up row ``z`` becomes ``s * H_B(z)``;
- version 2 (tied output head): logits are ``token_embd_stored . H_B(s * h)``;
- ``gdn_v_grouped``: the recurrent output projection was folded with its columns in grouped
  value-head order, so the tiled activation is regrouped first.

Facts from ../shared/spec/GGUF-NOTES.md (PrismML's converter and llama.cpp fork).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from nneditor.errors import NNEditorError

F32 = np.float32
_TRANSFORM = "normalized-sylvester-walsh-hadamard"


class HadamardUnsupported(NNEditorError):
    """The file's Hadamard metadata is one the decoder does not implement."""


@dataclass(frozen=True)
class Hadamard:
    block: int
    version: int
    #: input width -> ±1 float32 signs
    signs: Mapping[int, np.ndarray] = field(default_factory=dict)
    folded: frozenset[str] = frozenset()
    inverse: frozenset[str] = frozenset()
    v_grouped: bool = False
    tied_output: bool = False

    def sign(self, width: int) -> np.ndarray | None:
        return self.signs.get(width)

    def forward(self, x: np.ndarray) -> np.ndarray:
        """``H_B(s * x)`` over the last axis (the input side of a folded matrix)."""
        s = self._signs_for(x.shape[-1])
        return fwht(x * s if s is not None else x, self.block)

    def inverse_rows(self, z: np.ndarray) -> np.ndarray:
        """``s * H_B(z)`` over the last axis (rows of an inversely folded embedding)."""
        y = fwht(z, self.block)
        s = self._signs_for(z.shape[-1])
        return (y * s).astype(F32) if s is not None else y

    def _signs_for(self, width: int) -> np.ndarray | None:
        if width % self.block:
            raise HadamardUnsupported(
                f"a folded input of width {width} is not a multiple of the Hadamard block "
                f"{self.block}"
            )
        return self.signs.get(width)


def fwht(x: np.ndarray, block: int) -> np.ndarray:
    """Normalised fast Walsh-Hadamard transform of every contiguous ``block`` slice of the last
    axis (natural/Sylvester order: ``H[i, j] = (-1)^popcount(i & j) / sqrt(block)``)."""
    shape = x.shape
    y = np.array(x, dtype=F32).reshape(-1, block)
    h = 1
    while h < block:
        v = y.reshape(-1, block // (2 * h), 2, h)
        a = v[:, :, 0, :].copy()
        b = v[:, :, 1, :]
        v[:, :, 0, :] += b
        b *= -1
        b += a
        h *= 2
    y *= F32(1.0 / np.sqrt(block))
    return y.reshape(shape)


def regroup(x: np.ndarray, n_k_heads: int, n_v_heads: int) -> np.ndarray:
    """Tiled value-head order (v-head ``r * nk + k``) -> grouped (``k * rep + r``), last axis."""
    rep = n_v_heads // n_k_heads
    lead = x.shape[:-1]
    hd = x.shape[-1] // n_v_heads
    y = x.reshape(*lead, rep, n_k_heads, hd)
    return np.ascontiguousarray(np.swapaxes(y, -3, -2)).reshape(*lead, -1)


def from_metadata(meta: Mapping[str, Any]) -> Hadamard | None:
    """The fold described by ``prism.hadamard.*`` keys, None when the file has none."""
    keys = {k[len("prism.hadamard.") :]: v for k, v in meta.items() if k.startswith("prism.")}
    if not keys:
        return None

    def listing(key: str) -> list[Any]:
        v = keys.get(key)
        if v is None:
            return []
        return list(v.tolist() if hasattr(v, "tolist") else v)

    version = int(keys.get("version") or 1)
    block = int(keys.get("block_size") or 0)
    transform = str(keys.get("transform") or _TRANSFORM)
    axis = str(keys.get("axis") or "input-last-dimension")
    if version not in (1, 2) or transform != _TRANSFORM or axis != "input-last-dimension":
        raise HadamardUnsupported(
            f"Prism Hadamard fold version {version} ({transform}, {axis}) is not implemented; "
            f"the decoder knows versions 1 and 2 of the {_TRANSFORM} over the input dimension"
        )
    if block < 2 or block & (block - 1):
        raise HadamardUnsupported(f"Hadamard block size {block} is not a power of two")
    signs: dict[int, np.ndarray] = {}
    mode = str(keys.get("sign_mode") or "identity")
    if mode == "explicit":
        widths = [int(w) for w in listing("sign_widths")]
        values = np.asarray(listing("sign_values"), dtype=F32)
        if values.size != sum(widths) or not np.all(np.abs(values) == 1):
            raise HadamardUnsupported(
                f"prism.hadamard.sign_values holds {values.size} values for widths {widths} "
                "(wanted one ±1 per input of each width)"
            )
        start = 0
        for w in widths:
            signs[w] = values[start : start + w]
            start += w
    elif mode != "identity":
        raise HadamardUnsupported(f"Hadamard sign mode {mode!r} is not implemented")
    tied = bool(keys.get("tied_output")) or version == 2
    inverse = frozenset(str(n) for n in listing("inverse_weight_names"))
    if tied and "token_embd.weight" not in inverse:
        raise HadamardUnsupported(
            "the Hadamard fold ties the output head but does not list token_embd.weight as "
            "inversely folded"
        )
    return Hadamard(
        block=block,
        version=version,
        signs=signs,
        folded=frozenset(str(n) for n in listing("weight_names")),
        inverse=inverse,
        v_grouped=bool(keys.get("gdn_v_grouped")),
        tied_output=tied,
    )
