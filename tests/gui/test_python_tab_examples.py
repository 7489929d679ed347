"""The Python tab's Qt-free helpers: .npy header reading, default scripts, line breaking.

Headers are written by NumPy itself (``np.save`` / ``np.lib.format``); damaged ones by hand.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest

from nneditor.ui.python_tab.examples import (
    GENERIC_SCRIPT,
    PARTIAL_SCRIPT,
    default_script,
    read_npy_header,
    softmax_script,
)
from nneditor.ui.python_tab.output import break_long_lines


@pytest.mark.parametrize("version", [(1, 0), (2, 0), (3, 0)])
def test_header_of_every_npy_version(tmp_path: Path, version: tuple[int, int]) -> None:
    array = np.zeros((2, 3, 5), dtype=">i2")
    buffer = io.BytesIO()
    np.lib.format.write_array(buffer, array, version=version)
    path = tmp_path / "a.npy"
    path.write_bytes(buffer.getvalue())
    info = read_npy_header(path)
    assert info is not None
    assert (info.shape, info.dtype, info.kind) == ((2, 3, 5), "int16", "i")


def test_headers_that_are_not_plain_tensors_give_none(tmp_path: Path) -> None:
    structured = tmp_path / "s.npy"
    np.save(structured, np.zeros(3, dtype=[("a", "<f4"), ("b", "<i4")]))
    assert read_npy_header(structured) is None
    objects = tmp_path / "o.npy"
    np.save(objects, np.array([1, "x"], dtype=object), allow_pickle=True)
    info = read_npy_header(objects)
    assert info is not None and info.kind == "O"  # named, never unpickled
    assert default_script(objects, {}, "logits") == GENERIC_SCRIPT


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"PK\x03\x04 an npz",
        b"\x93NUMPY\x01\x00",  # cut inside the header length
        b"\x93NUMPY\x01\x00\x20\x00{'descr': '<f4', 'fortran_order': False, 'sh",
        b"\x93NUMPY\x01\x00\x10\x00__import__('os')",
        b"\x93NUMPY\x02\x00\xff\xff\xff\x7f{}",  # claims a 2 GiB header
        b"\x93NUMPY\x01\x00\x30\x00{'descr': '<f4', 'fortran_order': False, 'shape': (-1,)}",
    ],
)
def test_damaged_headers_give_none_and_the_generic_example(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "bad.npy"
    path.write_bytes(data)
    assert read_npy_header(path) is None
    assert default_script(path, {}, "logits") == GENERIC_SCRIPT


def test_missing_file_gives_the_generic_example(tmp_path: Path) -> None:
    assert read_npy_header(tmp_path / "nope.npy") is None
    assert default_script(tmp_path / "nope.npy", {}, "logits") == GENERIC_SCRIPT


def test_softmax_index_follows_the_rank() -> None:
    assert softmax_script(1).startswith("logits = np.asarray(tensor).astype(np.float64)\n")
    assert "np.asarray(tensor)[-1]." in softmax_script(2)
    assert "np.asarray(tensor)[0, -1]." in softmax_script(3)
    assert "np.asarray(tensor)[0, 0, -1]." in softmax_script(4)


def test_logits_need_a_float_tensor_with_a_logits_name(tmp_path: Path) -> None:
    floats = tmp_path / "f.npy"
    np.save(floats, np.zeros((1, 3, 32), np.float16))
    ints = tmp_path / "i.npy"
    np.save(ints, np.zeros((1, 3, 32), np.int64))
    assert default_script(floats, {"name": "model/Logits"}, "") == softmax_script(3)
    assert default_script(floats, {}, "hidden") == GENERIC_SCRIPT
    assert default_script(ints, {}, "logits") == GENERIC_SCRIPT
    flat = tmp_path / "flat.npy"
    np.save(flat, np.zeros(7, np.float32))
    assert default_script(flat, {"shape": [1, 3, 32]}, "logits") == PARTIAL_SCRIPT
    assert default_script(flat, {"shape": ["batch", 7]}, "x") == GENERIC_SCRIPT


def test_break_long_lines() -> None:
    assert break_long_lines("abc", 0, 3) == "abc"
    assert break_long_lines("abcdefg", 0, 3) == "abc\ndef\ng"
    assert break_long_lines("abcdefg", 2, 3) == "a\nbcd\nefg"  # the line already has 2
    assert break_long_lines("ab\nabcdefg\nx", 1, 3) == "ab\nabc\ndef\ng\nx"
    text = "y" * 10_000
    broken = break_long_lines(text, 0, 2000)
    assert broken.split("\n") == ["y" * 2000] * 5
