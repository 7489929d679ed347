"""Logical dtypes: the ml_dtypes types join on first need, with the sizes ml_dtypes gives."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from nneditor.tensors import dtypes


def test_sizes_known_without_ml_dtypes_equal_its_own() -> None:
    ml_dtypes = pytest.importorskip("ml_dtypes")
    for name in dtypes._ML_DTYPES:
        want = np.dtype(getattr(ml_dtypes, name)).itemsize * 8
        got = dtypes.itemsize_bits(name)
        assert got == dtypes.SUB_BYTE_BITS.get(name, want), name
        assert dtypes.numpy_dtype(name) == np.dtype(getattr(ml_dtypes, name))
        assert dtypes.dtype_name(np.zeros(1, getattr(ml_dtypes, name)).dtype) == name


def test_float_types_do_not_import_ml_dtypes_and_its_types_do() -> None:
    probe = (
        "import sys; from nneditor.tensors import dtypes as d;"
        "assert d.itemsize_bits('bfloat16') == 16 and d.numpy_dtype('float32').itemsize == 4;"
        "assert d.stored_nbytes('float8_e4m3fn', 3) == 3;"
        "assert 'ml_dtypes' not in sys.modules;"
        "assert str(d.numpy_dtype('bfloat16')) == 'bfloat16'; print('ml_dtypes' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "True", out.stderr
    with pytest.raises(ValueError, match="unknown dtype 'float7'"):
        dtypes.numpy_dtype("float7")
