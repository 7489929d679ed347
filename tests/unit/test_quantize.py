"""Quantization numerics and previews against onnxruntime.quantization and plain numpy.

References: ``onnxruntime.quantization.quant_utils.quantize_data`` (per tensor, and per
channel by quantizing each channel slice, as ORT's per-channel quantizer does) and
``quantize_dynamic``; error statistics and histograms are recomputed here with numpy from
the original weights and ORT's int8 values, never from our code path.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import QuantType, quantize_dynamic
from onnxruntime.quantization.quant_utils import quantize_data

import nneditor
from nneditor.errors import CancelledError
from nneditor.jobs import CancelToken, JobHandle, SyncRunner
from nneditor.optimize.quantize import (
    QuantSettings,
    preview_quantization,
    quantize_tensor,
)
from nneditor.optimize.weights import OptimizeError

MODES = [(s, y, c) for s in (True, False) for y in (True, False) for c in (False, True)]


def ort_quantize(x: np.ndarray, signed: bool, symmetric: bool, axis: int | None):
    """(q, scale, zero_point) from ORT; per channel = ORT on each channel slice."""
    qtype = TensorProto.INT8 if signed else TensorProto.UINT8
    if axis is None:
        zp, scale, q = quantize_data(x.reshape(-1), qtype, symmetric)[-3:]
        return np.asarray(q).reshape(x.shape), np.asarray(scale), np.asarray(zp)
    qs, ss, zs = [], [], []
    for i in range(x.shape[axis]):
        zp, scale, q = quantize_data(np.take(x, i, axis=axis).reshape(-1), qtype, symmetric)[-3:]
        shape = list(x.shape)
        shape[axis] = 1
        qs.append(np.asarray(q).reshape(shape))
        ss.append(scale)
        zs.append(zp)
    return np.concatenate(qs, axis=axis), np.array(ss), np.array(zs)


def reference_stats(x: np.ndarray, q, scale, zp, axis: int | None) -> dict[str, float]:
    """Error figures computed with numpy from ORT's quantized values."""
    shape = [1] * x.ndim
    if axis is not None:
        shape[axis] = -1
    s = np.asarray(scale, np.float32).reshape(shape if axis is not None else ())
    z = np.asarray(zp, np.float32).reshape(shape if axis is not None else ())
    dq = (q.astype(np.float32) - z) * s
    dq = dq.astype(x.dtype).astype(np.float64)
    err = dq - x.astype(np.float64)
    lo, hi = (-128, 127) if q.dtype == np.int8 else (0, 255)
    unclipped = np.round(x.astype(np.float32) / s) + z
    return {
        "clipped_fraction": float(np.mean((unclipped < lo) | (unclipped > hi))),
        "mse": float(np.mean(err**2)),
        "max_abs_error": float(np.abs(err).max()),
        "sqnr_db": float(10 * np.log10(np.sum(x.astype(np.float64) ** 2) / np.sum(err**2))),
        "dq": dq,
    }


def _weights(rng: np.random.Generator, shape: tuple[int, ...], dtype=np.float32) -> np.ndarray:
    x = rng.standard_normal(shape) * 0.05
    x.reshape(shape[0], -1)[0] = np.abs(x.reshape(shape[0], -1)[0])  # an all-positive row
    x.reshape(shape[0], -1)[1] = 0.0  # an all-zero row
    x.reshape(-1)[7] = 0.9  # an outlier
    return x.astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize(("signed", "symmetric", "per_channel"), MODES)
