"""A graph-less checkpoint shows its module structure from tensor-name prefixes."""

from __future__ import annotations

import numpy as np
from safetensors.numpy import save_file

from nneditor.ui.tensor.dialog import TensorPanelDialog


def test_name_tree_replaces_the_graph_hierarchy(qtbot, window, open_model, tmp_path):  # noqa: ANN001
    tensors = {f"layers.{i}.attn.q.weight": np.full((2, 2), i, np.float32) for i in range(3)}
    tensors["head.weight"] = np.zeros((2, 2), np.float32)
    path = tmp_path / "sd.safetensors"
    save_file(tensors, str(path))
    open_model(path)
    tabs = window.left_tabs
    assert tabs.currentWidget() is window.names
    assert not tabs.isTabVisible(tabs.indexOf(window.tree))
    assert "tensor-name prefixes" in window.names.note.text()
    tree = window.names.tree
    top = {
        tree.topLevelItem(i).text(0): tree.topLevelItem(i) for i in range(tree.topLevelItemCount())
    }
    assert set(top) == {"layers", "head"} and top["layers"].text(1) == "3"
    layers = top["layers"]
    tree.expandItem(layers)
    assert [layers.child(i).text(0) for i in range(layers.childCount())] == ["0", "1", "2"]
    block = layers.child(2)
    tree.expandItem(block)
    attn = block.child(0)
    tree.expandItem(attn)
    q = attn.child(0)
    tree.expandItem(q)
    leaf = q.child(0)
    assert leaf.text(0) == "weight" and leaf.toolTip(0) == "layers.2.attn.q.weight"
    tree.itemActivated.emit(leaf, 0)
    qtbot.waitUntil(lambda: bool(window.findChildren(TensorPanelDialog)), timeout=5000)
    dialog = window.findChildren(TensorPanelDialog)[0]
    assert dialog.panel.ref.name == "layers.2.attn.q.weight"
    dialog.close()
