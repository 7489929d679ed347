"""Tokens of textual MLIR (StableHLO/MHLO/CHLO modules), scanned straight from the file's bytes.

The lexer runs regular expressions over the read-only memory map; it never decodes the whole
file and never builds per-character Python objects. A token is a ``(kind, start, end)`` tuple of
byte offsets; its text is only materialised when the parser asks for it (names, punctuation).

Invariants:
- String literals and the bodies of ``<...>`` constructs (``dense<...>``, ``tensor<...>``,
  ``#stablehlo.xxx<...>``) are skipped by searching for the next quote/bracket, so a 100 MB
  ``dense<"0x...">`` costs one C-level scan and one tuple.
- Every failure is a :class:`LexError` carrying the byte offset; the reader turns it into an
  ``ArtifactError`` that names the line and column.
- Line numbers are counted incrementally in bounded chunks (forward scans are linear in total).
"""

from __future__ import annotations

import re
import sys
from typing import NamedTuple

_WS = re.compile(rb"(?:[ \t\r\n\f\v]+|//[^\n]*)+")
_NL = re.compile(rb"\n")
_TOKEN = re.compile(
    rb"""
    (?:[\ \t\r\n\f\v]+|//[^\n]*)*
    (?:(?P<value>%[A-Za-z0-9_$.\-]+(?:\#[0-9]+)?)
   |(?P<symbol>@[A-Za-z0-9_$.\-]+)
   |(?P<caret>\^[A-Za-z0-9_$.\-]+)
   |(?P<hash>\#[A-Za-z_][A-Za-z0-9_$.\-]*)
   |(?P<bang>![A-Za-z_][A-Za-z0-9_$.\-]*)
   |(?P<number>-?0[xX][0-9A-Fa-f]+|-?[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?)
   |(?P<ident>[A-Za-z_][A-Za-z0-9_$.]*)
   |(?P<punct>->|\{-\#|\#-\}|::|[(){}\[\]<>:,=*+?|\-])
   |(?P<quote>"|@")|(?P<eof>\Z))
    """,
    re.X,
)
_STRING_STOP = re.compile(rb'["\\]')
_ANGLE_STOP = re.compile(rb'[<>"]')

#: Chunk size for newline counting (bounded temporary copies).
_COUNT_CHUNK = 1024 * 1024

EOF = "eof"


class LexError(Exception):
    """A lexical or syntax error at a byte offset (converted to ArtifactError by the reader)."""

    def __init__(self, message: str, offset: int) -> None:
        super().__init__(message)
        self.message = message
        self.offset = offset


class Tok(NamedTuple):
    """A token: kind, byte range, and its text for short tokens ("" for strings and EOF)."""

    kind: str
    start: int
    end: int
    text: str = ""