def test_quantize_tensor_equals_onnxruntime(dtype, signed, symmetric, per_channel):
    rng = np.random.default_rng(3)
    x = _weights(rng, (24, 40), dtype)
    for axis in (0, 1):
        got = quantize_tensor(x, QuantSettings(signed, symmetric, per_channel), axis=axis)
        q, scale, zp = ort_quantize(x, signed, symmetric, axis if per_channel else None)
        assert got.q.dtype == (np.int8 if signed else np.uint8)
        np.testing.assert_array_equal(got.q, q)
        np.testing.assert_array_equal(got.scale.reshape(-1), scale.reshape(-1))
        assert got.scale.dtype == np.asarray(scale).dtype
        np.testing.assert_array_equal(got.zero_point.reshape(-1), zp.reshape(-1))
        ref = reference_stats(x, q, scale, zp, axis if per_channel else None)
        np.testing.assert_allclose(got.mse, ref["mse"], rtol=1e-9)
        np.testing.assert_allclose(got.max_abs_error, ref["max_abs_error"], rtol=1e-9)
        np.testing.assert_allclose(got.sqnr_db, ref["sqnr_db"], rtol=1e-9)
        np.testing.assert_array_equal(got.dequantized, ref["dq"].astype(np.float32))
        assert got.clipped_fraction == ref["clipped_fraction"]


def test_symmetric_zero_points_and_ranges_follow_the_documented_formulas():
    x = np.array([[-1.0, 0.5, 2.0], [0.1, 0.2, 0.4]], dtype=np.float32)
    s8 = quantize_tensor(x, QuantSettings(True, True, False))
    assert s8.zero_point == 0 and s8.scale == np.float32(2.0 / 127)
    u8 = quantize_tensor(x, QuantSettings(False, True, False))
    assert u8.zero_point == 128 and u8.scale == np.float32(4.0 / 255)
    a8 = quantize_tensor(x, QuantSettings(False, False, False))
    assert a8.scale == np.float32(3.0 / 255) and a8.zero_point == round(0 - (-1.0) / (3.0 / 255))
    # per channel: the second row is all positive, its range is widened to include 0
    pc = quantize_tensor(x, QuantSettings(True, False, True), axis=0)
    assert pc.scale[1] == np.float32(0.4 / 255) and pc.zero_point[1] == -128
    with pytest.raises(ValueError, match="per-channel quantization needs an axis"):
        quantize_tensor(x, QuantSettings(True, True, True))


@pytest.mark.parametrize(("per_channel", "weight_type"), [(False, "i8"), (True, "u8")])
def test_int8_values_equal_quantize_dynamic(tmp_path: Path, per_channel: bool, weight_type: str):
    rng = np.random.default_rng(0)
    w = rng.standard_normal((64, 48)).astype(np.float32)
    path = _save(tmp_path, [helper.make_node("MatMul", ["x", "W"], ["y"], name="mm")], [("W", w)])
    out = tmp_path / "dyn.onnx"
    qt = QuantType.QInt8 if weight_type == "i8" else QuantType.QUInt8
    quantize_dynamic(str(path), str(out), per_channel=per_channel, weight_type=qt)
    ref = {i.name: numpy_helper.to_array(i) for i in onnx.load(str(out)).graph.initializer}
    # quantize_dynamic: int8 weights symmetric, uint8 asymmetric; per channel on MatMul axis 1
    settings = QuantSettings(weight_type == "i8", weight_type == "i8", per_channel)
    with nneditor.open(path) as doc:
        preview = preview_quantization(doc, settings, min_elements=1)
    got = quantize_tensor(w, settings, axis=1)
    np.testing.assert_array_equal(got.q, ref["W_quantized"])
    np.testing.assert_array_equal(preview.tensors[0].scale.reshape(-1), ref["W_scale"].reshape(-1))
    np.testing.assert_array_equal(
        preview.tensors[0].zero_point.reshape(-1), ref["W_zero_point"].reshape(-1)
    )


# -- document-level previews ---------------------------------------------------------------


def _save(
    tmp_path: Path,
    nodes: list[onnx.NodeProto],
    inits: list[tuple[str, np.ndarray]],
    name: str = "m.onnx",
    opset: int = 17,
    external: bool = False,
) -> Path:
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)],
        [helper.make_tensor_value_info(n.output[0], TensorProto.FLOAT, None) for n in nodes[-1:]],
        [numpy_helper.from_array(a, n) for n, a in inits],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    path = tmp_path / name
    if external:
        onnx.save_model(model, path, save_as_external_data=True, location=name + ".data")
    else:
        onnx.save_model(model, path)
    return path


