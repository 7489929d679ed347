"""Streamed deltas equal numpy's whole-array formulas, whatever the chunking."""

from __future__ import annotations

import math

import numpy as np
import pytest

from nneditor.diff import deltas
from nneditor.diff.deltas import Delta, compare_chunks, flat_chunks


def test_chunked_deltas_equal_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(deltas, "CHUNK_VALUES", 1000)  # many chunks
    rng = np.random.default_rng(1)
    a = rng.standard_normal((37, 101)).astype(np.float32)
    b = a + rng.standard_normal(a.shape).astype(np.float32) * 0.01
    d = compare_chunks(zip(flat_chunks(a), flat_chunks(b), strict=True))
    x, y = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    assert d.max_abs == pytest.approx(np.abs(x - y).max(), rel=1e-12)
    assert d.rel_l2 == pytest.approx(np.linalg.norm(x - y) / np.linalg.norm(y), rel=1e-10)
    cos = x @ y / (np.linalg.norm(x) * np.linalg.norm(y))
    assert d.cosine == pytest.approx(cos, rel=1e-12) and d.count == a.size


def test_edge_cases() -> None:
    zero = Delta()
    zero.add(np.zeros(4), np.zeros(4))
    assert (zero.rel_l2, zero.cosine, zero.max_abs) == (0.0, 1.0, 0.0)
    against_zero = Delta()
    against_zero.add(np.ones(4), np.zeros(4))
    assert against_zero.rel_l2 == math.inf and against_zero.cosine == 0.0
    nan = Delta()
    nan.add(np.array([1.0, np.nan, 3.0]), np.array([1.0, 2.0, 3.0]))
    assert nan.as_dict()["nonfinite_skipped"] == 1 and nan.max_abs == 0.0
