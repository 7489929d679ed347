"""Recursive-descent parser for textual MLIR modules of the StableHLO family.

Produces a small intermediate form (:class:`Module` -> :class:`Func` -> :class:`Region` ->
:class:`Block` -> :class:`Op`) that ``stablehlo.py`` turns into the document model. It accepts
the pretty form of ops (``%0 = stablehlo.add %a, %b : tensor<4xf32>``), the generic form
(``%0 = "stablehlo.add"(%a, %b) : (...) -> ...``), ``module`` / ``func.func`` (pretty or
generic), regions with block arguments, attribute dictionaries and properties, aliases and the
trailing ``{-# dialect_resources #-}`` section.

Invariants:
- Pretty ops have per-op syntax; they are read with a generic token walk: ``%x`` operands,
  ``name = value`` attributes, regions ``{...}``, a type section after the first top-level
  ``:``. An op ends at a line break followed by something that starts an op (a result, a
  dotted op name, ``return``/``call``, a quoted generic op, a block label) or at the ``}``
  closing its region; anything else on the next line (``cond {``, ``reducer(...)``) continues it.
- ``dense<...>`` bodies are never materialised: a :class:`DenseLit` records their byte range.
- Nesting is bounded (``MAX_DEPTH``), so hostile input cannot exhaust the Python stack.
"""

from __future__ import annotations

from typing import Any

from nneditor.artifacts.stablehlo.ir import (
    Block,
    Func,
    FuncType,
    Module,
    Op,
    Region,
    TypeRef,
)
from nneditor.artifacts.stablehlo.lexer import EOF, LexError, Tok
from nneditor.artifacts.stablehlo.syntax import SyntaxParser

#: Bare (undotted) op names of the func dialect's default namespace.
_BARE_OPS = {"return", "call", "call_indirect", "constant"}


