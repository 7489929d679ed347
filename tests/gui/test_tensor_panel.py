"""TensorPanel: paged table model, slice controls, hex, statistics job, export, metadata.

Fixtures are ONNX models written with onnx.helper; expected values come from the numpy arrays
the test wrote (and the file's own bytes), never from NNEditor's readers.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from PySide6.QtCore import QItemSelectionModel, QModelIndex, Qt, qInstallMessageHandler
from PySide6.QtGui import QImage
from PySide6.QtTest import QAbstractItemModelTester

from nneditor.artifacts.registry import open_document
from nneditor.model.document import Document
from nneditor.model.tensor import TensorRef
from nneditor.tensors.loaders import ArrayLoader, TensorLoader, UnavailableLoader
from nneditor.ui.tensor import TensorPanel, TensorTableModel
from nneditor.ui.tensor.table_model import PAGE_COLS, PAGE_ROWS
from nneditor.ui.tensor.view_spec import ViewSpec

RNG = np.random.default_rng(7)
W4 = RNG.standard_normal((2, 3, 4, 5)).astype(np.float32)
BIG = RNG.standard_normal((700, 300)).astype(np.float32)
IDS = np.arange(-5, 45, dtype=np.int64)


def _write_model(path: Path) -> Path:
    inits = [
        numpy_helper.from_array(W4, "w4"),
        numpy_helper.from_array(BIG, "big"),
        numpy_helper.from_array(IDS, "ids"),
    ]
    nodes = [
        helper.make_node("Identity", ["w4"], ["y"], name="copy_w4"),
        helper.make_node("Identity", ["big"], ["z"], name="copy_big"),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [],
        [
            helper.make_tensor_value_info("y", TensorProto.FLOAT, list(W4.shape)),
            helper.make_tensor_value_info("z", TensorProto.FLOAT, list(BIG.shape)),
        ],
        inits,
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


@pytest.fixture
def model_path(tmp_path: Path) -> Path:
    return _write_model(tmp_path / "m.onnx")


@pytest.fixture
def doc(model_path: Path) -> Iterator[Document]:
    d = open_document(model_path)
    yield d
    d.close()


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


@contextlib.contextmanager
def qt_messages() -> Iterator[list[str]]:
    """Collects Qt log messages (QAbstractItemModelTester reports through qWarning)."""
    messages: list[str] = []
    old = qInstallMessageHandler(lambda _mode, _ctx, msg: messages.append(msg))
    try:
        yield messages
    finally:
        qInstallMessageHandler(old)


def _mem_ref(arr: np.ndarray, name: str = "t", dtype: str | None = None) -> TensorRef:
    from nneditor.tensors.dtypes import dtype_name

    return TensorRef(
        name, dtype or dtype_name(arr.dtype), arr.shape, arr.nbytes, "raw", ArrayLoader(arr)
    )


# --------------------------------------------------------------------------- table model


@pytest.mark.parametrize(
    "arr",
    [
        W4,
        np.float32(3.5).reshape(()),
        IDS,
        np.array([[True, False], [False, True]]),
        np.array([1 + 2j, -3.5j], dtype=np.complex64),
        np.array(["alpha", "β", "x" * 200], dtype=object),
        np.zeros((0, 4), np.float32),
        RNG.standard_normal((300, 70)).astype(np.float16),
    ],
    ids=["4d", "scalar", "int64", "bool", "complex", "string", "empty", "fp16"],
)
def test_table_model_passes_qt_model_tester(qtbot, arr: np.ndarray) -> None:  # noqa: ANN001
    dtype = "string" if arr.dtype == object else None
    with qt_messages() as messages:
        model = TensorTableModel(_mem_ref(arr, dtype=dtype))
        mode = QAbstractItemModelTester.FailureReportingMode.Warning
        tester = QAbstractItemModelTester(model, mode)
        for r in range(min(3, model.rowCount())):
            for c in range(min(3, model.columnCount())):
                model.data(model.index(r, c))
        if arr.ndim >= 2:
            spec = model.spec
            if arr.ndim == 4:
                model.set_spec(spec.with_index(0, 1))  # same size: dataChanged
                model.set_spec(spec.with_axes(3, 0))  # new size: reset
            model.set_spec(ViewSpec.default(arr.shape))
        model.set_tensor(None)
        model.set_tensor(_mem_ref(arr, dtype=dtype))
        del tester
    failures = [m for m in messages if "FAIL" in m]
    assert not failures, failures


def test_model_tester_failures_are_caught(qtbot) -> None:  # noqa: ANN001
    """The check above can fail: a model claiming children under every index is reported."""

    class Broken(TensorTableModel):
        def rowCount(self, parent=QModelIndex()) -> int:  # noqa: N802, ANN001, B008
            return 3

    with qt_messages() as messages:
        tester = QAbstractItemModelTester(
            Broken(_mem_ref(W4)), QAbstractItemModelTester.FailureReportingMode.Warning
        )
        del tester
    assert any("FAIL" in m for m in messages)


def test_cells_show_compact_values_of_every_dtype() -> None:
    m = TensorTableModel(_mem_ref(np.array([1 / 3, 1e-9, np.nan, -np.inf], np.float32)))
    texts = [m.data(m.index(r, 0)) for r in range(4)]
    assert texts == ["0.333333", "1e-09", "nan", "-inf"]
    m = TensorTableModel(_mem_ref(np.array([[True], [False]])))
    assert [m.data(m.index(r, 0)) for r in range(2)] == ["true", "false"]
    m = TensorTableModel(_mem_ref(np.array([1.5 - 2j], np.complex64)))
    assert m.data(m.index(0, 0)) == "1.5-2j"
    m = TensorTableModel(_mem_ref(np.array(["a\nb"], dtype=object), dtype="string"))
    assert m.data(m.index(0, 0)) == "a⏎b"
    bf = np.array([1.0078125, -2.5], dtype=ml_dtypes.bfloat16)
    m = TensorTableModel(_mem_ref(bf))
    assert [m.data(m.index(r, 0)) for r in range(2)] == ["1.00781", "-2.5"]
    tip = m.data(m.index(1, 0), Qt.ItemDataRole.ToolTipRole)
    assert tip == "[1] = -2.5"


class CountingLoader(TensorLoader):
    def __init__(self, arr: np.ndarray) -> None:
        self.arr = arr
        self.elements: list[int] = []

    def read(self, shape, key):  # noqa: ANN001, ANN201
        out = np.array(self.arr.reshape(shape)[key] if key is not None else self.arr)
        self.elements.append(out.size)
        return out


def test_table_reads_only_the_visible_page() -> None:
    arr = RNG.standard_normal((5000, 1000)).astype(np.float32)
    loader = CountingLoader(arr)
    model = TensorTableModel(TensorRef("x", "float32", arr.shape, arr.nbytes, "raw", loader))
    assert (model.rowCount(), model.columnCount()) == (5000, 1000)
    assert loader.elements == []  # counts come from the shape
    assert model.data(model.index(4321, 777)) == f"{arr[4321, 777]:.6g}"
    assert loader.elements == [PAGE_ROWS * PAGE_COLS]
    model.data(model.index(4322, 778))  # same page: cached
    assert len(loader.elements) == 1


def test_slice_controls_on_4d_tensor_show_numpy_values(panel: TensorPanel, doc: Document) -> None:
    panel.set_tensor(doc.tensors["w4"], source=doc.sources[0])
    ctl = panel.view_tab.controls
    assert [not s.isHidden() for s in ctl.spins] == [True, True, False, False]
    ctl.row_combo.activated.emit(3)  # rows: axis 3
    ctl.col_combo.activated.emit(1)  # columns: axis 1
    ctl.spins[0].setValue(1)
    ctl.spins[2].setValue(2)
    assert [not s.isHidden() for s in ctl.spins] == [True, False, True, False]
    model = panel.view_tab.model
    want = W4[1, :, 2, :].T  # rows = axis 3, columns = axis 1
    assert (model.rowCount(), model.columnCount()) == want.shape
    got = np.array(
        [[float(model.data(model.index(r, c))) for c in range(want.shape[1])] for r in range(5)]
    )
    np.testing.assert_allclose(got, want, rtol=1e-5)
    assert "[1, :, 2, :]" in ctl.plane.text()
    # picking the column axis as rows swaps the two
    ctl.row_combo.activated.emit(1)
    assert (model.spec.row_axis, model.spec.col_axis) == (1, 3)
    assert model.data(model.index(2, 4)) == f"{W4[1, 2, 2, 4]:.6g}"


def test_unreadable_tensor_explains_why(panel: TensorPanel) -> None:
    ref = TensorRef("q", "float32", (4, 4), 0, "IQ9_Z", UnavailableLoader("IQ9_Z is unknown"))
    panel.set_tensor(ref)
    panel.show_tab("View")
    assert panel.view_tab.model.data(panel.view_tab.model.index(0, 0)) == ""
    assert panel.view_tab.error.isVisible()
    assert "IQ9_Z is unknown" in panel.view_tab.error.text()
    panel.show_view("heatmap")
    assert "Cannot plot this tensor" in panel.viz.caption.text()


# --------------------------------------------------------------------------- metadata, hex


def test_metadata_lists_encoding_sizes_range_and_usage(
    panel: TensorPanel, doc: Document, model_path: Path
) -> None:
    ref = doc.tensors["big"]
    panel.set_tensor(ref, source=doc.sources[0], usage=["copy_big (Identity, input 0)"])
    html = panel.meta.toPlainText()
    start = model_path.read_bytes().find(BIG.tobytes())
    assert f"bytes {start:,} – {start + BIG.nbytes:,}" in html
    assert "[700 × 300]" in html and "210,000" in html
    assert "copy_big (Identity, input 0)" in html
    assert "820 KiB (840,000 bytes)" in html
    assert not panel.partial_badge.isVisible()


def test_hex_view_bytes_equal_the_file(
    panel: TensorPanel, doc: Document, model_path: Path, unchanged
) -> None:  # noqa: ANN001
    check = unchanged(model_path)
    data = model_path.read_bytes()
    ref = doc.tensors["w4"]
    panel.set_tensor(ref, source=doc.sources[0])
    panel.show_tab("Hex")
    hx = panel.hex_tab
    model = hx.model
    start = data.find(W4.tobytes())
    assert model.start == start - start % 16
    for r in range(model.rowCount()):
        for b in range(len(model.rows[r].data)):
            offset, value = model.byte_at(r, b)
            assert value == data[offset]
            text = model.data(model.index(r, b + 1))
            assert text == f"{data[offset]:02x}"
            tinted = model.data(model.index(r, b + 1), Qt.ItemDataRole.BackgroundRole)
            assert (tinted is not None) == (start <= offset < start + W4.nbytes)
    assert model.data(model.index(0, 0)) == f"{model.start:010x}"
    hx.jump.setText("0x10")
    hx.jump.returnPressed.emit()
    assert model.start == 16 and model.byte_at(0, 0) == (16, data[16])
    hx.next_button.click()
    assert model.start == 16 + 4096
    hx.header_button.click()
    assert model.start == 0 and not hx.prev_button.isEnabled()
    assert bytes(int(model.data(model.index(0, c + 1)), 16) for c in range(16)) == data[:16]
    hx.jump.setText("zz")
    hx.jump.returnPressed.emit()
    assert "'zz' is not an offset" in hx.where.text()
    check()


def test_hex_tab_explains_a_tensor_without_bytes(panel: TensorPanel) -> None:
    panel.set_array(np.ones((2, 2), np.float32), "act")
    assert panel.hex_tab.stack.currentIndex() == 1
    assert "held in memory" in panel.hex_tab.reason.text()


def test_partial_capture_is_labelled(panel: TensorPanel) -> None:
    prefix = np.arange(2 * 8 * 8, dtype=np.float32)  # 2 of 4 channels
    ref = panel.set_array(prefix, "conv1.out", {"shape": [4, 8, 8], "node": "Conv_1"})
    assert ref.shape == (2, 8, 8)
    assert panel.is_partial and panel.partial_badge.isVisible()
    text = panel.meta.toPlainText()
    assert "Partial capture: 128 of 256 values of the original shape [4 × 8 × 8]" in text
    assert "Conv_1" in text
    panel.set_array(np.arange(256, dtype=np.float32), "full", {"shape": [4, 8, 8]})
    assert panel.ref is not None and panel.ref.shape == (4, 8, 8)
    assert not panel.is_partial and not panel.partial_badge.isVisible()


# --------------------------------------------------------------------------- statistics


def test_statistics_job_matches_numpy_and_is_cached(
    qtbot, panel: TensorPanel, doc: Document
) -> None:  # noqa: ANN001
    ref = doc.tensors["big"]
    panel.set_tensor(ref, source=doc.sources[0])
    panel.show_tab("Statistics")
    tab = panel.stats_tab
    tab.compute_button.click()
    qtbot.waitUntil(lambda: tab.stats is not None, timeout=10000)
    st = tab.stats
    assert st is not None and not st.partial
    assert st.min == pytest.approx(float(BIG.min()))
    assert st.max == pytest.approx(float(BIG.max()))
    assert st.mean == pytest.approx(float(BIG.astype(np.float64).mean()), rel=1e-9)
    assert st.std == pytest.approx(float(BIG.astype(np.float64).std()), rel=1e-9)
    rows = {tab.table.item(i, 0).text(): tab.table.item(i, 1).text() for i in range(12)}
    assert rows["Min"] == f"{float(BIG.min()):.7g}"
    assert rows["Count"] == "210,000"
    assert "exact" in tab.method.text()
    assert f"{np.percentile(BIG, 50):.7g}" in [
        tab.pct_table.item(i, 1).text() for i in range(tab.pct_table.rowCount())
    ]
    panel.set_tensor(doc.tensors["w4"])
    assert tab.stats is None
    panel.set_tensor(ref, source=doc.sources[0])
    assert tab.stats is st and "cached" in tab.status.text()


class GatedLoader(TensorLoader):
    """Serves the first read at once, later reads only after ``gate`` is set."""

    def __init__(self, arr: np.ndarray) -> None:
        self.arr = arr
        self.gate = threading.Event()
        self.reads = 0

    def read(self, shape, key):  # noqa: ANN001, ANN201
        self.reads += 1
        if self.reads > 1:
            self.gate.wait(10)
        a = self.arr.reshape(shape)
        return np.array(a if key is None else a[key])


def test_cancel_shows_partial_statistics(qtbot, panel: TensorPanel) -> None:  # noqa: ANN001
    arr = RNG.standard_normal((3, 1 << 20)).astype(np.float32)
    loader = GatedLoader(arr)
    ref = TensorRef("slow", "float32", arr.shape, arr.nbytes, "raw", loader)
    panel.set_tensor(ref)
    tab = panel.stats_tab
    tab.compute_button.click()
    assert tab.cancel_button.isEnabled() and not tab.compute_button.isEnabled()
    qtbot.waitUntil(lambda: tab.progress.value() > 0, timeout=10000)
    tab.cancel_button.click()
    loader.gate.set()
    qtbot.waitUntil(lambda: tab.stats is not None, timeout=10000)
    st = tab.stats
    assert st is not None and st.partial and st.processed < arr.size
    done = arr.reshape(-1)[: st.processed]
    assert st.max == pytest.approx(float(done.max()))
    assert "PARTIAL" in tab.status.text()
    assert tab.compute_button.isEnabled()
    panel.set_tensor(ref)  # partial results are never cached
    assert tab.stats is None


# --------------------------------------------------------------------------- export


def test_export_npy_equals_tensor_slice_and_selection(
    qtbot, panel: TensorPanel, doc: Document, tmp_path: Path
) -> None:  # noqa: ANN001
    panel.set_tensor(doc.tensors["w4"], source=doc.sources[0])
    ctl = panel.view_tab.controls
    ctl.spins[0].setValue(1)
    ctl.spins[1].setValue(2)  # plane [1, 2, :, :]
    with qtbot.waitSignal(panel.exported, timeout=10000):
        panel.export_npy(tmp_path / "slice.npy", "slice")
    np.testing.assert_array_equal(np.load(tmp_path / "slice.npy"), W4[1, 2])
    with qtbot.waitSignal(panel.exported, timeout=10000) as sig:
        panel.export_npy(tmp_path / "all.npy", "tensor")
    np.testing.assert_array_equal(np.load(tmp_path / "all.npy"), W4)
    assert "Saved 2×3×4×5 float32" in sig.args[0]
    table = panel.view_tab.table
    sel = table.selectionModel()
    flags = QItemSelectionModel.SelectionFlag.Select
    sel.select(panel.view_tab.model.index(1, 2), flags)
    sel.select(panel.view_tab.model.index(3, 4), flags)
    with qtbot.waitSignal(panel.exported, timeout=10000):
        panel.export_npy(tmp_path / "sel.npy", "selection")
    np.testing.assert_array_equal(np.load(tmp_path / "sel.npy"), W4[1, 2, 1:4, 2:5])
    assert not list(tmp_path.glob("*.part"))


def test_export_converts_bfloat16_and_streams_large_tensors(
    qtbot, panel: TensorPanel, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:  # noqa: ANN001
    import nneditor.ui.tensor.export as export

    monkeypatch.setattr(export, "CHUNK", 1000)  # force many chunks
    arr = RNG.standard_normal((50, 77)).astype(ml_dtypes.bfloat16)
    panel.set_tensor(_mem_ref(arr, "bf"))
    with qtbot.waitSignal(panel.exported, timeout=10000) as sig:
        panel.export_npy(tmp_path / "bf.npy", "tensor")
    out = np.load(tmp_path / "bf.npy")
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, arr.astype(np.float32))
    assert "converted from bfloat16" in sig.args[0]


def test_export_png_of_each_tab(panel: TensorPanel, doc: Document, tmp_path: Path) -> None:
    panel.set_tensor(doc.tensors["big"], source=doc.sources[0])
    for tab in ("Metadata", "View", "Visualization", "Hex"):
        panel.show_tab(tab)
        path = tmp_path / f"{tab}.png"
        assert panel.export_png(path)
        img = QImage(str(path))
        assert not img.isNull() and img.width() > 300 and img.height() > 200


def test_pyqtgraph_is_imported_only_when_plots_are_needed() -> None:
    code = (
        "import sys\n"
        "import nneditor.ui.tensor\n"
        "assert 'pyqtgraph' not in sys.modules, 'imported too early'\n"
        "import nneditor.ui.tensor.viz\n"
        "assert sys.modules['pyqtgraph'].Qt.QT_LIB == 'PySide6'\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
