"""sentence-transformers' pooling of an encoder snapshot (all-MiniLM, all-mpnet, bge, e5 ...):
the modules.json beside the model names a Pooling module (mean, CLS, max, mean / sqrt(length)
or last token over the token states) and often a Normalize module (unit length), which turn
the last hidden state into the sentence embedding. A module NNEditor does not compute (a Dense
projection, say) is named, and the embedding is then not claimed."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
else:
    from nneditor.platform.lazy_numpy import np


#: Pooling's config.json flags -> the mode (its first set flag, in sentence-transformers' order)
_MODES = (
    ("pooling_mode_cls_token", "cls"),
    ("pooling_mode_mean_tokens", "mean"),
    ("pooling_mode_max_tokens", "max"),
    ("pooling_mode_mean_sqrt_len_tokens", "mean_sqrt_len"),
    ("pooling_mode_lasttoken", "lasttoken"),
)


@dataclass(frozen=True)
class SentencePooling:
    """``mode`` over the token states, then unit length where ``normalize``; ``rest``: the
    modules after them that are not computed (the embedding is not the final one then)."""

    mode: str
    normalize: bool = False
    rest: tuple[str, ...] = ()

    def describe(self) -> str:
        out = f"sentence-transformers' {self.mode} pooling" + (
            ", then unit length (Normalize)" if self.normalize else ""
        )
        if self.rest:
            out += f"; the modules after it ({', '.join(self.rest)}) are not computed"
        return out


def read_pooling(folder: Path) -> SentencePooling | None:
    """The pooling a snapshot folder's modules.json states, None without one (or without a
    Pooling module, or one with several modes set: concatenated, not computed here)."""
    try:
        modules = json.loads((folder / "modules.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(modules, list):
        return None
    kinds = [
        (str(m.get("type", "")), str(m.get("path", ""))) for m in modules if isinstance(m, dict)
    ]
    at = next((i for i, (t, _) in enumerate(kinds) if t.endswith(".Pooling")), None)
    if at is None:
        return None
    config = _json(folder / kinds[at][1] / "config.json")
    modes = [mode for key, mode in _MODES if config.get(key)]
    if len(modes) != 1:
        return None
    after = [t.rsplit(".", 1)[-1] for t, _ in kinds[at + 1 :]]
    normalize = bool(after) and after[0] == "Normalize"
    rest = tuple(after[1:] if normalize else after)
    return SentencePooling(modes[0], normalize, rest)


def pool(x: np.ndarray, pooling: SentencePooling) -> np.ndarray:
    """[1, hidden]: the token states ``x`` [positions, hidden] pooled (every token counted:
    a prompt without padding)."""
    if pooling.mode == "cls":
        return x[:1]
    if pooling.mode == "lasttoken":
        return x[-1:]
    if pooling.mode == "max":
        return x.max(axis=0, keepdims=True)
    total = x.astype(np.float64).sum(axis=0, keepdims=True)
    scale = x.shape[0] if pooling.mode == "mean" else np.sqrt(x.shape[0])
    return (total / scale).astype(np.float32)


def unit(v: np.ndarray) -> np.ndarray:
    """``v`` at unit length (torch's F.normalize: divided by max(norm, 1e-12))."""
    norm = np.sqrt((v.astype(np.float64) ** 2).sum(axis=-1, keepdims=True))
    return (v / np.maximum(norm, 1e-12)).astype(np.float32)


def _json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
