"""TensorPanel: visualization choice and data, and raw ggml block fields.

GGUF fixtures are written with gguf.GGUFWriter from gguf.quants.quantize; block fields are
checked against gguf.quants.dequantize of the same bytes, read back with gguf.GGUFReader.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import gguf
import numpy as np
import pytest
from gguf import GGMLQuantizationType as Q
from gguf import quants

from nneditor.artifacts.registry import open_document
from nneditor.model.document import Document
from nneditor.model.tensor import TensorRef
from nneditor.tensors.loaders import ArrayLoader
from nneditor.ui.tensor import TensorPanel
from nneditor.ui.tensor.blocks import list_blocks
from nneditor.ui.tensor.view_spec import peak_downsample, sample_steps
from nneditor.ui.tensor.viz_data import color_levels, pick_view

RNG = np.random.default_rng(11)


@pytest.fixture
def panel(qtbot, qapp) -> Iterator[TensorPanel]:  # noqa: ANN001
    from nneditor.ui import theme

    theme.apply(qapp, dark=False)
    p = TensorPanel()
    qtbot.addWidget(p)
    p.resize(1000, 700)
    p.show()
    yield p
    p.shutdown()


def _ref(arr: np.ndarray, name: str = "t") -> TensorRef:
    return TensorRef(name, str(arr.dtype), arr.shape, arr.nbytes, "raw", ArrayLoader(arr))


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return (e / e.sum(axis=-1, keepdims=True)).astype(np.float32)


# --------------------------------------------------------------------------- view choice


def test_visualization_picks_the_view_from_the_shape(panel: TensorPanel) -> None:
    cases = [
        (RNG.standard_normal(50).astype(np.float32), "bias", "line"),
        (RNG.standard_normal((6, 9)).astype(np.float32), "fc.weight", "heatmap"),
        (RNG.random((16, 12, 12)).astype(np.float32), "conv1.out", "feature_maps"),
        (RNG.standard_normal((8, 3, 5, 5)).astype(np.float32), "conv.weight", "feature_maps"),
        (_softmax(RNG.standard_normal((4, 10, 10))), "layer0.out", "attention"),
        (_softmax(RNG.standard_normal((2, 4, 7, 7))), "x", "attention"),
        (RNG.standard_normal((4, 10, 10)).astype(np.float32), "attn_scores", "attention"),
        (np.float32(1).reshape(()), "scale", "histogram"),
    ]
    for arr, name, want in cases:
        panel.set_array(arr, name)
        panel.show_tab("Visualization")
        assert panel.viz.kind == want, (name, arr.shape)
        assert panel.viz.combo.currentData() == want


def test_pick_view_rules() -> None:
    assert pick_view((3, 8, 8), hint="heatmap") == "heatmap"
    assert pick_view((3, 8, 8), hint="line") == "line"
    assert pick_view((8,), hint="attention") == "line"  # a hint that does not fit is ignored
    assert pick_view((2, 3, 4, 5, 6)) == "heatmap"
    assert pick_view((4, 5, 5), probe=lambda: np.array([0.5, 0.6])) == "feature_maps"
    assert pick_view((4, 2, 2), probe=lambda: np.array([0.25, 0.75])) == "attention"


def test_heatmap_follows_the_view_plane(panel: TensorPanel) -> None:
    arr = RNG.standard_normal((3, 4, 6)).astype(np.float32)
    panel.set_array(arr, "x", {"view": "heatmap"})
    panel.show_tab("Visualization")
    assert panel.viz.kind == "heatmap"
    np.testing.assert_array_equal(panel.viz.image, arr[0])
    panel.view_tab.controls.spins[0].setValue(2)
    np.testing.assert_array_equal(panel.viz.image, arr[2])
    assert "[2, :, :]" in panel.viz.caption.text()


def test_heatmap_of_a_large_plane_is_strided_and_says_so(panel: TensorPanel) -> None:
    arr = RNG.standard_normal((3000, 40)).astype(np.float32)
    panel.set_tensor(_ref(arr))
    panel.show_view("heatmap")
    np.testing.assert_array_equal(panel.viz.image, arr[::3])
    assert "every 3rd row" in panel.viz.caption.text()


def test_feature_maps_tile_the_channels(panel: TensorPanel) -> None:
    acts = RNG.random((1, 70, 6, 5)).astype(np.float32)  # N×C×H×W, 70 channels
    panel.set_array(acts, "conv.out")
    panel.show_tab("Visualization")
    viz = panel.viz
    assert viz.kind == "feature_maps" and viz.grid_axis.currentIndex() == 1
    img = viz.image
    assert img.shape == (8 * 7 - 1, 8 * 6 - 1)  # 8×8 grid of 6×5 maps, 1-pixel gaps
    np.testing.assert_array_equal(img[0:6, 0:5], acts[0, 0])
    np.testing.assert_array_equal(img[7:13, 6:11], acts[0, 9])  # grid row 1, col 1
    assert np.isnan(img[6, 0]) and np.isnan(img[0, 5])
    assert "Maps 0–63 of 70" in viz.caption.text()
    viz.first.setValue(64)
    np.testing.assert_array_equal(viz.image[0:6, 0:5], acts[0, 64])
    assert "Maps 64–69 of 70" in viz.caption.text()


def test_attention_map_shows_the_selected_head(panel: TensorPanel) -> None:
    att = _softmax(RNG.standard_normal((2, 3, 9, 9)))
    panel.set_array(att, "probs")
    panel.show_tab("Visualization")
    viz = panel.viz
    assert viz.kind == "attention"
    viz.batch.setValue(1)
    viz.head.setValue(2)
    np.testing.assert_allclose(viz.image, att[1, 2])
    assert "batch 1, head 2 of 3" in viz.caption.text()


def test_line_view_downsamples_large_vectors_and_keeps_peaks(panel: TensorPanel) -> None:
    y = RNG.standard_normal(300_000).astype(np.float32)
    y[123_457] = 50.0
    panel.set_tensor(_ref(y))
    panel.show_view("line")
    x, ys = panel.viz.curve
    assert ys.size <= 100_000
    assert ys.max() == 50.0 and ys.min() == y.min()
    assert "downsampled from 300,000" in panel.viz.caption.text()


def test_histogram_is_a_labelled_sample_until_statistics_exist(qtbot, panel: TensorPanel) -> None:  # noqa: ANN001
    arr = RNG.standard_normal((2100, 1000)).astype(np.float32)
    panel.set_tensor(_ref(arr))
    panel.show_view("histogram")
    assert "sample" in panel.viz.caption.text()
    edges, counts = panel.viz.curve
    assert 500_000 < counts.sum() <= 1 << 20  # every 3rd row: 700,000 values
    panel.show_tab("Statistics")
    panel.stats_tab.compute()
    qtbot.waitUntil(lambda: panel.stats_tab.stats is not None, timeout=30000)
    panel.show_tab("Visualization")
    assert "statistics of 2,100,000 values" in panel.viz.caption.text()
    edges, counts = panel.viz.curve
    want, _ = np.histogram(arr, bins=len(counts), range=(edges[0], edges[-1]))
    np.testing.assert_array_equal(counts, want)


def test_sampling_and_downsampling_helpers() -> None:
    assert sample_steps((49152, 576), 1 << 20) == (28, 1)
    assert sample_steps((2, 10_000_000), 1 << 20) == (2, 10)
    assert sample_steps((10,), 100) == (1,)
    y = np.arange(1000, dtype=np.float64)
    x, ys, width = peak_downsample(y, 100)
    assert width == 20 and ys.size == 100 and ys[0] == 0 and ys[1] == 19
    lv = color_levels(np.array([-1.0, 0.5, 2.0]))
    assert lv.diverging and (lv.low, lv.high) == (-2.0, 2.0) and not lv.clipped
    v = RNG.standard_normal(10_000)
    v[0] = 1000.0
    lv = color_levels(v)  # one outlier does not wash out the colour scale
    assert lv.clipped and lv.high < 5 and lv.data_max == 1000.0 and "clipped" in lv.describe()


# --------------------------------------------------------------------------- ggml blocks


def _write_gguf(path: Path) -> Path:
    w = gguf.GGUFWriter(str(path), "llama")
    for t in (Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1, Q.Q8_0):
        values = RNG.standard_normal((3, 96)).astype(np.float32)
        w.add_tensor(f"w.{t.name}", quants.quantize(values, t), raw_dtype=t)
    w.add_tensor("k.Q4_K", _q4_k_blocks(), raw_dtype=Q.Q4_K)
    w.add_tensor("k.Q6_K", _q6_k_blocks(), raw_dtype=Q.Q6_K)
    w.add_tensor("norm", RNG.standard_normal(96).astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def _q4_k_blocks() -> np.ndarray:
    """Two Q4_K super-blocks whose every value is d·1·q − dmin·1, so dequantize shows d, dmin."""
    blocks = []
    for d, dmin, q in ((0.5, 0.25, 1), (-2.0, 0.125, 0)):
        b = bytearray(144)
        b[0:4] = np.array([d, dmin], dtype="<f2").tobytes()
        b[4:16] = bytes([1, 1, 1, 1, 1, 1, 1, 1, 0x11, 0x11, 0x11, 0x11])  # sc = m = 1
        b[16:144] = bytes([q | (q << 4)] * 128)
        blocks.append(np.frombuffer(bytes(b), np.uint8))
    return np.stack(blocks).reshape(1, 288)


def _q6_k_blocks() -> np.ndarray:
    """One Q6_K super-block with scales 1 and codes 33: every value equals d."""
    b = bytearray(210)
    b[0:128] = bytes([0x11] * 128)  # low 4 bits of q = 1
    b[128:192] = bytes([0xAA] * 64)  # high 2 bits of q = 2 -> q = 33
    b[192:208] = bytes([1] * 16)
    b[208:210] = np.array([0.75], dtype="<f2").tobytes()
    return np.frombuffer(bytes(b), np.uint8).reshape(1, 210)


@pytest.fixture
def gguf_doc(tmp_path: Path) -> Iterator[tuple[Document, Path]]:
    path = _write_gguf(tmp_path / "q.gguf")
    doc = open_document(path)
    yield doc, path
    doc.close()


def _reference(path: Path) -> dict[str, np.ndarray]:
    reader = gguf.GGUFReader(str(path))
    return {
        t.name: quants.dequantize(np.array(t.data), t.tensor_type).reshape(-1)
        for t in reader.tensors
    }


@pytest.mark.parametrize("qtype", ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0"])
def test_block_fields_reproduce_gguf_dequantize(gguf_doc, qtype: str, unchanged) -> None:  # noqa: ANN001
    doc, path = gguf_doc
    check = unchanged(path)
    want = _reference(path)[f"w.{qtype}"]
    ref = doc.tensors[f"w.{qtype}"]
    listing = list_blocks(ref, doc.sources[0], first_row=1, rows=2, max_blocks=100)
    assert len(listing.records) == 6 and listing.blocks_per_row == 3
    file_bytes = path.read_bytes()
    for rec in listing.records:
        assert file_bytes[rec.offset : rec.offset + listing.type_size] == rec.raw
        values = rec.values(listing.ggml_type)
        start = (rec.row * 96) + rec.block * 32
        np.testing.assert_allclose(values, want[start : start + 32], rtol=1e-6, atol=1e-7)
    check()


def test_k_quant_scales_match_gguf_dequantize(gguf_doc) -> None:  # noqa: ANN001
    doc, path = gguf_doc
    ref_vals = _reference(path)
    q4k = list_blocks(doc.tensors["k.Q4_K"], doc.sources[0]).records
    assert [r.fields["d"] for r in q4k] == [ref_vals["k.Q4_K"][0] + 0.25, -2.0]
    assert -q4k[1].fields["dmin"] == ref_vals["k.Q4_K"][256]
    assert q4k[0].codes is None and len(q4k[0].raw) == 144
    q6k = list_blocks(doc.tensors["k.Q6_K"], doc.sources[0]).records
    assert q6k[0].fields == {"d": float(ref_vals["k.Q6_K"][0])} == {"d": 0.75}


def test_raw_block_toggle_lists_fields(panel: TensorPanel, gguf_doc) -> None:  # noqa: ANN001
    doc, _ = gguf_doc
    panel.set_tensor(doc.tensors["w.Q4_1"], source=doc.sources[0])
    vt = panel.view_tab
    assert not vt.blocks_toggle.isHidden()
    vt.blocks_toggle.setChecked(True)
    headers = [vt.blocks.horizontalHeaderItem(i).text() for i in range(vt.blocks.columnCount())]
    assert headers == ["Row", "Block", "Offset", "d", "m", "Quant codes (element order)"]
    assert vt.blocks.rowCount() == 3 * 3
    assert len(vt.blocks.item(0, 5).text().split()) == 32
    assert "Q4_1: blocks of 32 values in 20 bytes, 3 per row" in vt.block_note.text()
    vt.block_row.setValue(2)
    assert vt.blocks.rowCount() == 3 and vt.blocks.item(0, 0).text() == "2"
    panel.set_tensor(doc.tensors["norm"], source=doc.sources[0])
    assert vt.blocks_toggle.isHidden()


def test_a_small_range_heatmap_labels_its_colour_bar(panel: TensorPanel) -> None:
    import pyqtgraph as pg

    from nneditor.ui.tensor.viz_data import bar_ticks

    diff = (RNG.standard_normal((32, 64)) * 4e-4).astype(np.float32)  # an A - B of a weight
    panel.set_array(diff, "a_minus_b")
    panel.show_tab("Visualization")
    assert panel.viz.kind == "heatmap"
    bars = [i for i in panel.viz.plot_area.ci.items if isinstance(i, pg.ColorBarItem)]
    assert len(bars) == 1
    labels = [text for level in bars[0].getAxis("right")._tickLevels for _v, text in level]
    assert len(labels) >= 3 and "0" in labels and any(t.startswith("-") for t in labels)
    assert labels == [t for _v, t in bar_ticks(*bars[0].levels())]
    # pyqtgraph clips away labels wider than the axis (this left only "0" on screen)
    from PySide6.QtGui import QFont, QFontMetrics

    axis = bars[0].getAxis("right")
    metrics = QFontMetrics(axis.style.get("tickFont") or QFont())
    assert axis.width() >= max(metrics.horizontalAdvance(t) for t in labels) + 10


def test_bar_ticks_are_round_and_inside_the_range() -> None:
    from nneditor.ui.tensor.viz_data import bar_ticks

    assert [t for _v, t in bar_ticks(-0.001092, 0.001092)] == [
        "-0.001",
        "-0.0005",
        "0",
        "0.0005",
        "0.001",
    ]
    assert [t for _v, t in bar_ticks(0.0, 1.0)] == ["0", "0.2", "0.4", "0.6", "0.8", "1"]
    assert bar_ticks(3.0, 3.0) == [(3.0, "3")]
    for lo, hi in [(-7.3, 123.0), (1e-9, 5e-9), (-2e6, -1e6)]:
        values = [v for v, _t in bar_ticks(lo, hi)]
        assert 3 <= len(values) <= 10 and lo <= values[0] and values[-1] <= hi
