"""Streaming statistics against numpy on the fully decoded array."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from nneditor.analysis import stats as stats_mod
from nneditor.analysis.hexview import hex_rows
from nneditor.analysis.stats import tensor_stats
from nneditor.io.source import MemorySource
from nneditor.jobs import CancelToken, JobHandle
from nneditor.model.tensor import TensorRef
from nneditor.tensors.dtypes import dtype_name
from nneditor.tensors.loaders import ArrayLoader, RawLoader


def _ref(arr: np.ndarray) -> TensorRef:
    src = MemorySource(arr.tobytes())
    return TensorRef(
        "t",
        dtype_name(arr.dtype),
        arr.shape,
        arr.nbytes,
        "raw",
        RawLoader(src, 0, dtype_name(arr.dtype)),
    )


def _check(st, ref_values: np.ndarray, bound: float = 0.0):
    x = ref_values.astype(np.float64).reshape(-1)
    fin = x[np.isfinite(x)]
    assert st.count == x.size
    assert st.nan == int(np.isnan(x).sum())
    assert st.inf == int(np.isinf(x).sum())
    assert st.zeros == int((fin == 0).sum())
    assert st.min == fin.min() and st.max == fin.max()
    np.testing.assert_allclose(st.mean, fin.mean(), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(st.std, fin.std(), rtol=1e-7, atol=1e-12)
    np.testing.assert_allclose(st.l2_norm, np.linalg.norm(fin), rtol=1e-9)
    for p, v in st.percentiles.items():
        want = np.percentile(fin, float(p))
        assert abs(v - want) <= bound + 1e-9 * max(1.0, abs(want)), (p, v, want)
    assert sum(st.histogram["counts"]) == fin.size


@pytest.mark.parametrize(
    "dtype",
    [
        np.float32,
        np.float16,
        np.float64,
        np.int8,
        np.uint8,
        np.int32,
        np.int64,
        ml_dtypes.bfloat16,
        ml_dtypes.float8_e4m3fn,
        ml_dtypes.float8_e5m2,
    ],
)
def test_exact_stats_match_numpy(dtype):
    rng = np.random.default_rng(3)
    arr = (rng.standard_normal((37, 11, 5)) * 20).astype(dtype)
    if np.dtype(dtype).kind == "f" or dtype in (ml_dtypes.bfloat16,):
        arr.reshape(-1)[:5] = 0
    st = tensor_stats(_ref(arr))
    assert st.percentile_method == "exact" and not st.partial
    _check(st, arr)


def test_int4_via_array_loader():
    vals = np.arange(-8, 8, dtype=np.int8).repeat(3).astype(ml_dtypes.int4)
    ref = TensorRef("q", "int4", vals.shape, vals.size // 2, "raw", ArrayLoader(vals))
    _check(tensor_stats(ref), vals.astype(np.int8))


def test_nan_and_inf_are_counted_not_mixed():
    arr = np.array([1.0, np.nan, np.inf, -np.inf, 0.0, -2.0], np.float32)
    st = tensor_stats(_ref(arr))
    assert (st.nan, st.pos_inf, st.neg_inf, st.zeros) == (1, 1, 1, 1)
    assert st.min == -2.0 and st.max == 1.0 and st.finite == 3


def test_sketch_percentiles_within_stated_bound(monkeypatch):
    monkeypatch.setattr(stats_mod, "EXACT_LIMIT", 1000)
    rng = np.random.default_rng(5)
    arr = rng.standard_normal((300, 200)).astype(np.float32)
    st = tensor_stats(_ref(arr), chunk=7000)
    assert st.percentile_method.startswith("histogram sketch")
    assert 0 < st.percentile_error_bound < (arr.max() - arr.min()) / 60000
    _check(st, arr, bound=st.percentile_error_bound)


def test_cancel_returns_partial_prefix():
    arr = np.arange(100_000, dtype=np.float32)
    token = CancelToken()
    calls = []

    def on_progress(done, total, msg):
        calls.append(done)
        if done >= 30_000:
            token.cancel()

    st = tensor_stats(_ref(arr), JobHandle(token, on_progress, min_interval_s=0), chunk=10_000)
    assert st.partial and st.processed < arr.size
    _check_prefix = arr[: st.processed].astype(np.float64)
    assert st.max == _check_prefix.max() and st.count == st.processed
    assert "cancelled" in st.note


def test_hex_rows_equal_file_bytes():
    data = bytes(range(256)) * 3
    rows = hex_rows(MemorySource(data), 100, 64)
    assert rows[0].offset == 100 and rows[0].data == data[100:116]
    assert rows[0].hex.split()[0] == f"{data[100]:02x}"
    assert b"".join(r.data for r in rows) == data[100:164]
    assert rows[-1].ascii == "".join(chr(b) if 32 <= b < 127 else "." for b in data[148:164])
