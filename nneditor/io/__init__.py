"""Byte sources: memory-mapped files, sub-ranges (zip members), range reads, hashing."""

from nneditor.io.source import ByteSource, FileSource, MemorySource, SubSource, open_source

__all__ = ["ByteSource", "FileSource", "MemorySource", "SubSource", "open_source"]
