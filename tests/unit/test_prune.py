"""Logical pruning (threshold, .npy mask, exact N:M) previews and plans, checked with numpy."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import nneditor
from nneditor.errors import ArtifactError, CancelledError
from nneditor.jobs import CancelToken, JobHandle
from nneditor.optimize.prune import (
    NM,
    Masks,
    Threshold,
    load_mask,
    nm_keep,
    preview_pruning,
    prune_plan,
)
from nneditor.optimize.weights import OptimizeError

# name -> (shape, reduction axis of its consumer)
WEIGHTS = {
    "mm": ((32, 12), 0),  # MatMul [K, N]: K
    "conv": ((6, 8, 3, 3), 1),  # Conv [M, C, kh, kw]: input channels
    "gemm_t": ((10, 16), 1),  # Gemm transB=1 [N, K]: K is axis 1
    "gemm_n": ((16, 10), 0),  # Gemm transB=0 [K, N]: K is axis 0
}


def model(tmp_path: Path) -> tuple[Path, dict[str, np.ndarray]]:
    rng = np.random.default_rng(4)
    w = {n: rng.standard_normal(s).astype(np.float32) for n, (s, _a) in WEIGHTS.items()}
    w["mm"][0, 0] = 0.0  # an existing zero
    nodes = [
        helper.make_node("MatMul", ["x", "mm"], ["a"], name="n_mm"),
        helper.make_node("Conv", ["img", "conv"], ["c"], name="n_conv"),
        helper.make_node("Gemm", ["p", "gemm_t"], ["d"], name="n_gt", transB=1),
        helper.make_node("Gemm", ["q", "gemm_n"], ["e"], name="n_gn"),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)],
        [helper.make_tensor_value_info("e", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(a, n) for n, a in w.items()],
    )
    path = tmp_path / "p.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path, w


def check_nm(pruned: np.ndarray, original: np.ndarray, n: int, m: int, axis: int) -> None:
    """Every group of m along axis has exactly n non-zeros, and they are the largest."""
    p = np.moveaxis(pruned, axis, -1)
    o = np.moveaxis(original, axis, -1)
    p = p.reshape(-1, m)
    o = o.reshape(-1, m)
    assert ((p != 0).sum(axis=1) == n).all()
    kept = np.where(p != 0, np.abs(o), np.inf).min(axis=1)
    dropped = np.where(p == 0, np.abs(o), -np.inf).max(axis=1)
    assert (kept >= dropped).all()
    np.testing.assert_array_equal(p[p != 0], o[p != 0])


@pytest.mark.parametrize(("n", "m"), [(2, 4), (1, 2), (3, 4)])
@pytest.mark.parametrize("block_elems", [8, 50, 1 << 20])
def test_nm_plan_keeps_exactly_n_largest_per_group(tmp_path, unchanged, n, m, block_elems):
    path, w = model(tmp_path)
    w["mm"][0, 0] = 0.5  # no zeros, so "exactly n non-zeros" is exact
    path = _resave(path, w)
    check = unchanged(path)
    with nneditor.open(path) as doc:
        plan = prune_plan(doc, NM(n, m), min_elements=1, block_elems=block_elems)
        values = {r.name: r.array for r in plan.replace_initializers}
        raw = {r.name: r.raw_bytes() for r in plan.replace_initializers}
        pv = preview_pruning(doc, NM(n, m), min_elements=1, block_elems=block_elems)
    check()
    for name, (shape, axis) in WEIGHTS.items():
        if shape[axis] % m:
            assert name not in values
            continue
        check_nm(values[name], w[name], n, m, axis)
        t = next(t for t in pv.tensors if t.name == name)
        assert t.axis == axis
        assert t.zeros_after == w[name].size // m * (m - n)
        assert t.pruned == w[name].size // m * (m - n)
    assert plan.kind == "prune-logical"
    assert all(
        r.shape == w[r.name].shape and r.dtype == "float32" for r in plan.replace_initializers
    )
    # byte-patch friendly: same length as the original raw data
    assert all(raw[k] == values[k].tobytes() for k in raw)
    assert all(len(raw[k]) == w[k].nbytes for k in raw)


def _resave(path: Path, w: dict[str, np.ndarray]) -> Path:
    m = onnx.load(str(path))
    for init in m.graph.initializer:
        init.CopyFrom(numpy_helper.from_array(w[init.name], init.name))
    onnx.save(m, str(path))
    return path


def test_nm_keep_on_plain_arrays_and_ties():
    x = np.array([[1.0, -1.0, 1.0, 0.5], [0.1, -3.0, 2.0, 2.0]], dtype=np.float32)
    keep = nm_keep(x, 2, 4, axis=1)
    # ties keep the lower index
    assert keep.tolist() == [[True, True, False, False], [False, True, True, False]]
    with pytest.raises(OptimizeError, match="N:M pruning needs integers 0 < N < M, got 4:4"):
        nm_keep(x, 4, 4, axis=1)
    with pytest.raises(OptimizeError, match="axis 0 has 2 entries, not a multiple of M=4"):
        nm_keep(x, 2, 4, axis=0)


def test_nm_on_an_indivisible_axis(tmp_path):
    path, _w = model(tmp_path)
    with nneditor.open(path) as doc:
        pv = preview_pruning(doc, NM(2, 4), min_elements=1)
        assert {t.name for t in pv.tensors} == {"mm", "conv", "gemm_t", "gemm_n"}
        pv3 = preview_pruning(doc, NM(1, 3), min_elements=1)
        reasons = {s["name"]: s["reason"] for s in pv3.skipped}
        assert reasons["mm"] == "its reduction axis 0 has 32 entries, not a multiple of M=3"
        with pytest.raises(
            OptimizeError,
            match=r"cannot prune 'mm' 1:3: its reduction axis 0 has 32 entries, not a multiple",
        ):
            preview_pruning(doc, NM(1, 3), ["mm"])


@pytest.mark.parametrize("block_elems", [7, 1 << 20])
def test_threshold_preview_and_plan_equal_numpy(tmp_path, block_elems):
    path, w = model(tmp_path)
    t = 0.6
    with nneditor.open(path) as doc:
        pv = preview_pruning(doc, Threshold(t), min_elements=1, block_elems=block_elems)
        plan = prune_plan(doc, Threshold(t), min_elements=1, block_elems=block_elems)
        values = {r.name: r.array for r in plan.replace_initializers}
    for tp in pv.tensors:
        x = w[tp.name].astype(np.float64)
        gone = np.abs(x) < t
        assert tp.pruned == int(gone.sum())
        assert tp.zeros_before == int((x == 0).sum())
        assert tp.zeros_after == int(((x == 0) | gone).sum())
        np.testing.assert_allclose(
            tp.as_dict()["removed_l2_fraction"], np.linalg.norm(x[gone]) / np.linalg.norm(x)
        )
        assert tp.max_abs_removed == pytest.approx(np.abs(x[gone]).max())
        np.testing.assert_array_equal(values[tp.name], np.where(gone, 0, w[tp.name]))
    d = pv.as_dict()
    total = sum(a.size for a in w.values())
    assert d["totals"]["sparsity_after"] == pytest.approx(
        sum(((np.abs(a) < t) | (a == 0)).sum() for a in w.values()) / total
    )
    assert d["totals"]["bytes_after"] == d["totals"]["bytes_before"]
    assert d["claims"]["storage_reduction"] is None
    assert d["claims"]["runtime_acceleration"] == "not measured"
    assert "file size stay the same" in d["claims"]["note"]
    with nneditor.open(path) as doc, pytest.raises(OptimizeError, match="finite number >= 0"):
        preview_pruning(doc, Threshold(float("nan")))


def test_mask_from_npy(tmp_path, unchanged):
    path, w = model(tmp_path)
    rng = np.random.default_rng(9)
    mask = rng.random(w["mm"].shape) > 0.3
    mpath = tmp_path / "mask.npy"
    np.save(mpath, mask)
    int_mask = (rng.random(w["conv"].shape) > 0.5).astype(np.uint8)
    np.save(tmp_path / "conv.npy", np.asfortranarray(int_mask))
    check = unchanged(mpath)
    with nneditor.open(path) as doc:
        method = Masks({"mm": mpath, "conv": tmp_path / "conv.npy"})
        pv = preview_pruning(doc, method, block_elems=5)
        plan = prune_plan(doc, method)
        values = {r.name: r.array for r in plan.replace_initializers}
    check()
    assert [t.name for t in pv.tensors] == ["mm", "conv"]
    np.testing.assert_array_equal(values["mm"], np.where(mask, w["mm"], 0))
    np.testing.assert_array_equal(values["conv"], np.where(int_mask != 0, w["conv"], 0))
    assert pv.tensors[0].pruned == int((~mask).sum())


def test_bad_masks_are_refused_with_a_sentence(tmp_path):
    shape = (32, 12)
    bad_shape = tmp_path / "shape.npy"
    np.save(bad_shape, np.ones((12, 32), bool))
    with pytest.raises(
        ArtifactError, match=r"has shape \[12, 32\] but the tensor has shape \[32, 12\]"
    ):
        load_mask(bad_shape, shape, "mm")
    objs = tmp_path / "obj.npy"
    np.save(objs, np.array([None] * 384, dtype=object).reshape(shape), allow_pickle=True)
    with pytest.raises(ArtifactError, match="has dtype object; masks must be bool or numeric"):
        load_mask(objs, shape)
    trunc = tmp_path / "trunc.npy"
    np.save(trunc, np.ones(shape, bool))
    trunc.write_bytes(trunc.read_bytes()[:-10])
    with pytest.raises(ArtifactError, match="the file is truncated: the header promises 384 bytes"):
        load_mask(trunc, shape)
    # a header that claims an enormous array: refused before anything is allocated
    huge = tmp_path / "huge.npy"
    header = {"descr": "|b1", "fortran_order": False, "shape": (1 << 20, 1 << 20)}
    with huge.open("wb") as fp:
        np.lib.format.write_array_header_1_0(fp, header)
        fp.write(b"\x01" * 16)
    with pytest.raises(ArtifactError, match="the file is truncated"):
        load_mask(huge, (1 << 20, 1 << 20))
    text = tmp_path / "text.npy"
    text.write_text("not a mask")
    with pytest.raises(ArtifactError, match=r"NPY .*text.npy, byte 0: this is not a .npy file"):
        load_mask(text, shape)
    with pytest.raises(ArtifactError, match="the mask file cannot be read"):
        load_mask(tmp_path / "missing.npy", shape)


def test_mask_for_a_non_weight_is_refused(tmp_path):
    path, _w = model(tmp_path)
    with nneditor.open(path) as doc:
        with pytest.raises(
            OptimizeError, match="tensor 'x' is not a stored MatMul, Gemm or Conv weight"
        ):
            preview_pruning(doc, Masks({"x": np.ones((2, 2), bool)}))
        with pytest.raises(OptimizeError, match=r"the mask for 'mm' has shape \[2, 2\]"):
            preview_pruning(doc, Masks({"mm": np.ones((2, 2), bool)}))


def test_cancelled_pruning_preview_is_partial(tmp_path):
    path, _w = model(tmp_path)
    token = CancelToken()

    def on_progress(done: int, total: int, message: str) -> None:
        if message == "pruning gemm_t":
            token.cancel()

    with nneditor.open(path) as doc:
        handle = JobHandle(token, on_progress, min_interval_s=0.0)
        with pytest.raises(CancelledError):
            preview_pruning(doc, Threshold(0.5), handle=handle, min_elements=1, block_elems=8)
    part = handle.partial_value
    assert part.partial and [t.name for t in part.tensors] == ["mm", "conv"]
    assert part.as_dict()["partial"] is True


def test_constant_node_weights_are_pruned_in_place(tmp_path):
    from test_quant_plans import apply_plan, run

    rng = np.random.default_rng(5)
    w = rng.standard_normal((8, 6)).astype(np.float32)
    graph = helper.make_graph(
        [
            helper.make_node("Constant", [], ["W"], value=numpy_helper.from_array(w, "W")),
            helper.make_node("MatMul", ["x", "W"], ["y"], name="mm"),
        ],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 6])],
    )
    path = tmp_path / "c.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    with nneditor.open(path) as doc:
        plan = prune_plan(doc, NM(2, 4), min_elements=1)
        out = apply_plan(path, plan, tmp_path / "p.onnx")
    assert [r.name for r in plan.replace_constants] == ["W"] and not plan.replace_initializers
    x = rng.standard_normal((2, 8)).astype(np.float32)
    keep = np.zeros_like(w, dtype=bool)
    for g0 in (0, 4):  # groups of 4 along K (axis 0), the 2 largest |w| per group
        top = np.argsort(-np.abs(w[g0 : g0 + 4]), axis=0, kind="stable")[:2]
        np.put_along_axis(keep[g0 : g0 + 4], top, True, axis=0)
    np.testing.assert_allclose(run(out, x=x), x @ np.where(keep, w, 0), rtol=1e-5, atol=1e-6)