def mixed_model(tmp_path: Path, external: bool = False) -> tuple[Path, dict[str, np.ndarray]]:
    rng = np.random.default_rng(7)
    w = {
        "mm_w": _weights(rng, (48, 40)),  # MatMul [K, N] -> axis 1
        "gemm_t": _weights(rng, (30, 40)),  # Gemm transB=1 [N, K] -> axis 0
        "gemm_n": _weights(rng, (30, 36)),  # Gemm transB=0 [K, N] -> axis 1
        "conv_w": _weights(rng, (8, 3, 5, 5)),  # Conv [M, C, kh, kw] -> axis 0
        "bias": rng.standard_normal(36).astype(np.float32),  # 1-D: never a candidate
        "tiny": _weights(rng, (4, 4)),  # under min_elements
        "nan_w": _weights(rng, (40, 30)),
    }
    w["nan_w"][5, 5] = np.nan
    nodes = [
        helper.make_node("MatMul", ["x", "mm_w"], ["a"], name="mm"),
        helper.make_node("Gemm", ["a", "gemm_t"], ["b"], name="gt", transB=1),
        helper.make_node("Gemm", ["b", "gemm_n", "bias"], ["c"], name="gn"),
        helper.make_node("MatMul", ["c", "tiny"], ["d"], name="tiny_mm"),
        helper.make_node("Conv", ["img", "conv_w"], ["e"], name="conv"),
        helper.make_node("MatMul", ["b2", "nan_w"], ["f"], name="nan_mm"),
    ]
    return _save(tmp_path, nodes, list(w.items()), external=external), w


EXPECTED_AXES = {"mm_w": 1, "gemm_t": 0, "gemm_n": 1, "conv_w": 0}


@pytest.mark.parametrize("external", [False, True])
@pytest.mark.parametrize(("signed", "symmetric", "per_channel"), MODES)
def test_preview_matches_numpy_and_ort(
    tmp_path, unchanged, external, signed, symmetric, per_channel
):
    path, w = mixed_model(tmp_path, external)
    check = unchanged(path)
    settings = QuantSettings(signed, symmetric, per_channel)
    with nneditor.open(path) as doc:
        # a tiny block budget forces many blocks, and split rows for the wide tensors
        pv = preview_quantization(doc, settings, min_elements=100, block_elems=37)
    check()
    assert not pv.partial
    assert [t.name for t in pv.tensors] == ["mm_w", "gemm_t", "gemm_n", "conv_w"]
    skipped = {s["name"]: s["reason"] for s in pv.skipped}
    assert "tiny tensor (16 elements < 100)" in skipped["tiny"]
    assert "NaN or infinite" in skipped["nan_w"]
    total_noise = total_signal = 0.0
    for t in pv.tensors:
        x = w[t.name]
        axis = EXPECTED_AXES[t.name] if per_channel else None
        assert t.axis == axis
        q, scale, zp = ort_quantize(x, signed, symmetric, axis)
        np.testing.assert_array_equal(t.scale.reshape(-1), scale.reshape(-1))
        np.testing.assert_array_equal(t.zero_point.reshape(-1), zp.reshape(-1))
        ref = reference_stats(x, q, scale, zp, axis)
        np.testing.assert_allclose(t.mse, ref["mse"], rtol=1e-9)
        np.testing.assert_allclose(t.max_abs_error, ref["max_abs_error"], rtol=1e-12)
        np.testing.assert_allclose(t.sqnr_db, ref["sqnr_db"], rtol=1e-9)
        assert t.clipped_fraction == ref["clipped_fraction"]
        edges = np.asarray(t.hist_edges)
        before, _ = np.histogram(x.reshape(-1), bins=64, range=(edges[0], edges[-1]))
        after, _ = np.histogram(ref["dq"].reshape(-1), bins=64, range=(edges[0], edges[-1]))
        assert t.hist_before == before.tolist()
        assert t.hist_after == after.tolist()
        n_params = x.shape[axis] if per_channel else 1
        assert t.bytes_before == x.size * 4
        assert t.bytes_after == x.size + n_params * (4 + 1)
        total_noise += np.sum((ref["dq"] - x.astype(np.float64)) ** 2)
        total_signal += np.sum(x.astype(np.float64) ** 2)
    d = pv.as_dict()
    json.dumps(d)  # JSON-ready
    count = sum(w[n].size for n in EXPECTED_AXES)
    np.testing.assert_allclose(d["totals"]["mse"], total_noise / count, rtol=1e-9)
    np.testing.assert_allclose(
        d["totals"]["sqnr_db"], 10 * np.log10(total_signal / total_noise), rtol=1e-9
    )
    saved = sum(w[n].size * 3 for n in EXPECTED_AXES) - sum(
        (w[n].shape[EXPECTED_AXES[n]] if per_channel else 1) * 5 for n in EXPECTED_AXES
    )
    assert d["claims"] == {
        "mathematical_conversion": True,
        "storage_reduction": saved,
        "runtime_acceleration": "not measured",
        "note": d["claims"]["note"],
    }
    assert "not measured" in d["claims"]["note"]
    t0 = d["tensors"][0]
    assert set(t0) >= {
        "name", "shape", "axis", "scale", "zero_point", "mse", "max_abs_error", "sqnr_db",
        "clipped_fraction", "hist_before", "hist_after", "bytes_before", "bytes_after",
    }  # fmt: skip


