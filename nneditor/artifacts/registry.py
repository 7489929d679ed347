"""Which reader opens which format. Readers are imported only when a file needs them.

Each row names the module whose ``open_document(path: Path) -> Document`` opens the format: a
format package's face (``nneditor.artifacts.gguf``), or one of the three PyTorch entry modules.
Adding a format means adding a package (or a module while it is one file), a sniff rule and
one row here; nothing else changes.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from nneditor.artifacts.folder_models import open_instead
from nneditor.artifacts.sniff import sniff_path
from nneditor.errors import ArtifactError, UnknownFormatError, UnsupportedFormatError
from nneditor.model.document import Document
from nneditor.platform.gc_pause import collector_paused

#: format -> (reader module or None when not built yet, human-readable name)
READERS: dict[str, tuple[str | None, str]] = {
    "onnx": ("nneditor.artifacts.onnx.reader", "ONNX model"),
    "safetensors": ("nneditor.artifacts.safetensors", "safetensors file"),
    "gguf": ("nneditor.artifacts.gguf", "GGUF file"),
    "pytorch": ("nneditor.artifacts.pytorch.checkpoint", "PyTorch checkpoint"),
    "torchscript": ("nneditor.artifacts.pytorch.torchscript", "TorchScript archive"),
    "pt2": ("nneditor.artifacts.pytorch.pt2", "PyTorch exported program (.pt2)"),
    "huggingface": ("nneditor.artifacts.huggingface", "Hugging Face snapshot folder"),
    "stablehlo": ("nneditor.artifacts.stablehlo", "textual StableHLO module"),
    "tflite": ("nneditor.artifacts.tflite", "TensorFlow Lite flatbuffer"),
    "coreml": ("nneditor.artifacts.coreml", "Core ML model"),
    "tf_graphdef": (None, "TensorFlow GraphDef (.pb)"),
    "tf_savedmodel": (None, "TensorFlow SavedModel"),
    "dlc": (None, "Qualcomm DLC container"),
    "mlir_bytecode": (None, "MLIR bytecode"),
    "npz": (None, "NumPy .npz archive (tensors, not a model)"),
    "zip": (None, "zip archive of unknown content"),
}


def open_document(path: str | Path) -> Document:
    """Open an artifact by its contents. Raises :class:`ArtifactError` with a sentence."""
    p = Path(path)
    if not p.exists():
        raise ArtifactError("no such file or folder", path=str(p), hint="check the path")
    try:
        fmt = sniff_path(p)
    except PermissionError as exc:
        raise ArtifactError("permission denied", path=str(p)) from exc
    except OSError as exc:
        raise ArtifactError(f"cannot be read ({exc.strerror})", path=str(p)) from exc
    if fmt is None:
        what = "folder" if p.is_dir() else "file"
        instead = open_instead(p) if p.is_dir() else ""
        if instead:  # e.g. a download folder of GGUF files, an ONNX export folder
            raise UnknownFormatError(
                "this folder is not one model NNEditor opens as a whole (it has no config.json)",
                path=str(p),
                hint=instead,
            )
        raise UnknownFormatError(
            f"this {what} is not a model format NNEditor recognises",
            path=str(p),
            hint="supported: ONNX, safetensors, GGUF, PyTorch (.pt/.pth/.ckpt/.bin, TorchScript, "
            ".pt2), Hugging Face snapshot folders, textual StableHLO, TFLite, Core ML",
        )
    module_name, human = READERS[fmt]
    module = None
    if module_name is not None:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise
    if module is None:
        raise UnsupportedFormatError(
            f"recognised as {_article(human)} {human}; NNEditor cannot open this format yet",
            path=str(p),
            format=fmt,
        )
    with collector_paused():  # readers create many objects at once (see gc_pause)
        doc: Document = module.open_document(p)
    return doc


def _article(noun: str) -> str:
    return "an" if noun[:1].lower() in "aeiou" or noun.startswith(("ONNX", "MLIR")) else "a"
