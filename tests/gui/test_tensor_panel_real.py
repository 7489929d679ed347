"""TensorPanel on real artifacts: SmolLM2 GGUF (Q4_1/Q8_0), the PP-OCR detector, the example
transformer; references are gguf-py's GGUFReader + dequantize, the file's bytes and
onnxruntime captures.

``NNEDITOR_SCREENSHOT_DIR=docs/screenshots pytest tests/gui/test_tensor_panel_real.py -k
screenshots`` regenerates the documentation screenshots.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import gguf
import numpy as np
import pytest
from gguf import quants
from PySide6.QtGui import QImage

from nneditor.artifacts.registry import open_document
from nneditor.ui.tensor import TensorPanel
from nneditor.ui.tensor.blocks import list_blocks

pytestmark = pytest.mark.realdata

ROOT = Path(__file__).resolve().parents[2]
SMOL = "SmolLM2-135M-Instruct.Q4_1.gguf"


@pytest.fixture
def panel(qtbot, qapp) -> Iterator[TensorPanel]:  # noqa: ANN001
    from nneditor.ui import theme

    theme.apply(qapp, dark=False)
    p = TensorPanel()
    qtbot.addWidget(p)
    p.resize(1180, 760)
    p.show()
    yield p
    p.shutdown()


@pytest.mark.parametrize("name", ["blk.0.attn_q.weight", "token_embd.weight"])
def test_real_gguf_blocks_values_and_hex(
    qtbot, panel: TensorPanel, realdata: Callable[[str], Path], unchanged, name: str
) -> None:  # noqa: ANN001
    path = realdata(SMOL)
    check = unchanged(path)
    reader = gguf.GGUFReader(str(path))
    raw = next(t for t in reader.tensors if t.name == name)
    rows = np.array(raw.data[:2])  # two rows of blocks, as gguf-py maps them
    want = quants.dequantize(rows, raw.tensor_type)
    doc = open_document(path)
    try:
        ref = doc.tensors[name]
        listing = list_blocks(ref, doc.sources[0], rows=2, max_blocks=10_000)
        per_row = listing.blocks_per_row
        for rec in listing.records:
            got = rec.values(listing.ggml_type)
            np.testing.assert_allclose(got, want[rec.row, rec.block * 32 : (rec.block + 1) * 32])
        panel.set_tensor(ref, source=doc.sources[0])
        model = panel.view_tab.model
        assert model.data(model.index(1, 5)) == f"{want[1, 5]:.6g}"
        assert per_row == ref.shape[-1] // 32
        hx = panel.hex_tab.model
        data = path.read_bytes()
        assert hx.start == ref.offset - ref.offset % 16
        assert all(
            hx.byte_at(r, b)[1] == data[hx.byte_at(r, b)[0]]
            for r in range(hx.rowCount())
            for b in range(16)
        )
    finally:
        doc.close()
    check()


def test_real_gguf_statistics_match_gguf_py(
    qtbot, panel: TensorPanel, realdata: Callable[[str], Path]
) -> None:  # noqa: ANN001
    path = realdata(SMOL)
    reader = gguf.GGUFReader(str(path))
    raw = next(t for t in reader.tensors if t.name == "blk.3.ffn_down.weight")
    want = quants.dequantize(np.array(raw.data), raw.tensor_type).astype(np.float64)
    doc = open_document(path)
    try:
        panel.set_tensor(doc.tensors["blk.3.ffn_down.weight"], source=doc.sources[0])
        panel.stats_tab.compute()
        qtbot.waitUntil(lambda: panel.stats_tab.stats is not None, timeout=30000)
        st = panel.stats_tab.stats
        assert st is not None and not st.partial
        assert st.min == pytest.approx(want.min()) and st.max == pytest.approx(want.max())
        assert st.mean == pytest.approx(want.mean(), rel=1e-9, abs=1e-12)
    finally:
        doc.close()


def _capture(model: Path | str, name: str, feeds: dict[str, np.ndarray]) -> np.ndarray:
    """One intermediate output, computed by onnxruntime (the reference runtime)."""
    import onnx
    from onnx import TensorProto, helper

    ort = pytest.importorskip("onnxruntime")
    m = onnx.load(str(model))
    m.graph.output.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, None))
    session = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run([name], feeds)[0]


def _distinct_colours(path: Path) -> int:
    img = QImage(str(path))
    step = 7
    return len(
        {img.pixel(x, y) for x in range(0, img.width(), step) for y in range(0, img.height(), step)}
    )


def test_screenshots_of_real_tensors(
    qtbot, qapp, panel: TensorPanel, realdata: Callable[[str], Path], tmp_path: Path
) -> None:  # noqa: ANN001
    out = Path(os.environ.get("NNEDITOR_SCREENSHOT_DIR", tmp_path))
    out.mkdir(parents=True, exist_ok=True)

    def settle() -> None:
        for _ in range(5):
            qapp.processEvents()

    shots = []
    doc = open_document(realdata(SMOL))
    try:
        ref = doc.tensors["blk.0.attn_q.weight"]
        panel.set_tensor(ref, source=doc.sources[0], usage=["blk.0 attention: Q projection"])
        panel.show_tab("View")
        panel.view_tab.blocks_toggle.setChecked(True)
        panel.view_tab.splitter.setSizes([330, 260])
        settle()
        shots.append(out / "tensor_gguf_blocks.png")
        assert panel.grab().save(str(shots[-1]), "PNG")
    finally:
        doc.close()
    det = realdata("ch_PP-OCRv4_det_infer.onnx")
    image = np.load(ROOT / "examples" / "trace-inputs" / "image_1x3x64x64.npy")
    act = _capture(det, "batch_norm_67.tmp_2", {"x": image})
    panel.set_array(act, "batch_norm_67.tmp_2", {"node": "BatchNormalization after conv2d_0"})
    panel.show_tab("Visualization")
    panel.viz.normalize.setChecked(True)
    settle()
    assert panel.viz.kind == "feature_maps"
    shots.append(out / "tensor_feature_maps.png")
    assert panel.grab().save(str(shots[-1]), "PNG")
    ids = (np.arange(24, dtype=np.int64) * 7 % 96).reshape(1, 24)
    example = ROOT / "examples" / "tiny_transformer.onnx"
    att = _capture(example, "/blocks.0/attn/Softmax_13_output_0", {"input_ids": ids})
    panel.set_array(att, "output_13")
    panel.show_tab("Visualization")
    assert panel.viz.kind == "attention"  # found by probing a softmax row, not by name
    panel.set_array(att, "/blocks.0/attn/Softmax_13_output_0", {"input_ids": "24 tokens"})
    settle()
    np.testing.assert_allclose(panel.viz.image, att[0, 0])
    shots.append(out / "tensor_attention.png")
    assert panel.grab().save(str(shots[-1]), "PNG")
    for shot in shots:
        assert shot.stat().st_size < 300_000
        assert _distinct_colours(shot) > 20  # rendered content, not a blank page
