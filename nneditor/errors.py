"""Typed errors the core raises.

Every error a user can cause with a bad file is an :class:`ArtifactError` whose message is a
sentence saying what is wrong, where (file, byte offset) and what to do. The CLI prints it as
one line and exits 2; the window shows it in a dialog. Nothing else should escape a reader.
"""

from __future__ import annotations


class NNEditorError(Exception):
    """Base class of all errors NNEditor raises on purpose."""


class ArtifactError(NNEditorError):
    """A file or folder could not be read as the artifact it claims to be.

    Attributes:
        format: the format being read ("onnx", "safetensors", ...), or None when unknown.
        path: the file concerned, when known.
        offset: the byte offset where the problem was found, when known.
        detail: the sentence describing the problem.
    """

    def __init__(
        self,
        detail: str,
        *,
        format: str | None = None,
        path: str | None = None,
        offset: int | None = None,
        hint: str | None = None,
    ) -> None:
        self.detail = detail
        self.format = format
        self.path = path
        self.offset = offset
        self.hint = hint
        super().__init__(self._compose())

    def _compose(self) -> str:
        parts = []
        where = []
        if self.path:
            where.append(str(self.path))
        if self.offset is not None:
            where.append(f"byte {self.offset}")
        prefix = f"{self.format.upper()} " if self.format else ""
        head = f"{prefix}{', '.join(where)}: " if where else (f"{prefix}: " if prefix else "")
        parts.append(head + self.detail.rstrip("."))
        if self.hint:
            parts.append(self.hint.rstrip("."))
        return ". ".join(parts) + "."


class UnsupportedFormatError(ArtifactError):
    """The artifact was recognised but NNEditor has no reader for it (yet)."""


class UnknownFormatError(ArtifactError):
    """No reader recognised the artifact's contents."""


class TensorNotFoundError(NNEditorError, KeyError):
    """A tensor name is not in the catalog."""

    def __init__(self, name: str, available: int) -> None:
        self.name = name
        msg = (
            f"no tensor named {name!r} in this artifact ({available} tensors); "
            "run `nneditor tensors PATH` to list the names"
        )
        super().__init__(msg)

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class SliceError(NNEditorError, ValueError):
    """A slice expression does not fit the tensor's shape."""


class EditError(NNEditorError):
    """An edit was refused; the message says why. Nothing was changed."""


class CancelledError(NNEditorError):
    """A job was cancelled by the user."""


def error_sentence(exc: BaseException) -> str:
    """The sentence a person is shown for ``exc``: ours as written, OS errors with the file,
    anything else labelled as an internal error with its type (never a traceback)."""
    if isinstance(exc, NNEditorError):
        return str(exc)
    if isinstance(exc, OSError):
        return f"{exc.strerror or exc}" + (
            f" ({exc.filename})" if getattr(exc, "filename", None) else ""
        )
    return (
        f"Unexpected internal error ({type(exc).__name__}: {exc}). The file may be malformed in a "
        "way NNEditor does not handle yet; please report it."
    )
