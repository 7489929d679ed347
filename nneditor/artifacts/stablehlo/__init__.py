"""Textual StableHLO/MLIR modules: lexer, syntax tree and parser (:mod:`.lexer`,
:mod:`.syntax`, :mod:`.parser`), operations as graph nodes (:mod:`.ir`), dense constants
decoded on demand (:mod:`.dense`), the Document (:mod:`.reader`)."""

from nneditor.artifacts.stablehlo.reader import FORMAT, open_document

__all__ = ["FORMAT", "open_document"]
