"""TensorFlow Lite flatbuffers: schema field slots and enums (:mod:`.schema`), the Document
with byte-range and sparse tensors (:mod:`.reader`)."""

from nneditor.artifacts.tflite.reader import FORMAT, open_document

__all__ = ["FORMAT", "open_document"]