class Parser(SyntaxParser):
    """Parses one file. ``parse()`` returns a :class:`Module`; errors raise :class:`LexError`."""

    def parse(self) -> Module:
        mod = Module()
        seen_module = False
        while True:
            tok = self.lx.peek()
            if tok.kind == EOF:
                return mod
            if tok.kind in ("hash", "bang") and self.at("=", 1):
                self._alias(mod)
            elif self.is_punct(tok, "{-#"):
                self._resources(mod)
            elif tok.kind == "ident" and self.word(tok) in ("module", "builtin.module"):
                if seen_module:
                    raise self.err("a second top-level module is not supported")
                seen_module = True
                self._module(mod)
            elif tok.kind == "ident" and self.word(tok) == "func.func":
                mod.funcs.append(self._func())
            elif tok.kind == "string" or tok.kind == "value":
                op = self.op()
                self._absorb_generic(mod, op)
            else:
                raise self.err(
                    "expected 'module', 'func.func' or an alias definition at the top level"
                )

    def _alias(self, mod: Module) -> None:
        tok = self.lx.next()
        name = self.word(tok)
        self.expect("=")
        if tok.kind == "bang":
            self.type_aliases[name] = self.type()
            mod.aliases[name] = self.type_aliases[name].text
        else:
            start = self.lx.peek().start
            self.attr_value()
            mod.aliases[name] = self.lx.squeezed(start, self.lx.last_end)

    def _resources(self, mod: Module) -> None:
        self.lx.next()
        while not self.accept("#-}"):
            tok = self.lx.next()
            if tok.kind == EOF:
                raise self.err("unterminated '{-#' resource section; '#-}' is missing", tok)
            if tok.kind == "ident" and self.word(tok) == "builtin" and self.accept(":"):
                self.expect("{")
                while not self.accept("}"):
                    key = self.lx.next()
                    self.expect(":")
                    blob = self.lx.next()
                    if blob.kind != "string":
                        raise self.err("expected a quoted hex blob in dialect_resources", blob)
                    name = self.lx.string_value(key) if key.kind == "string" else self.word(key)
                    mod.resources[name] = (blob.start + 1, blob.end - 1)
                    self.accept(",")

    def _module(self, mod: Module) -> None:
        self.lx.next()
        if self.lx.peek().kind == "symbol":
            mod.name = self._symbol(self.lx.next())
        if self.lx.peek().kind == "ident" and self.word(self.lx.peek()) == "attributes":
            self.lx.next()
            mod.attrs.update(self.attr_dict())
        open_tok = self.expect("{", "to open the module body")
        self._enter(open_tok)
        while not self.accept("}"):
            tok = self.lx.peek()
            if tok.kind == EOF:
                raise LexError(
                    "the module's '{' is never closed; the file is truncated", open_tok.start
                )
            if tok.kind == "ident" and self.word(tok) == "func.func":
                mod.funcs.append(self._func())
            elif tok.kind == "ident" and self.word(tok) in ("module", "builtin.module"):
                self._module(mod)  # nested module: flatten its functions
            else:
                self._absorb_generic(mod, self.op())
        self._leave()

    def _absorb_generic(self, mod: Module, op: Op) -> None:
        if op.name == "func.func":
            mod.funcs.append(self._generic_func(op))
        elif op.name == "builtin.module":
            mod.name = mod.name or str(op.attrs.get("sym_name", ""))
            for _label, region in op.regions:
                for block in region.blocks:
                    for inner in block.ops:
                        self._absorb_generic(mod, inner)
        else:
            mod.other_ops.append(op)

    def _func(self) -> Func:
        start = self.lx.next().start
        visibility = "public"
        tok = self.lx.peek()
        if tok.kind == "ident" and self.word(tok) in ("public", "private", "nested"):
            visibility = self.word(self.lx.next())
        tok = self.lx.next()
        if tok.kind != "symbol":
            raise self.err("expected the function name (@name) after 'func.func'", tok)
        name = self._symbol(tok)
        self.expect("(", "to open the argument list")
        args: list[tuple[str, TypeRef, dict[str, Any]]] = []
        while not self.accept(")"):
            arg_name = ""
            if self.lx.peek().kind == "value":
                arg_name = self.word(self.lx.next())
                self.expect(":", "after the argument name")
            arg_type = self.type()
            arg_attrs = self.attr_dict() if self.at("{") else {}
            if self.at_word("loc"):
                self._skip_loc()
            args.append((arg_name or f"%arg{len(args)}", arg_type, arg_attrs))
            if not self.accept(","):
                self.expect(")", "to close the argument list")
                break
        results: list[tuple[TypeRef, dict[str, Any]]] = []
        if self.accept("->"):
            if self.accept("("):
                while not self.accept(")"):
                    rtype = self.type()
                    results.append((rtype, self.attr_dict() if self.at("{") else {}))
                    if not self.accept(","):
                        self.expect(")", "to close the result list")
                        break
            else:
                results.append((self.type(), {}))
        attrs: dict[str, Any] = {}
        if self.lx.peek().kind == "ident" and self.word(self.lx.peek()) == "attributes":
            self.lx.next()
            attrs = self.attr_dict()
        body = None
        if self.at("{"):
            body = self.region([(a[0], a[1]) for a in args])
        if self.at_word("loc"):
            self._skip_loc()
        return Func(name, visibility, args, results, body, attrs, start)

    def _generic_func(self, op: Op) -> Func:
        ftype = op.attrs.get("function_type")
        ins = ftype.inputs if isinstance(ftype, FuncType) else []
        outs = ftype.results if isinstance(ftype, FuncType) else []
        body = op.regions[0][1] if op.regions else None
        entry = body.blocks[0].args if body and body.blocks else []
        arg_attrs = op.attrs.get("arg_attrs") or []
        res_attrs = op.attrs.get("res_attrs") or []
        args = []
        for i, t in enumerate(ins):
            name = entry[i][0] if i < len(entry) else f"%arg{i}"
            a = arg_attrs[i] if i < len(arg_attrs) and isinstance(arg_attrs[i], dict) else {}
            args.append((name, t, a))
        results = [
            (t, res_attrs[i] if i < len(res_attrs) and isinstance(res_attrs[i], dict) else {})
            for i, t in enumerate(outs)
        ]
        name = str(op.attrs.get("sym_name", f"func{op.offset}"))
        visibility = str(op.attrs.get("sym_visibility", "public"))
        rest = {
            k: v
            for k, v in op.attrs.items()
            if k not in ("function_type", "sym_name", "sym_visibility", "arg_attrs", "res_attrs")
        }
        return Func(name, visibility, args, results, body, rest, op.offset)

    # -- regions and ops ----------------------------------------------------------------------

    def region(self, entry_args: list[tuple[str, TypeRef | None]] | None = None) -> Region:
        open_tok = self.expect("{", "to open a region")
        self._enter(open_tok)
        blocks: list[Block] = []
        block = Block("", list(entry_args or []))
        while True:
            tok = self.lx.peek()
            if tok.kind == EOF:
                raise LexError(
                    "a region's '{' is never closed; the file is truncated", open_tok.start
                )
            if self.is_punct(tok, "}"):
                self.lx.next()
                break
            if tok.kind == "caret":
                if block.ops or block.label:
                    blocks.append(block)
                block = Block(self.word(self.lx.next()), [])
                if self.accept("("):
                    while not self.accept(")"):
                        name = self.word(self.lx.next())
                        self.expect(":", "after a block argument name")
                        block.args.append((name, self.type()))
                        if self.at_word("loc"):
                            self._skip_loc()
                        if not self.accept(","):
                            self.expect(")", "to close the block arguments")
                            break
                self.expect(":", "after the block label")
                continue
            block.ops.append(self.op())
        blocks.append(block)
        self._leave()
        return Region(blocks)

    def op(self) -> Op:
        first = self.lx.peek()
        line, col = self.lx.line_col(first.start)
        results = self._results()
        tok = self.lx.peek()
        if tok.kind == "string":
            self.lx.next()
            op = Op(self.lx.string_value(tok, 256), results, first.start, generic=True)
            self._generic_rest(op)
        elif tok.kind == "ident":
            self.lx.next()
            op = Op(self.word(tok), results, first.start)
            self._pretty_rest(op)
        else:
            raise self.err("expected an operation name")
        op.line, op.col = line, col
        return op

    def _results(self) -> list[str]:
        names: list[str] = []
        while self.lx.peek().kind == "value":
            name = self.word(self.lx.next())
            count = 1
            if self.at(":"):
                self.lx.next()
                num = self.lx.next()
                if num.kind != "number":
                    raise self.err("expected a result count after ':'", num)
                text = self.word(num)
                if not text.isdigit() or len(text) > 7 or int(text) > 1 << 20:
                    raise LexError(
                        f"an operation claims {self.lx.text(num, 24)!r} results; expected a "
                        f"count from 1 to {1 << 20}",
                        num.start,
                    )
                count = int(text)
            names.extend([name] if count == 1 else [f"{name}#{i}" for i in range(count)])
            if not self.accept(","):
                break
        if names:
            self.expect("=", "after the result names")
        return names

    def _generic_rest(self, op: Op) -> None:
        self.expect("(", "to open the operand list of a generic operation")
        while not self.accept(")"):
            tok = self.lx.next()
            if tok.kind != "value":
                raise self.err("expected an operand (%name)", tok)
            op.operands.append(self.word(tok))
            if not self.accept(","):
                self.expect(")", "to close the operand list")
                break
        if self.accept("["):  # successors
            while not self.accept("]"):
                if self.lx.next().kind == EOF:  # next() stays at the end: stop, do not spin
                    raise self.err("unterminated successor list '[...]'")
        if self.at("<") and self.at("{", 1):
            self.lx.next()
            op.attrs.update(self.attr_dict())
            self.expect(">", "to close the properties")
        if self.at("(") and self.at("{", 1):
            self.lx.next()
            while True:
                op.regions.append((f"region{len(op.regions)}", self.region()))
                if not self.accept(","):
                    break
            self.expect(")", "to close the region list")
        if self.at("{"):
            op.attrs.update(self.attr_dict())
        self.expect(":", "before the type of a generic operation")
        op.types, op.functype = self._type_section()
        if self.at_word("loc"):
            self._skip_loc()

    def _pretty_rest(self, op: Op) -> None:  # noqa: C901 - one token walk, kept in one place
        depth = 0
        bracket = -1
        pending: list[tuple[str, TypeRef | None]] = []
        last_word = ""
        while True:
            tok = self.lx.peek()
            if tok.kind == EOF:
                if depth:
                    raise self.err("unbalanced parentheses in an operation")
                return
            text = self.word(tok) if tok.kind in ("punct", "ident") else ""
            if depth == 0 and (
                text == "}" or (self.lx.newline_before(tok) and self._starts_op(tok))
            ):
                return
            if tok.kind == "punct":
                if text == "{":
                    if self._looks_like_region():
                        name = last_word or f"region{len(op.regions)}"
                        if last_word and op.positional and op.positional[-1] == last_word:
                            op.positional.pop()  # the word names the region, not an argument
                        op.regions.append((name, self.region(pending)))
                        last_word = ""
                    else:
                        op.attrs.update(self.attr_dict())
                    continue
                if text == "}":  # a stray '}' inside parentheses
                    raise self.err("unbalanced '}' inside an operation")
                self.lx.next()
                if text in ("(", "["):
                    if depth == 0 and text == "[":
                        bracket = tok.start  # e.g. slice "[0:2, 1:4]": kept as text
                    depth += 1
                elif text in (")", "]"):
                    depth -= 1
                    if depth < 0:
                        raise self.err("unbalanced ')' in an operation", tok)
                    if depth == 0 and text == "]" and bracket >= 0:
                        op.positional.append(self.lx.squeezed(bracket, tok.end))
                        bracket = -1
                elif text == ":" and depth == 0:
                    op.types, op.functype = self._type_section()
                    for i, (name, t) in enumerate(pending):
                        if t is None and i < len(op.types):
                            pending[i] = (name, op.types[i])
                continue
            if tok.kind == "value":
                self.lx.next()
                name = self.word(tok)
                if self.at("="):
                    self.lx.next()
                    pending.append((name, None))
                elif depth > 0 and self.at(":"):
                    self.lx.next()
                    pending.append((name, self.type()))
                else:
                    op.operands.append(name)
                continue
            if tok.kind == "ident" and text == "loc" and self.at("(", 1):
                self._skip_loc()
                continue
            if tok.kind == "ident" and self.at("=", 1):
                self.lx.next()
                self.lx.next()
                start = self.lx.peek().start
                value = self.attr_value(allow_type=False)
                joined = False  # dot_general "[1] x [0]", convolution "[b, 0, f]x[...]->[...]"
                while self.at_word("x") or self.at("->"):
                    self.lx.next()
                    self.attr_value(allow_type=False)
                    joined = True
                op.attrs[text] = self.lx.squeezed(start, self.lx.last_end) if joined else value
                continue
            if tok.kind == "ident" and not (self.at("<", 1) and self.lx.peek(1).start == tok.end):
                self.lx.next()
                if depth == 0:
                    last_word = text
                    op.positional.append(text)
                continue
            value = self.attr_value(allow_type=False)
            if depth == 0:
                op.positional.append(value)

    def _starts_op(self, tok: Tok) -> bool:
        if tok.kind in ("value", "string", "caret"):
            return True
        if tok.kind == "ident":
            word = self.word(tok)
            return "." in word or word in _BARE_OPS
        return False

    def _looks_like_region(self) -> bool:
        nxt, after = self.lx.peek(1), self.lx.peek(2)
        if nxt.kind in ("caret", "value"):
            return True
        if nxt.kind == "string":
            return self.is_punct(after, "(")
        if nxt.kind == "ident":
            return not (
                self.is_punct(after, "=") or self.is_punct(after, ",") or self.is_punct(after, "}")
            )
        return False
