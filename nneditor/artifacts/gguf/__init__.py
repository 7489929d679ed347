"""GGUF files (llama.cpp): a lazy index over the header, metadata and tensor table
(:mod:`.index`), string arrays read on demand (:mod:`.arrays`), the Document (:mod:`.reader`)."""

from nneditor.artifacts.gguf.reader import open_document

__all__ = ["open_document"]
