"""Round trip of real ONNX models through the validated export path."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import numpy_helper

import nneditor
from nneditor.editing.session import EditSession

pytestmark = pytest.mark.realdata

MODELS = [
    "silero_vad.onnx",
    "silero_vad_16k_op15.onnx",
    "ch_PP-OCRv4_rec_infer.onnx",
    "ch_PP-OCRv4_det_infer.onnx",
]


def _feeds(path):
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    feeds = {}
    for i in sess.get_inputs():
        shape = [d if isinstance(d, int) else 1 for d in i.shape]
        if "ocr" in str(path).lower() or "PP-OCR" in str(path):
            shape = (
                [1, 3, 48, 160]
                if len(shape) == 4 and "rec" in str(path)
                else ([1, 3, 64, 64] if len(shape) == 4 else shape)
            )
        if i.type == "tensor(int64)":
            feeds[i.name] = (
                np.array(16000, dtype=np.int64).reshape(shape)
                if not shape
                else np.full(shape, 16000, np.int64)
            )
        elif i.name == "state":
            feeds[i.name] = np.zeros([2, 1, 128], np.float32)
        elif i.name == "input" and "silero" in str(path):
            feeds[i.name] = rng.standard_normal((1, 512)).astype(np.float32)
        else:
            feeds[i.name] = rng.standard_normal(shape).astype(np.float32)
    return sess, feeds


@pytest.mark.parametrize("name", MODELS)
def test_round_trip_same_graph_bytes_and_outputs(realdata, tmp_path, name, unchanged):
    src = realdata(name)
    check = unchanged(src)
    dest = tmp_path / name
    with nneditor.open(src) as doc:
        s = EditSession.open(doc, use_journal=False)
        report = s.export(dest)
        s.close()
    assert any(c.startswith("onnx.checker full check with shape inference") for c in report.checks)
    a, b = onnx.load(str(src)), onnx.load(str(dest))
    assert [(n.op_type, n.name, list(n.input), list(n.output)) for n in a.graph.node] == [
        (n.op_type, n.name, list(n.input), list(n.output)) for n in b.graph.node
    ]
    ia = {t.name: numpy_helper.to_array(t) for t in a.graph.initializer}
    ib = {t.name: numpy_helper.to_array(t) for t in b.graph.initializer}
    assert ia.keys() == ib.keys()
    for k in ia:
        assert ia[k].tobytes() == ib[k].tobytes(), k
    sa, feeds = _feeds(src)
    sb = ort.InferenceSession(str(dest), providers=["CPUExecutionProvider"])
    for x, y in zip(sa.run(None, feeds), sb.run(None, feeds), strict=True):
        np.testing.assert_array_equal(x, y)
    check()