class Lexer:
    """Pull lexer with arbitrary lookahead over a bytes-like buffer (an mmap view)."""

    def __init__(self, buf: memoryview | bytes) -> None:
        self.buf = buf
        self.size = len(buf)
        self._ahead: list[Tok] = []
        self._pos = 0  # where lexing of the next (not yet buffered) token starts
        self.last_end = 0  # end of the last consumed token
        self._line_pos = 0
        self._line_no = 1
        self._line_start = 0

    # -- tokens -------------------------------------------------------------------------------

    def peek(self, k: int = 0) -> Tok:
        ahead = self._ahead
        if k < len(ahead):
            return ahead[k]
        while len(ahead) <= k:
            if ahead and ahead[-1].kind == EOF:
                return ahead[-1]
            ahead.append(self._lex())
        return ahead[k]

    def next(self) -> Tok:
        tok = self._ahead.pop(0) if self._ahead else self._lex()
        if tok.kind == EOF:
            self._ahead.insert(0, tok)
        else:
            self.last_end = tok.end
        return tok

    def _lex(self) -> Tok:
        buf = self.buf
        m = _TOKEN.match(buf, self._pos)
        if m is None:
            pos = _WS.match(buf, self._pos)
            bad = pos.end() if pos else self._pos
            ch = bytes(buf[bad : bad + 1])
            raise LexError(f"unexpected character {ch.decode('latin-1')!r}", bad)
        kind = m.lastgroup or "punct"
        start = m.start(kind)
        if kind == "quote":  # "..." or @"..." : skipped with a C-level search
            quote = start if buf[start] == 0x22 else start + 1
            end = self.string_end(quote)
            self._pos = end
            return Tok("string" if quote == start else "symbol", start, end)
        end = m.end()
        self._pos = end
        if kind == EOF:
            return Tok(EOF, start, start)
        text = m.group(kind).decode("utf-8", "replace")
        if kind == "value" or kind == "ident":
            text = sys.intern(text)  # SSA and op names repeat at every use: store each once
        return Tok(kind, start, end, text)

    def string_end(self, pos: int) -> int:
        """End offset (after the closing quote) of the string literal starting at ``pos``."""
        i = pos + 1
        while True:
            m = _STRING_STOP.search(self.buf, i)
            if m is None:
                raise LexError("unterminated string literal; the file is truncated or corrupt", pos)
            if self.buf[m.start()] == 0x5C:  # backslash escapes the next byte
                i = m.start() + 2
                continue
            return m.start() + 1

    def take_angle(self) -> tuple[int, int]:
        """Consume a balanced ``<...>`` right after the last consumed token.

        Returns the byte range of the body (between the brackets). ``->`` inside does not close
        it; strings inside are skipped. Large bodies are jumped over with C-level searches.
        """
        self._ahead.clear()
        pos = self.last_end
        if pos >= self.size or self.buf[pos] != 0x3C:  # '<'
            raise LexError("expected '<'", pos)
        depth = 1
        i = pos + 1
        while True:
            m = _ANGLE_STOP.search(self.buf, i)
            if m is None:
                raise LexError(
                    "unterminated '<...>' literal; the closing '>' is missing "
                    "(the file is truncated or corrupt)",
                    pos,
                )
            j = m.start()
            c = self.buf[j]
            if c == 0x22:
                i = self.string_end(j)
                continue
            if c == 0x3C:
                depth += 1
            elif j > 0 and self.buf[j - 1] == 0x2D:  # '->' is an arrow, not a bracket
                pass
            else:
                depth -= 1
                if depth == 0:
                    self._pos = j + 1
                    self.last_end = j + 1
                    return pos + 1, j
            i = j + 1

    def adjacent(self, char: int) -> bool:
        """True if the byte right after the last consumed token is ``char`` (no whitespace)."""
        return self.last_end < self.size and self.buf[self.last_end] == char

    # -- text ---------------------------------------------------------------------------------

    def text(self, tok: Tok | tuple[int, int], limit: int = 4096) -> str:
        start, end = (tok.start, tok.end) if isinstance(tok, Tok) else tok
        if end - start > limit:
            head = bytes(self.buf[start : start + limit]).decode("utf-8", "replace")
            return f"{head}… ({end - start} bytes)"
        return bytes(self.buf[start:end]).decode("utf-8", "replace")

    def squeezed(self, start: int, end: int, limit: int = 512) -> str:
        """Source text with runs of whitespace collapsed, truncated to ``limit`` characters."""
        raw = self.text((start, end), limit)
        return " ".join(raw.split())

    def string_value(self, tok: Tok, limit: int = 1 << 16) -> str:
        """Decoded value of a string token (MLIR escapes: \\n, \\t, \\", \\\\, \\XX hex)."""
        start = tok.start + (1 if tok.kind == "symbol" else 0)
        body_len = tok.end - start - 2
        if body_len > limit:
            return self.text((start + 1, start + 1 + limit)) + f"… ({body_len} bytes)"
        raw = bytes(self.buf[start + 1 : tok.end - 1])
        if b"\\" not in raw:
            return raw.decode("utf-8", "replace")
        out = bytearray()
        i = 0
        while i < len(raw):
            c = raw[i]
            if c != 0x5C or i + 1 >= len(raw):
                out.append(c)
                i += 1
                continue
            nxt = raw[i + 1 : i + 3]
            simple = {ord("n"): 10, ord("t"): 9, ord('"'): 34, ord("\\"): 92}
            if nxt[:1] and nxt[0] in simple:
                out.append(simple[nxt[0]])
                i += 2
            elif len(nxt) == 2 and all(chr(b) in "0123456789abcdefABCDEF" for b in nxt):
                out.append(int(nxt, 16))
                i += 3
            else:
                out.append(c)
                i += 1
        return out.decode("utf-8", "replace")

    def newline_before(self, tok: Tok) -> bool:
        """True if a line break separates ``tok`` from the previously consumed token."""
        return _NL.search(self.buf, self.last_end, tok.start) is not None

    # -- positions ----------------------------------------------------------------------------

    def line_col(self, offset: int) -> tuple[int, int]:
        """1-based (line, column) of a byte offset; forward queries are incremental."""
        offset = max(0, min(offset, self.size))
        if offset < self._line_pos:
            self._line_pos, self._line_no, self._line_start = 0, 1, 0
        pos = self._line_pos
        while pos < offset:
            end = min(offset, pos + _COUNT_CHUNK)
            chunk = bytes(self.buf[pos:end])
            n = chunk.count(b"\n")
            if n:
                self._line_no += n
                self._line_start = pos + chunk.rfind(b"\n") + 1
            del chunk  # keep one chunk alive at a time
            pos = end
        self._line_pos = offset
        return self._line_no, offset - self._line_start + 1
