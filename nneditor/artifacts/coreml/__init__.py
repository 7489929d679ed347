"""Core ML .mlmodel files and .mlpackage folders: the protobuf spec read from the wire
(:mod:`.proto`, field numbers in :mod:`.schema`), ML programs and their weight blobs
(:mod:`.mil`), the Document (:mod:`.reader`)."""

from nneditor.artifacts.coreml.reader import FORMAT, open_document

__all__ = ["FORMAT", "open_document"]
