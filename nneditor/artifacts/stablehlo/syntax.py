"""Token-level helpers, types and attributes of textual MLIR (shared by the op parser).

Invariants:
- Attribute values become plain Python (numbers, strings, lists, dicts) or text; ``dense<...>``
  becomes a :class:`DenseLit` with the byte range of its payload, never a materialised value.
- Nesting is bounded (``MAX_DEPTH``), so hostile input cannot exhaust the Python stack.
"""

from __future__ import annotations

import re
from typing import Any

from nneditor.artifacts.stablehlo.ir import (
    ELEMENT_DTYPES,
    MAX_DEPTH,
    DenseLit,
    DimensionError,
    FuncType,
    TypeRef,
    parse_tensor_type,
)
from nneditor.artifacts.stablehlo.lexer import EOF, Lexer, LexError, Tok

#: Identifiers that introduce a ``<...>`` type.
ANGLE_TYPES = {"tensor", "memref", "vector", "tuple", "complex"}
#: Attribute keywords followed by ``<...>``.
ANGLE_ATTRS = {"dense", "dense_resource", "array", "sparse", "affine_map", "affine_set", "opaque"}


class SyntaxParser:
    """Token helpers plus type and attribute parsing over a :class:`Lexer`."""

    def __init__(self, buf: memoryview | bytes) -> None:
        self.lx = Lexer(buf)
        self.type_aliases: dict[str, TypeRef] = {}
        self._depth = 0

    def err(self, message: str, tok: Tok | None = None) -> LexError:
        tok = tok or self.lx.peek()
        found = "the end of the file" if tok.kind == EOF else repr(self.lx.text(tok, 40))
        return LexError(f"{message}, found {found}", tok.start)

    @staticmethod
    def is_punct(tok: Tok, text: str) -> bool:
        return tok.text == text and tok.kind == "punct"

    def at(self, text: str, k: int = 0) -> bool:
        tok = self.lx.peek(k)
        return tok.text == text and tok.kind == "punct"

    def accept(self, text: str) -> bool:
        if self.at(text):
            self.lx.next()
            return True
        return False

    def at_word(self, word: str, k: int = 0) -> bool:
        tok = self.lx.peek(k)
        return tok.text == word and tok.kind == "ident"

    def expect(self, text: str, what: str = "") -> Tok:
        if not self.at(text):
            raise self.err(f"expected '{text}'{' ' + what if what else ''}")
        return self.lx.next()

    def word(self, tok: Tok) -> str:
        return tok.text or self.lx.text(tok, 256)

    def _enter(self, tok: Tok) -> None:
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise LexError(
                f"nesting is deeper than {MAX_DEPTH} levels; the file is not a sane module",
                tok.start,
            )

    def _leave(self) -> None:
        self._depth -= 1

    def _symbol(self, tok: Tok) -> str:
        if self.lx.buf[tok.start + 1] == 0x22:
            return self.lx.string_value(tok)
        return self.word(tok)[1:]

    def _skip_loc(self) -> None:
        self.lx.next()
        if not self.at("("):
            return
        depth = 0
        while True:
            tok = self.lx.next()
            if tok.kind == EOF:
                raise self.err("unterminated loc(...)", tok)
            if self.is_punct(tok, "("):
                depth += 1
            elif self.is_punct(tok, ")"):
                depth -= 1
                if depth == 0:
                    return

    def _type_section(self) -> tuple[list[TypeRef], FuncType | None]:
        """``types`` or ``(types) -> types`` or ``type -> type``; returns (types, functype)."""
        if self.accept("("):
            ins = self._type_list(")")
        else:
            ins = [self.type()]
            while self.at(",") and self._type_follows(1):
                self.lx.next()
                ins.append(self.type())
        if not self.accept("->"):
            return ins, None
        outs = self._type_list(")") if self.accept("(") else [self.type()]
        return [], FuncType(ins, outs)

    def _type_follows(self, k: int) -> bool:
        tok = self.lx.peek(k)
        if tok.kind == "bang":
            return True
        if tok.kind == "punct":
            return self.is_punct(tok, "(")
        return tok.kind == "ident" and self._is_type_word(self.word(tok))

    @staticmethod
    def _is_type_word(word: str) -> bool:
        return (
            word in ANGLE_TYPES
            or word in ELEMENT_DTYPES
            or word in ("index", "none")
            or bool(re.fullmatch(r"[su]?i[0-9]+|f[0-9]+\w*|bf16|tf32", word))
        )

    def _type_list(self, close: str) -> list[TypeRef]:
        out: list[TypeRef] = []
        while not self.accept(close):
            out.append(self.type())
            if self.at("{"):
                self.attr_dict()  # result attributes in function signatures
            if not self.accept(","):
                self.expect(close, "to close a type list")
                break
        return out

    def type(self) -> TypeRef:
        tok = self.lx.next()
        word = self.word(tok)
        if tok.kind == "ident":
            if word in ANGLE_TYPES and self.lx.adjacent(0x3C):
                start, end = self.lx.take_angle()
                try:
                    return parse_tensor_type(word, self.lx.text((start, end), 1 << 16))
                except DimensionError as exc:
                    raise LexError(str(exc), start) from None
            if self._is_type_word(word):
                return TypeRef(
                    word, ELEMENT_DTYPES.get(word), () if word in ELEMENT_DTYPES else None
                )
        elif tok.kind == "bang":
            if self.lx.adjacent(0x3C):
                start, end = self.lx.take_angle()
                return TypeRef(f"{word}<{self.lx.squeezed(start, end)}>")
            return self.type_aliases.get(word, TypeRef(word))
        elif self.is_punct(tok, "("):
            ins = self._type_list(")")
            if self.accept("->"):
                outs = self._type_list(")") if self.accept("(") else [self.type()]
                return TypeRef(str(FuncType(ins, outs)))
            return TypeRef("(" + ", ".join(t.text for t in ins) + ")")
        raise self.err("expected a type", tok)

    def attr_dict(self) -> dict[str, Any]:
        open_tok = self.expect("{")
        self._enter(open_tok)
        out: dict[str, Any] = {}
        while not self.accept("}"):
            key = self.lx.next()
            if key.kind == "string":
                name = self.lx.string_value(key, 256)
            elif key.kind in ("ident", "symbol", "hash"):
                name = self.word(key)
            else:
                raise self.err("expected an attribute name", key)
            out[name] = self.attr_value() if self.accept("=") else True
            if not self.accept(","):
                self.expect("}", "to close the attribute dictionary")
                break
        self._leave()
        return out

    def attr_value(self, allow_type: bool = True) -> Any:  # noqa: C901 - a dispatch table
        tok = self.lx.peek()
        self._enter(tok)
        try:
            return self._attr_value(tok, allow_type)
        finally:
            self._leave()

    def _attr_value(self, tok: Tok, allow_type: bool) -> Any:
        word = self.word(tok) if tok.kind in ("ident", "punct", "number", "hash", "symbol") else ""
        if tok.kind == "punct" and word == "[":
            self.lx.next()
            items = []
            while not self.accept("]"):
                items.append(self.attr_value())
                if not self.accept(","):
                    self.expect("]", "to close the array")
                    break
            return items
        if tok.kind == "punct" and word == "{":
            return self.attr_dict()
        if tok.kind == "punct" and word == "(":
            return self._paren_attr()
        if tok.kind == "string":
            self.lx.next()
            value: Any = self.lx.string_value(tok)
            return self._typed(value, allow_type)
        if tok.kind == "number":
            self.lx.next()
            value = word if word.lower().lstrip("-").startswith("0x") else _number(word)
            return self._typed(value, allow_type)
        if tok.kind == "ident" and word in ("true", "false"):
            self.lx.next()
            return word == "true"
        if tok.kind == "ident" and word in ("unit",):
            self.lx.next()
            return True
        if tok.kind == "ident" and word in ANGLE_ATTRS and self.at("<", 1):
            self.lx.next()
            start, end = self.lx.take_angle()
            value = self._angle_attr(word, start, end)
            if isinstance(value, DenseLit) and allow_type and self.accept(":"):
                value.type = self.type()
            return value
        if tok.kind == "ident" and self._is_type_word(word):
            return self.type().text
        if tok.kind == "ident" and word == "loc" and self.at("(", 1):
            start = tok.start
            self._skip_loc()
            return self.lx.squeezed(start, self.lx.last_end)
        if tok.kind in ("hash", "bang"):
            self.lx.next()
            if self.lx.adjacent(0x3C):
                start, end = self.lx.take_angle()
                return f"{word}<{self.lx.squeezed(start, end)}>"
            return word
        if tok.kind == "symbol":
            self.lx.next()
            text = "@" + self._symbol(tok)
            while self.accept("::"):
                text += "::" + self.word(self.lx.next())
            return text
        if tok.kind == "ident":
            self.lx.next()
            return word
        raise self.err("expected an attribute value")

    def _typed(self, value: Any, allow_type: bool) -> Any:
        if allow_type and self.at(":") and self._type_follows(1):
            self.lx.next()
            self.type()
        return value

    def _paren_attr(self) -> Any:
        """A function type ``(t) -> t`` or a parenthesised value list (complex numbers)."""
        if self._type_follows(1) or self.at(")", 1):
            self.lx.next()
            ins = self._type_list(")")
            if self.accept("->"):
                outs = self._type_list(")") if self.accept("(") else [self.type()]
                return FuncType(ins, outs)
            return "(" + ", ".join(t.text for t in ins) + ")"
        start = self.lx.next().start
        items = []
        while not self.accept(")"):
            items.append(self.attr_value())
            if not self.accept(","):
                self.expect(")")
                break
        return self.lx.squeezed(start, self.lx.last_end) if len(items) != 1 else items[0]

    def _angle_attr(self, word: str, start: int, end: int) -> Any:
        if word == "dense":
            return self._dense(start, end)
        if word == "dense_resource":
            return DenseLit(
                "resource", start, end, resource=self.lx.text((start, end), 256).strip()
            )
        if word == "array" and end - start <= 1 << 16:
            body = self.lx.text((start, end))
            if ":" not in body:
                return []
            values = [v.strip() for v in body.split(":", 1)[1].split(",") if v.strip()]
            return [_number(v) if _NUMBER.fullmatch(v) else v for v in values]
        return f"{word}<{self.lx.squeezed(start, end)}>"

    def _dense(self, start: int, end: int) -> DenseLit:
        buf = self.lx.buf
        i = start
        while i < end and buf[i] in b" \t\r\n":
            i += 1
        j = end
        while j > i and buf[j - 1] in b" \t\r\n":
            j -= 1
        if i == j:
            return DenseLit("list", i, j)
        head = bytes(buf[i : min(j, i + 3)])
        if head[:1] == b'"':
            if head[1:3] in (b"0x", b"0X") and buf[j - 1] == 0x22:
                return DenseLit("hex", i + 3, j - 1)
            return DenseLit("string", i, j)
        if head[:1] == b"[":
            return DenseLit("list", i, j)
        return DenseLit("splat", i, j)


_NUMBER = re.compile(r"-?[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?")


def _number(text: str) -> int | float | str:
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return text
