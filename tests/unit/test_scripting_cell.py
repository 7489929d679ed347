"""Notebook-cell semantics of the script worker, run in-process (fast, no subprocess)."""

from __future__ import annotations

import numpy as np
import pytest

from nneditor.scripting.cell import (
    CELL_ERROR,
    CELL_MEMORY,
    CELL_OK,
    bounded_repr,
    check_syntax,
    format_user_traceback,
    json_scalar,
    run_cell,
    type_name,
)


def test_last_expression_is_the_value():
    outcome = run_cell("x = 2\nx * 21", {})
    assert outcome.kind == CELL_OK and outcome.has_value and outcome.value == 42


def test_result_variable_when_last_statement_is_not_an_expression():
    outcome = run_cell("result = [1, 2]\nfor i in range(3):\n    pass", {})
    assert outcome.value == [1, 2]


def test_no_value_without_expression_or_result():
    outcome = run_cell("x = 1", {})
    assert outcome.kind == CELL_OK and not outcome.has_value


def test_expression_value_wins_over_result_variable():
    assert run_cell("result = 1\n2", {}).value == 2


def test_empty_script_is_ok():
    outcome = run_cell("", {})
    assert outcome.kind == CELL_OK and not outcome.has_value


def test_syntax_error_has_line_and_script_file_name():
    outcome = run_cell("a = 1\nb = 2\nc = ]\n", {})
    assert outcome.kind == CELL_ERROR and outcome.error_line == 3
    assert 'File "<script>", line 3' in outcome.error
    assert "SyntaxError" in outcome.error
    assert check_syntax("c = ]").error_line == 1
    assert check_syntax("c = 1") is None


def test_null_byte_in_source_is_an_error_sentence():
    outcome = run_cell("x = 1\x00", {})
    assert outcome.kind == CELL_ERROR
    assert "null bytes" in outcome.error


def test_traceback_keeps_only_script_frames_including_chained():
    code = (
        "def f(x):\n"
        "    raise KeyError(x)\n"
        "try:\n"
        "    np.apply_along_axis(f, 0, np.ones((2, 2)))\n"
        "except KeyError as e:\n"
        "    raise RuntimeError('wrapped') from e\n"
    )
    outcome = run_cell(code, {"np": np})
    assert outcome.kind == CELL_ERROR and outcome.error_line == 6
    text = outcome.error
    assert 'File "<script>", line 4, in <module>' in text
    assert 'File "<script>", line 2, in f' in text
    assert "direct cause" in text and text.rstrip().endswith("RuntimeError: wrapped")
    assert "numpy" not in text.split("KeyError")[0]  # no library frame before the error line
    assert "cell.py" not in text


def test_traceback_shows_source_lines():
    outcome = run_cell("x = 1\ny = x / 0\n", {})
    assert "    y = x / 0" in outcome.error
    assert outcome.error.rstrip().endswith("ZeroDivisionError: division by zero")


def test_memory_error_is_its_own_kind():
    outcome = run_cell("raise MemoryError('boom')", {})
    assert outcome.kind == CELL_MEMORY and outcome.error_line == 1


def test_sys_exit_nonzero_is_an_error():
    outcome = run_cell("import sys\nsys.exit(3)", {})
    assert outcome.kind == CELL_ERROR and outcome.error == "The script called sys.exit(3)."


def test_keyboard_interrupt_raised_by_the_script_is_an_error():
    outcome = run_cell("raise KeyboardInterrupt", {})
    assert outcome.kind == CELL_ERROR and "KeyboardInterrupt" in outcome.error


def test_format_user_traceback_without_script_frames_keeps_the_message():
    try:
        raise ValueError("bad")
    except ValueError as exc:
        text = format_user_traceback(exc)
    assert text == "ValueError: bad\n"


def test_bounded_repr_limits_and_never_raises():
    assert bounded_repr(3.5, 100) == "3.5"
    long = bounded_repr(list(range(100_000)), 500)
    assert len(long) < 600 and long.endswith("more characters not shown)")

    class Bad:
        def __repr__(self) -> str:
            raise RuntimeError("no")

    assert bounded_repr(Bad(), 100).startswith("<Bad ")
    assert bounded_repr([Bad()], 100).startswith("[<Bad ")
    array_text = bounded_repr(np.arange(6).reshape(2, 3), 1000)
    assert array_text == repr(np.arange(6).reshape(2, 3))


def test_type_names():
    assert type_name(1.0) == "float"
    assert type_name(np.zeros(1)) == "numpy.ndarray"
    assert type_name(np.float64(1)) == "numpy.float64"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1, 1),
        (True, True),
        (2.5, 2.5),
        ("s", "s"),
        (np.float32(0.5), 0.5),
        (np.int64(7), 7),
        (np.array(3.0), 3.0),
        (np.zeros(2), None),
        ([1], None),
        (1j, None),
        ("x" * 20_000, None),
    ],
)
def test_json_scalar(value, expected):
    assert json_scalar(value) == expected
