"""llama.cpp's unigram tokenizer (``tokenizer.ggml.model = t5``: T5, XLM-RoBERTa, bge-m3,
nomic-embed-text v2), reproduced step by step.

Written here rather than built on ``tokenizers``: its Precompiled normalizer treats a
character followed by several combining marks differently from SentencePiece and llama.cpp
("a" + U+0308 + U+0301 loses the acute), and llama.cpp segments the whole normalized text
at once. The steps follow src/llama-vocab.cpp:

1. Special tokens are split out first: user-defined ones always, control and unknown ones when
   special-token text is parsed; longest token text first.
2. Each remaining fragment is normalized: user-defined token text is kept as is, otherwise the
   longest prefix found in the file's precompiled character map (SentencePiece's XOR-compressed
   double array) is replaced, otherwise one UTF-8 character is copied (an invalid byte becomes
   U+FFFD). Spaces become "▁"; with ``remove_extra_whitespaces`` each run of non-spaces gets
   one "▁" before it and other spaces are dropped; ``add_space_prefix`` puts one before the
   first word.
3. Viterbi over the normalized bytes: at each character, every token (normal, user-defined,
   unused) starting there; user-defined tokens score 0; a character no single token covers
   costs the lowest normal score minus 10 as the unknown token; ties keep the first found;
   a run of unknowns becomes one.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nneditor.tokenize.base import TokenizerError

_NORMAL, _UNKNOWN, _CONTROL, _USER, _UNUSED, _BYTE = 1, 2, 3, 4, 5, 6
_SPACE = "▁".encode()
_REPLACEMENT = "\ufffd".encode()


class Charsmap:
    """SentencePiece's precompiled normalization rules (a double array over UTF-8 bytes, then
    the NUL-terminated replacement strings)."""

    def __init__(self, blob: bytes) -> None:
        if len(blob) < 4:
            raise TokenizerError("the precompiled character map is shorter than its header")
        size = int.from_bytes(blob[:4], "little")
        if size % 4 or 4 + size > len(blob):
            raise TokenizerError("the precompiled character map's array overruns the data")
        self.nodes: list[int] = np.frombuffer(blob, "<u4", size // 4, 4).tolist()
        self.replacements = blob[4 + size :]

    def _base(self, i: int) -> int:
        node = self.nodes[i]
        return (node >> 10) << ((node & (1 << 9)) >> 6)

    def longest(self, data: bytes, start: int) -> tuple[int, bytes]:
        """(bytes matched at ``start``, their replacement); (0, b"") without a match."""
        nodes, n = self.nodes, len(self.nodes)
        index = self._base(0)
        length, value = 0, -1
        for pos in range(start, len(data)):
            c = data[pos]
            if c == 0:
                break
            index ^= c
            if index >= n or (nodes[index] & ((1 << 31) | 0xFF)) != c:
                break
            leaf = (nodes[index] >> 8) & 1
            index ^= self._base(index)
            if index >= n:
                break
            if leaf:
                length, value = pos - start + 1, nodes[index] & ((1 << 31) - 1)
        if not length:
            return 0, b""
        end = self.replacements.find(b"\0", value)
        if value >= len(self.replacements) or end < 0:
            raise TokenizerError("the precompiled character map points outside its strings")
        return length, self.replacements[value:end]


class UgmEncoder:
    """The :class:`~nneditor.tokenize.base.Encoder` of a GGUF unigram vocabulary."""

    def __init__(self, tokens: list[str], scores: np.ndarray, types: np.ndarray, metadata: Any):
        self.tokens = tokens
        self.types = types
        raw = metadata.get("tokenizer.ggml.precompiled_charsmap")
        blob = b""
        if raw is not None and len(raw):
            arr = raw.numpy() if hasattr(raw, "numpy") else np.asarray(list(raw))
            blob = arr.astype(np.uint8).tobytes()
        self.charsmap = Charsmap(blob) if blob else None
        prefix = metadata.get("tokenizer.ggml.add_space_prefix")
        merge = metadata.get("tokenizer.ggml.remove_extra_whitespaces")
        self.prefix = False if prefix is None else bool(prefix)
        self.merge = False if merge is None else bool(merge)
        unk = metadata.get("tokenizer.ggml.unknown_token_id")
        self.unk = int(unk) if isinstance(unk, int) and 0 <= unk < len(tokens) else 2  # T5's
        self.table: dict[bytes, tuple[int, float]] = {}
        normal = [float(scores[i]) for i in range(len(tokens)) if types[i] == _NORMAL]
        self.unknown_score = (min(normal) if normal else 0.0) - 10.0
        for i, t in enumerate(tokens):
            if types[i] in (_NORMAL, _USER, _UNUSED):
                self.table[t.encode()] = (i, 0.0 if types[i] == _USER else float(scores[i]))
        self.longest_token = max((len(k) for k in self.table), default=1)
        self.user = sorted((t.encode() for i, t in enumerate(tokens) if types[i] == _USER), key=len)
        specials = [i for i in range(len(tokens)) if types[i] in (_CONTROL, _USER, _UNKNOWN)]
        self.specials = sorted(specials, key=lambda i: -len(tokens[i].encode()))
        self.lstrip = frozenset(
            i
            for i in specials
            if tokens[i] == "<mask>"
            and str(metadata.get("general.architecture")) in ("nomic-bert-moe", "jina-bert-v3")
        )

    # -- encoding --------------------------------------------------------------------------

    def encode(self, text: str, special: bool) -> list[int]:
        out: list[int] = []
        for part in self._partition(text, special):
            if isinstance(part, int):
                out.append(part)
            else:
                out.extend(self._segment(self.normalize(part.encode("utf-8", "surrogatepass"))))
        return out

    def _partition(self, text: str, special: bool) -> list[str | int]:
        parts: list[str | int] = [text]
        for i in self.specials:
            if not special and self.types[i] != _USER:
                continue
            piece = self.tokens[i]
            if not piece:
                continue
            split: list[str | int] = []
            for part in parts:
                if isinstance(part, int) or piece not in part:
                    split.append(part)
                    continue
                pieces = part.split(piece)
                for k, chunk in enumerate(pieces):
                    if k:
                        split.append(i)
                    if k + 1 < len(pieces) and i in self.lstrip:
                        chunk = chunk.rstrip()
                    if chunk:
                        split.append(chunk)
            parts = split
        return parts

    def normalize(self, data: bytes) -> bytes:
        out = bytearray()
        started = prepended = False
        pos = 0
        while pos < len(data):
            norm, used = self._normalize_prefix(data, pos)
            for c in norm:
                if c != 0x20:
                    if not started:
                        started = True
                        if (self.prefix and not prepended) or self.merge:
                            out += _SPACE
                            prepended = True
                    out.append(c)
                else:
                    started = False
                    if not self.merge:
                        out += _SPACE
            pos += used
        return bytes(out)

    def _normalize_prefix(self, data: bytes, pos: int) -> tuple[bytes, int]:
        for token in reversed(self.user):  # longest first
            if data.startswith(token, pos):
                return token, len(token)
        if self.charsmap is not None:
            length, replacement = self.charsmap.longest(data, pos)
            if length:
                return replacement, length
        n = _utf8_length(data, pos)
        if n:
            return data[pos : pos + n], n
        return _REPLACEMENT, 1

    def _segment(self, data: bytes) -> list[int]:
        size = len(data)
        if not size:
            return []
        best: list[tuple[int, int, float]] = [(self.unk, 0, -np.inf)] * (size + 1)
        best[0] = (self.unk, 0, 0.0)
        table, longest = self.table, self.longest_token
        pos = 0
        while pos < size:
            width = min(_lead_length(data[pos]), size - pos)
            here = best[pos][2]
            single = False
            for end in range(pos + 1, min(size, pos + longest) + 1):
                hit = table.get(data[pos:end])
                if hit is None:
                    continue
                if end - pos == width:
                    single = True
                score = here + hit[1]
                if score > best[end][2]:
                    best[end] = (hit[0], pos, score)
            if not single:
                score = here + self.unknown_score
                if score > best[pos + width][2]:
                    best[pos + width] = (self.unk, pos, score)
            pos += width
        out: list[int] = []
        prev_unknown = False
        at = size
        while True:
            token, start, _score = best[at]
            unknown = token == self.unk
            if not (prev_unknown and unknown):
                out.append(token)
            if start == 0:
                break
            prev_unknown = unknown
            at = start
        out.reverse()
        return out

    # -- decoding --------------------------------------------------------------------------

    def piece(self, token: int) -> str:
        if self.types[token] in (_CONTROL, _USER, _UNKNOWN):
            return self.tokens[token]
        return self.tokens[token].replace("▁", " ")

    def decode(self, ids: list[int], keep_special: bool) -> str:
        parts = [
            self.piece(i) for i in ids if keep_special or self.types[i] not in (_CONTROL, _UNKNOWN)
        ]
        text = "".join(parts)
        if (self.prefix or self.merge) and text.startswith(" "):
            text = text[1:]
        return text


def _lead_length(byte: int) -> int:
    """llama.cpp's unicode_len_utf8: the length a UTF-8 lead byte announces (1 for others)."""
    return (1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4)[byte >> 4]


def _utf8_length(data: bytes, pos: int) -> int:
    """Bytes of the valid UTF-8 character at ``pos``, or 0 when it is not one."""
    n = _lead_length(data[pos])
    if data[pos] >= 0x80 and n == 1:
        return 0  # a continuation byte where a character should start
    if pos + n > len(data):
        return 0
    try:
        data[pos : pos + n].decode("utf-8")
    except UnicodeDecodeError:
        return 0
    return n
