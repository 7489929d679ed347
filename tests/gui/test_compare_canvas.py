"""The side-by-side comparison in the window: the example model against an edited copy (one
weight of blocks.1 perturbed, ln_f's epsilon changed, one block added) and against its
quantized export; matched blocks share rows, colours follow the weight deltas, the views
scroll together, and a weight pair opens as A, B and A − B with numpy's values."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

pytest.importorskip("PySide6")

from PySide6.QtCore import Qt  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "tiny_transformer.onnx"
CHANGED = "blocks.1.mlp.fc1.weight"


def _edited(path: Path) -> Path:
    model = onnx.load(str(EXAMPLE))
    init = next(t for t in model.graph.initializer if t.name == CHANGED)
    w = numpy_helper.to_array(init).copy()
    w[0, :] += np.float32(0.5)
    init.CopyFrom(numpy_helper.from_array(w, CHANGED))
    model.graph.initializer.append(
        numpy_helper.from_array(np.ones(32, np.float32), "post_norm.scale")
    )
    head = next(n for n in model.graph.node if n.name == "/lm_head/MatMul")
    mul = helper.make_node(
        "Mul", [head.input[0], "post_norm.scale"], ["/post_norm/Mul_output_0"], "/post_norm/Mul"
    )
    head.input[0] = "/post_norm/Mul_output_0"
    model.graph.node.insert(list(model.graph.node).index(head), mul)
    norm = next(n for n in model.graph.node if n.name == "/ln_f/LayerNormalization_47")
    del norm.attribute[:]
    norm.attribute.append(helper.make_attribute("epsilon", 1e-3))
    onnx.save(model, str(path))
    return path


def _arrays(path: Path) -> dict[str, np.ndarray]:
    return {t.name: numpy_helper.to_array(t) for t in onnx.load(str(path)).graph.initializer}


def _compare(qtbot, window, other: Path):  # noqa: ANN001, ANN202
    window.compare_with(str(other))
    qtbot.waitUntil(lambda: window.compare_dialog is not None, timeout=60000)
    dialog = window.compare_dialog
    assert dialog.tabs.tabText(0) == "Side by side"
    sbs = dialog.side_by_side
    assert sbs is not None and sbs.pair is not None
    return dialog, sbs


def _boxes(sbs, label: str):  # noqa: ANN001, ANN202
    slot = next(s for s in sbs.pair.slots if label in (s.a and s.a.label, s.b and s.b.label))
    a = sbs.scene_a.items_by_key[slot.a.key] if slot.a else None
    b = sbs.scene_b.items_by_key[slot.b.key] if slot.b else None
    return slot, a, b


def test_side_by_side_edited_copy(qtbot, open_model, window, tmp_path: Path) -> None:  # noqa: ANN001
    from nneditor.ui.compare.marks import ADDED
    from nneditor.ui.compare.marks import CHANGED as CHANGED_OPS

    edited = _edited(tmp_path / "edited.onnx")
    open_model(EXAMPLE)
    dialog, sbs = _compare(qtbot, window, edited)
    dialog.resize(1500, 950)
    matched = [s for s in sbs.pair.slots if s.matched]
    assert len(matched) >= 6 and "paired by name" in sbs.note.text()
    for s in matched:  # the same row (and column) on both sides
        a, b = sbs.scene_a.items_by_key[s.a.key], sbs.scene_b.items_by_key[s.b.key]
        assert a.pos() == b.pos(), s.label
    added, none, box_b = _boxes(sbs, "post_norm")
    assert none is None and added.b.label == "post_norm"
    assert all(
        abs(box.pos().y() - box_b.pos().y()) > 1 for box in sbs.scene_a.items_by_key.values()
    )
    mark = next(m for m in sbs.marks if m.box is box_b)
    assert mark.tag == "only in B" and mark.outline == ADDED

    hue = {}
    for label in ("embed_tokens", "blocks.0", "blocks.1", "ln_f", "lm_head"):
        slot, a, b = _boxes(sbs, label)
        assert a.heat is not None and a.heat == b.heat, label
        hue[label] = a.heat.hue()
    assert hue["blocks.1"] < 20, hue  # red: rel L2 0.74
    assert all(hue[k] > 100 for k in hue if k != "blocks.1"), hue  # green: equal weights
    slot, a, _ = _boxes(sbs, "ln_f")
    assert slot.changed_ops == 1 and next(m for m in sbs.marks if m.box is a).outline == CHANGED_OPS

    sbs.view_a.set_zoom(2.0)
    assert sbs.view_b.zoom == pytest.approx(2.0)
    bar_a, bar_b = sbs.view_a.verticalScrollBar(), sbs.view_b.verticalScrollBar()
    assert bar_a.maximum() > 100
    bar_a.setValue(bar_a.maximum() // 2)
    assert bar_b.value() == bar_a.value() > 0
    centre = sbs.view_a.viewport().rect().center()
    assert sbs.view_a.mapToScene(centre) == sbs.view_b.mapToScene(centre)
    bar_b.setValue(bar_b.minimum())
    assert bar_a.value() == bar_a.minimum()
    sbs.view_a.fit()

    slot, a, b = _boxes(sbs, "blocks.1")
    click = sbs.view_a.mapFromScene(a.sceneBoundingRect().center())
    qtbot.mouseClick(sbs.view_a.viewport(), Qt.MouseButton.LeftButton, pos=click)
    assert sbs.selected is slot and a.selected and b.selected
    table = sbs.details.table
    assert table.rows[0]["a"] == CHANGED and table.item(0, 2).text() == "changed"
    dialog.grab().save(str(tmp_path / "side_by_side.png"))

    table.activate(0)
    triple = dialog.pair_dialogs[-1]
    qtbot.addWidget(triple)
    want_a = _arrays(EXAMPLE)[CHANGED]
    want_b = _arrays(edited)[CHANGED]
    np.testing.assert_array_equal(triple.panel_a.ref.read(), want_a)
    np.testing.assert_array_equal(triple.panel_b.ref.read(), want_b)
    np.testing.assert_array_equal(triple.difference_panel.ref.read(), want_a - want_b)
    np.testing.assert_array_equal(
        triple.difference_panel.ref.read("0:1, 2:5"), (want_a - want_b)[0:1, 2:5]
    )
    triple.panels[0].show_tab("Statistics")
    assert {p.tabs.tabText(p.tabs.currentIndex()) for p in triple.panels} == {"Statistics"}
    triple.grab().save(str(tmp_path / "tensors.png"))
    triple.close()

    assert sbs.enter("a", a.key)
    assert "blocks.1" in sbs.crumbs.text()
    for s in (s for s in sbs.pair.slots if s.matched):
        assert sbs.scene_a.items_by_key[s.a.key].pos() == sbs.scene_b.items_by_key[s.b.key].pos()
    mlp, box, _ = _boxes(sbs, "mlp")
    assert mlp.worst is not None and mlp.worst > 0.5 and box.heat.hue() < 20
    sbs.go_up()
    assert "blocks.1" not in sbs.crumbs.text()
    dialog.close()
    assert dialog.comparison is None  # B closed with the dialog


def test_side_by_side_quantized_export(qtbot, open_model, window, tmp_path: Path) -> None:  # noqa: ANN001
    from nneditor.ui.compare.marks import ADDED

    quantized = tmp_path / "q.onnx"
    done = subprocess.run(
        [sys.executable, "-m", "nneditor", "quantize", str(EXAMPLE), "--out", str(quantized)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    open_model(EXAMPLE)
    dialog, sbs = _compare(qtbot, window, quantized)
    slot, a, b = _boxes(sbs, "blocks.0")
    assert slot.added_ops > 0 and next(m for m in sbs.marks if m.box is b).outline == ADDED
    assert 1e-4 < slot.worst < 1e-1 and 20 < a.heat.hue() < 100  # yellow to orange
    sbs.select("a", a.key)
    row = next(r for r in sbs.details.table.rows if r["a"] == "blocks.0.mlp.fc1.weight")
    triple = dialog.open_pair(row)
    qtbot.addWidget(triple)
    assert "DequantizeLinear" in triple.notes.text()
    arrays = _arrays(quantized)
    q, scale, zero = (arrays[f"{row['a']}_{k}"] for k in ("quantized", "scale", "zero_point"))
    deq = ((q.astype(np.float64) - zero) * scale).astype(np.float32)
    np.testing.assert_array_equal(triple.panel_b.ref.read(), deq)
    want = _arrays(EXAMPLE)[row["a"]] - deq
    np.testing.assert_array_equal(triple.difference_panel.ref.read(), want)
    assert np.abs(want).max() == pytest.approx(row["delta"]["max_abs"], rel=1e-6)
    triple.close()
    dialog.close()


def test_tensors_only_and_renamed_graphs(qtbot, tmp_path: Path) -> None:  # noqa: ANN001
    """Without graphs the tab lists the tensor pairs and says why; a pair of different shapes
    says why it has no difference; renamed operators are matched by structure, and said so."""
    from safetensors.numpy import save_file

    import nneditor
    from nneditor.jobs.protocol import SyncRunner
    from nneditor.ui.compare.canvas import SideBySide
    from nneditor.ui.compare.comparison import compare_job
    from nneditor.ui.compare_dialog import CompareDialog
    from nneditor.ui.model_index import index_document

    a, b = tmp_path / "a.safetensors", tmp_path / "b.safetensors"
    w = np.arange(12, dtype=np.float32).reshape(3, 4)
    save_file({"w": w, "v": np.zeros(3, np.float32)}, str(a))
    save_file({"w": w * 2, "v": np.zeros(5, np.float32)}, str(b))

    def comparison(x: Path, y: Path):  # noqa: ANN202
        doc = nneditor.open(x)
        index = SyncRunner().run(lambda h: index_document(doc, h)).value
        result = SyncRunner().run(compare_job(index, str(y)))
        assert result.error is None, result.error
        return result.value

    c = comparison(a, b)
    dialog = CompareDialog(c.result, parent=None, comparison=c)
    qtbot.addWidget(dialog)
    assert dialog.side_by_side is None and dialog.tabs.tabText(0) == "Side by side"
    assert "No side-by-side graph" in dialog.no_graph_note.text()
    assert "has no graph" in dialog.no_graph_note.text()
    rows = {r["a"]: r for r in dialog.pair_table.rows}
    triple = dialog.open_pair(rows["w"])
    qtbot.addWidget(triple)
    np.testing.assert_array_equal(triple.difference_panel.ref.read(), w - w * 2)
    shaped = dialog.open_pair(rows["v"])
    qtbot.addWidget(shaped)
    assert shaped.difference_panel is None and "shapes differ" in shaped.why
    dialog.close()
    c.doc_a.close()

    model = onnx.load(str(EXAMPLE))
    for k, node in enumerate(model.graph.node):
        node.name = f"renamed_{k}"
    renamed = tmp_path / "renamed.onnx"
    onnx.save(model, str(renamed))
    c = comparison(EXAMPLE, renamed)
    sbs = SideBySide(c)
    qtbot.addWidget(sbs)
    assert not c.by_name and "paired by structure" in sbs.note.text()
    assert any(s.matched and s.by == "operators" for s in sbs.pair.slots)
    sbs.shutdown()
    c.close()
    c.doc_a.close()


def test_alignment_separates_replaced_blocks() -> None:
    """An A-only and a B-only block where the other side has one block: two gap rows, never
    one shared row (headless: alignment and layout import no Qt)."""
    from nneditor.semantic.hierarchy import Group
    from nneditor.ui.canvas.level import LevelEdge, LevelItem, LevelView
    from nneditor.ui.compare.alignment import LevelPair, Slot
    from nneditor.ui.compare.side_layout import side_layouts

    def item(key: str) -> LevelItem:
        return LevelItem(key, "group", key, "", "other", 120, 56)

    def level(keys: list[str]) -> LevelView:
        items = [item(k) for k in keys]
        edges = [LevelEdge(x, y, ["v"]) for x, y in zip(keys, keys[1:], strict=False)]
        return LevelView(Group("m", "m", "model", 0), 2, 2, items, edges, {i.key: i for i in items})

    la, lb = level(["x", "old", "z"]), level(["x", "new", "z"])
    ia, ib = la.by_key, lb.by_key
    slots = [Slot(ia["x"], ib["x"], "name"), Slot(ia["old"], None), Slot(None, ib["new"])]
    slots.append(Slot(ia["z"], ib["z"], "name"))
    pair = LevelPair(la, lb, slots, {"x": 0, "old": 1, "z": 3}, {"x": 0, "new": 2, "z": 3})
    (_, lay_a), (_, lay_b) = side_layouts(pair, 28, 52)
    assert lay_a.positions["x"] == lay_b.positions["x"]
    assert lay_a.positions["z"] == lay_b.positions["z"]
    assert lay_a.positions["old"][1] != lay_b.positions["new"][1]
    assert lay_a.positions["old"][1] < lay_a.positions["z"][1]
    assert lay_b.positions["new"][1] < lay_b.positions["z"][1]
    assert lay_a.height == lay_b.height and lay_a.width == lay_b.width