def test_qdq_mode_claims_no_storage_reduction(tmp_path):
    path, w = mixed_model(tmp_path)
    with nneditor.open(path) as doc:
        pv = preview_quantization(doc, QuantSettings(), ["mm_w"], mode="qdq")
    d = pv.as_dict()
    assert d["claims"]["storage_reduction"] is None
    assert d["tensors"][0]["bytes_after"] == w["mm_w"].nbytes + 5
    assert "does not get smaller" in d["claims"]["note"]


def test_float16_weights_keep_float16_scales(tmp_path):
    rng = np.random.default_rng(1)
    w = _weights(rng, (40, 32), np.float16)
    path = _save(tmp_path, [helper.make_node("MatMul", ["x", "W"], ["y"])], [("W", w)])
    with nneditor.open(path) as doc:
        pv = preview_quantization(doc, QuantSettings(False, False, True), min_elements=1)
    t = pv.tensors[0]
    q, scale, zp = ort_quantize(w, False, False, 1)
    assert t.scale.dtype == np.float16 == scale.dtype
    np.testing.assert_array_equal(t.scale, scale)
    assert t.bytes_after == w.size + 32 * 3
    ref = reference_stats(w, q, scale, zp, 1)
    np.testing.assert_allclose(t.mse, ref["mse"], rtol=1e-9)


def test_explicit_axis_and_disagreeing_consumers(tmp_path):
    rng = np.random.default_rng(2)
    w = _weights(rng, (32, 32))
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["a"], name="mm"),
        helper.make_node("Gemm", ["a", "W"], ["b"], name="g", transB=1),
    ]
    path = _save(tmp_path, nodes, [("W", w)])
    with nneditor.open(path) as doc:
        pv = preview_quantization(doc, QuantSettings(per_channel=True), min_elements=1)
        assert pv.tensors == []
        assert "disagree on the output-channel axis" in pv.skipped[0]["reason"]
        pv = preview_quantization(doc, QuantSettings(per_channel=True, axis=-1), min_elements=1)
        assert pv.tensors[0].axis == 1
        _q, scale, _zp = ort_quantize(w, True, True, 1)
        np.testing.assert_array_equal(pv.tensors[0].scale, scale)
        with pytest.raises(
            OptimizeError, match=r"axis 2 is out of range for 'W' of shape \[32, 32\]"
        ):
            preview_quantization(doc, QuantSettings(per_channel=True, axis=2), min_elements=1)


