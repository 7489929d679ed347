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


def test_standard_sizes_known_without_numpy_equal_numpy_own() -> None:
    for name in dtypes._STANDARD:
        want = 0 if name == "string" else np.dtype(dtypes.numpy_dtype(name)).itemsize * 8
        assert dtypes.itemsize_bits(name) == want, name
    with pytest.raises(ValueError, match="unknown dtype 'float7'"):
        dtypes.itemsize_bits("float7")


_LAZY_PROBE = """
import sys, threading
from nneditor.platform import lazy_numpy
from nneditor.tensors import dtypes
assert dtypes.itemsize_bits("float16") == 16 and "numpy" not in sys.modules
assert not lazy_numpy.loaded()
np = lazy_numpy.np
seen, errors = [], []
def use():
    try:
        seen.append(np.arange(4, dtype=np.int64).sum())
    except Exception as exc:
        errors.append(exc)
threads = [threading.Thread(target=use) for _ in range(8)]
for t in threads:
    t.start()
for t in threads:
    t.join()
import numpy
assert not errors and seen == [6] * 8, errors
assert lazy_numpy.loaded() and np.ndarray is numpy.ndarray and np.float32 is numpy.float32
assert np.random.default_rng(0).integers(5) == numpy.random.default_rng(0).integers(5)
assert np.__version__ == numpy.__version__
print("ok")
"""


def test_lazy_numpy_imports_on_first_use_once_across_threads() -> None:
    out = subprocess.run(
        [sys.executable, "-c", _LAZY_PROBE], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
