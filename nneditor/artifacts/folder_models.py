"""Model files inside a folder that is not itself one model: what to open instead.

A Hugging Face repository exported for ONNX Runtime or transformers.js keeps ``config.json``
beside ``onnx/model.onnx`` (and quantized variants) and no weights; a download folder holds a
GGUF or a split GGUF set. Opened as a folder, these have nothing to show, so the message names
the files that do, by extension, in the folder and its direct subfolders.
"""

from __future__ import annotations

import re
from pathlib import Path

#: extensions of files NNEditor opens one at a time
MODEL_SUFFIXES = (
    ".onnx",
    ".gguf",
    ".safetensors",
    ".pt",
    ".pth",
    ".ckpt",
    ".pt2",
    ".ptl",
    ".tflite",
    ".mlmodel",
    ".mlir",
)
_SHARD = re.compile(r"-(\d+)-of-(\d+)\.gguf$", re.IGNORECASE)
SHOWN = 6


def model_files(folder: Path) -> list[str]:
    """Model files in ``folder`` and its direct subfolders, as relative paths; a split GGUF
    appears once, as its first shard."""
    found: list[str] = []
    try:
        entries = sorted(folder.iterdir())
    except OSError:
        return []
    subdirs = [e for e in entries if e.is_dir() and not e.name.startswith(".")]
    for base in [folder, *subdirs]:
        try:
            files = sorted(p for p in base.iterdir() if p.is_file())
        except OSError:
            continue
        for p in files:
            if p.suffix.lower() not in MODEL_SUFFIXES:
                continue
            shard = _SHARD.search(p.name)
            if shard and int(shard.group(1)) != 1:
                continue  # the first shard opens the whole split model
            found.append(p.relative_to(folder).as_posix())
    return found


def open_instead(folder: Path) -> str:
    """ "open one of them: a, b, ... (N in all)", or "" when the folder holds none."""
    files = model_files(folder)
    if not files:
        return ""
    shown = ", ".join(files[:SHOWN]) + (
        f", ... ({len(files)} in all)" if len(files) > SHOWN else ""
    )
    return f"open one of the model files it holds: {shown}"