def test_cancellation_returns_the_finished_tensors_as_partial(tmp_path):
    path, _w = mixed_model(tmp_path)
    token = CancelToken()
    seen: list[str] = []

    def on_progress(done: int, total: int, message: str) -> None:
        seen.append(message)
        if message.startswith("ranges of gemm_n"):
            token.cancel()

    with nneditor.open(path) as doc:
        full = preview_quantization(doc, QuantSettings(), min_elements=100)
        handle = JobHandle(token, on_progress, min_interval_s=0.0)
        with pytest.raises(CancelledError):
            preview_quantization(
                doc, QuantSettings(), handle=handle, min_elements=100, block_elems=64
            )
        part = handle.partial_value
        assert part.partial is True
        assert [t.name for t in part.tensors] == ["mm_w", "gemm_t"]
        assert part.tensors[1].mse == pytest.approx(full.tensors[1].mse, rel=1e-12)
        assert part.as_dict()["partial"] is True
        # the same through the runner used by the CLI: a cancelled job reports partial
        token2 = CancelToken()
        token2.cancel()
        result = SyncRunner().run(
            lambda h: preview_quantization(doc, QuantSettings(), handle=h), token=token2
        )
        assert result.cancelled and result.partial and result.value.tensors == []


def test_bad_requests_say_what_is_wrong(tmp_path):
    path, _w = mixed_model(tmp_path)
    with nneditor.open(path) as doc:
        with pytest.raises(OptimizeError, match=r"tensor 'nope' is not a tensor of this model"):
            preview_quantization(doc, QuantSettings(), ["nope"])
        with pytest.raises(
            OptimizeError,
            match=r"tensor 'bias' is not read as the weight of a MatMul, Gemm or Conv",
        ):
            preview_quantization(doc, QuantSettings(), ["bias"])
        with pytest.raises(OptimizeError, match="unknown quantization mode 'fast'"):
            preview_quantization(doc, QuantSettings(), mode="fast")
        # naming a tiny tensor includes it
        pv = preview_quantization(doc, QuantSettings(), ["tiny"])
        assert [t.name for t in pv.tensors] == ["tiny"]


def test_a_document_without_graph_is_refused(tmp_path):
    from safetensors.numpy import save_file

    path = tmp_path / "w.safetensors"
    save_file({"w": np.ones((4, 4), np.float32)}, str(path))
    with nneditor.open(path) as doc, pytest.raises(OptimizeError, match="has no computation graph"):
        preview_quantization(doc, QuantSettings())


def test_bfloat16_weights_against_the_formula(tmp_path):
    import ml_dtypes

    rng = np.random.default_rng(12)
    w = (rng.standard_normal((40, 32)) * 0.1).astype(ml_dtypes.bfloat16)
    path = _save(tmp_path, [helper.make_node("MatMul", ["x", "W"], ["y"])], [("W", w)])
    with nneditor.open(path) as doc:
        t = preview_quantization(doc, QuantSettings(True, True, False), min_elements=1).tensors[0]
    x = w.astype(np.float32)
    scale = np.asarray(np.float64(np.abs(x).max()) / 127, dtype=ml_dtypes.bfloat16)
    q = np.clip(np.round(x / scale.astype(np.float32)), -128, 127)
    dq = (q * scale.astype(np.float32)).astype(ml_dtypes.bfloat16).astype(np.float64)
    assert t.scale.dtype == ml_dtypes.bfloat16 and t.scale == scale
    np.testing.assert_allclose(t.mse, np.mean((dq - x) ** 2), rtol=1e-9)
    assert t.bytes_after == w.size + 2 + 1


def test_streaming_releases_mapped_rows_without_changing_values(tmp_path):
    for external in (True, False):
        folder = tmp_path / ("external" if external else "embedded")
        folder.mkdir()
        path, _w = mixed_model(folder, external)
        with nneditor.open(path) as doc:
            ref = doc.tensors["mm_w"]
            before = ref.read()
            source = ref.loader.source
            source.release(0, source.size)  # pages leave the resident set, not the file
            np.testing.assert_array_equal(ref.read(), before)
    with pytest.raises(ValueError, match="was closed; reopen the document to read it"):
        ref.read()  # the embedded model's map is gone once the document is closed
