"""A copy of a vocabulary-only GGUF with another ``tokenizer.ggml.pre`` name.

llama.cpp ships no vocabulary file for some pre-tokenizers (Mistral's "tekken", "gpt-4o",
"lfm2", ...), yet it applies their rules to any byte-level BPE vocabulary that names them. The
token references for those rules are captured (tools/llama_cpp_refs.py) and checked
(tests/integration/test_tokenize_llamacpp.py) on llama-bpe's vocabulary renamed so.

Only files without tensors are rewritten (a vocabulary file holds none), so nothing after the
metadata has an offset to keep.
"""

from __future__ import annotations

import struct
from pathlib import Path

_KEY = b"tokenizer.ggml.pre"
_STRING = 8


def with_pre(src: Path, pre: str, dest: Path) -> Path:
    data = src.read_bytes()
    magic, _version, tensors = struct.unpack_from("<4sIQ", data, 0)
    if magic != b"GGUF" or tensors:
        raise ValueError(f"{src} is not a vocabulary-only GGUF (tensors: {tensors})")
    key = struct.pack("<Q", len(_KEY)) + _KEY + struct.pack("<I", _STRING)
    at = data.find(key)
    if at < 0:
        raise ValueError(f"{src} has no string {_KEY.decode()}")
    start = at + len(key)
    (length,) = struct.unpack_from("<Q", data, start)
    value = pre.encode()
    out = data[:start] + struct.pack("<Q", len(value)) + value + data[start + 8 + length :]
    dest.write_bytes(out)
    return dest
