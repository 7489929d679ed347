"""Run a script like a notebook cell and describe what it produced.

The script is compiled with :mod:`ast` under the file name ``<script>``. If its last statement
is an expression, that expression is evaluated separately and its value is the cell's value;
otherwise (or when that value is ``None``) a variable named ``result`` is the value, if defined.

Invariants:
- Tracebacks show the script's own frames only (file name ``<script>``): neither the worker's
  frames nor those inside libraries the script called.
- A ``repr`` is bounded in length and never raises: a failing ``__repr__`` is described.
- Only the standard library is imported here.
"""

from __future__ import annotations

import ast
import linecache
import reprlib
import traceback
from dataclasses import dataclass, field
from types import CodeType
from typing import Any

SCRIPT_FILENAME = "<script>"
RESULT_NAME = "result"

# Outcome kinds.
CELL_OK = "ok"
CELL_ERROR = "error"
CELL_MEMORY = "memory"


@dataclass
class CellOutcome:
    """What running a cell produced: a value, or an error with its user-facing text."""

    kind: str = CELL_OK
    value: Any = None
    has_value: bool = False
    error: str | None = None
    error_line: int | None = None
    notes: list[str] = field(default_factory=list)


def compile_cell(code: str) -> tuple[CodeType, CodeType | None]:
    """Compile ``code`` into (body, last expression or None). Raises SyntaxError/ValueError."""
    tree = ast.parse(code, SCRIPT_FILENAME, "exec")
    last: CodeType | None = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        expr = tree.body.pop()
        assert isinstance(expr, ast.Expr)
        last = compile(ast.Expression(expr.value), SCRIPT_FILENAME, "eval")
    body = compile(tree, SCRIPT_FILENAME, "exec")
    return body, last


def check_syntax(code: str) -> CellOutcome | None:
    """The error outcome if ``code`` does not compile, else None."""
    try:
        compile_cell(code)
    except (SyntaxError, ValueError) as exc:
        return _syntax_outcome(exc)
    return None


def register_source(code: str) -> None:
    """Make ``<script>`` source lines available to tracebacks and :mod:`inspect`."""
    linecache.cache[SCRIPT_FILENAME] = (
        len(code),
        None,
        code.splitlines(keepends=True),
        SCRIPT_FILENAME,
    )


def run_cell(code: str, namespace: dict[str, Any]) -> CellOutcome:
    """Execute ``code`` in ``namespace`` and return its outcome; never raises for user errors."""
    register_source(code)
    try:
        body, last = compile_cell(code)
    except (SyntaxError, ValueError) as exc:
        return _syntax_outcome(exc)
    try:
        exec(body, namespace)
        value = eval(last, namespace) if last is not None else None
    except SystemExit as exc:
        return _exit_outcome(exc, namespace)
    except MemoryError as exc:
        return CellOutcome(CELL_MEMORY, error=format_user_traceback(exc), error_line=_line(exc))
    except BaseException as exc:  # KeyboardInterrupt included: the script raised it
        return CellOutcome(CELL_ERROR, error=format_user_traceback(exc), error_line=_line(exc))
    return _value_outcome(value, namespace)


def _value_outcome(value: Any, namespace: dict[str, Any]) -> CellOutcome:
    if value is not None:
        return CellOutcome(value=value, has_value=True)
    if RESULT_NAME in namespace:
        return CellOutcome(value=namespace[RESULT_NAME], has_value=True)
    return CellOutcome()


def _exit_outcome(exc: SystemExit, namespace: dict[str, Any]) -> CellOutcome:
    if exc.code in (None, 0):
        outcome = _value_outcome(None, namespace)
        outcome.notes.append(f"The script called sys.exit({exc.code!r}); it ended there.")
        return outcome
    return CellOutcome(
        CELL_ERROR,
        error=f"The script called sys.exit({exc.code!r}).",
        error_line=_line(exc),
    )


def _syntax_outcome(exc: SyntaxError | ValueError) -> CellOutcome:
    if isinstance(exc, SyntaxError):
        text = "".join(traceback.format_exception_only(type(exc), exc))
        return CellOutcome(CELL_ERROR, error=text, error_line=exc.lineno)
    return CellOutcome(CELL_ERROR, error=f"The script cannot be compiled: {exc}.")


def format_user_traceback(exc: BaseException) -> str:
    """Format ``exc`` showing only frames of the script (``<script>``), chained errors included.

    The worker's frames and those of libraries the script called are left out; the exception
    line still carries the library's message.
    """
    te = traceback.TracebackException.from_exception(exc)
    _keep_script_frames(te, set())
    return "".join(te.format())


def _keep_script_frames(te: traceback.TracebackException, seen: set[int]) -> None:
    if id(te) in seen:
        return
    seen.add(id(te))
    frames = [f for f in te.stack if f.filename == SCRIPT_FILENAME]
    te.stack = traceback.StackSummary.from_list(frames)
    for chained in (te.__cause__, te.__context__):
        if chained is not None:
            _keep_script_frames(chained, seen)


def _line(exc: BaseException) -> int | None:
    """The line of the script's innermost frame in ``exc``'s traceback."""
    line = None
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == SCRIPT_FILENAME:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def type_name(value: Any) -> str:
    """``float`` for builtins, ``module.QualName`` otherwise (``numpy.ndarray``)."""
    t = type(value)
    if t.__module__ == "builtins":
        return t.__qualname__
    return f"{t.__module__}.{t.__qualname__}"


def bounded_repr(value: Any, max_chars: int) -> str:
    """``repr(value)`` limited to about ``max_chars`` characters; never raises."""
    r = reprlib.Repr()
    r.maxlevel = 6
    r.maxlist = r.maxtuple = r.maxset = r.maxfrozenset = r.maxdeque = r.maxarray = 1000
    r.maxdict = 1000
    r.maxstring = r.maxother = r.maxlong = max(40, max_chars)
    try:
        text = r.repr(value)
    except Exception as exc:
        return f"<{type_name(value)} object; repr() failed: {type(exc).__name__}: {exc}>"
    if len(text) > max_chars:
        cut = len(text) - max_chars
        text = text[:max_chars] + f"… ({cut:,} more characters not shown)"
    return text


def json_scalar(value: Any, max_chars: int = 10_000) -> bool | int | float | str | None:
    """The value as a JSON scalar when it is a plain or numpy scalar, else None."""
    if isinstance(value, str):
        return value if len(value) <= max_chars else None
    if isinstance(value, bool | int | float):
        return value
    item = getattr(value, "item", None)
    if callable(item) and getattr(value, "shape", None) == ():
        try:
            plain = item()
        except Exception:
            return None
        if isinstance(plain, bool | int | float):
            return plain
    return None
