"""Canvas navigation: levels, breadcrumbs, search and the hierarchy tree stay in sync."""

from __future__ import annotations

from nneditor.ui.targets import Target


def _node_index(window, prefix: str, op: str) -> int:  # noqa: ANN001
    nodes = window.index.graph.nodes
    return next(i for i, n in enumerate(nodes) if n.name.startswith(prefix) and n.op_type == op)


def test_starts_at_architecture_level(open_model, nested_model):  # noqa: ANN001
    win = open_model(nested_model)
    s = win.session
    assert s.level.depth == 1
    labels = {it.label for it in s.level.items}
    assert "ids" in labels  # the graph input is drawn
    assert win.workbench.levels.checkedId() == 1
    assert win.workbench.item_count() == len(s.level.items) + 1  # boxes + one edges item


def test_breadcrumbs_navigate_down_and_up(qtbot, open_model, nested_model):  # noqa: ANN001
    win = open_model(nested_model)
    s = win.session
    wb = win.workbench
    stack = next(it for it in s.level.items if it.kind == "group" and it.group.children)
    with qtbot.waitSignal(wb.levelShown, timeout=10000):
        wb.view.itemActivated.emit(stack.key)
    assert s.scope is stack.group
    block = next(it for it in s.level.items if it.kind == "group")
    with qtbot.waitSignal(wb.levelShown, timeout=10000):
        s.open_item(block)
    assert [g.name for g in s.breadcrumbs][-1] == block.group.name
    crumbs = [wb.crumbs.itemAt(i).widget() for i in range(wb.crumbs.count() - 1)]
    texts = [c.text() for c in crumbs if c is not None]
    assert texts[0] == "model" and texts[-1] == block.group.name
    # click the first crumb: back to the model, at the level remembered for it
    first = crumbs[0]
    with qtbot.waitSignal(wb.levelShown, timeout=10000):
        first.click()
    assert s.scope.kind == "model" and s.level.depth == 1
    with qtbot.waitSignal(wb.levelShown, timeout=10000):
        s.open_group(block.group)
    with qtbot.waitSignal(wb.levelShown, timeout=10000):
        wb.up_button.click()
    assert s.scope is block.group.parent


def test_search_finds_and_selects_a_nested_node(qtbot, open_model, nested_model):  # noqa: ANN001
    win = open_model(nested_model)
    wb = win.workbench
    wb.search.field.setText("Softmax")
    wb.search.refresh()
    node_matches = [t for t in wb.search.matches if t.kind == "node"]
    assert len(node_matches) == 3  # one per block
    with qtbot.waitSignal(wb.levelShown, timeout=10000):
        wb.search.next()
    s = win.session
    target = s.selection
    assert target.kind == "node"
    assert win.index.graph.nodes[target.ref].op_type == "Softmax"
    # the containing block was opened and the node is its own, selected item
    key = f"n:{target.ref}"
    assert key in s.level.by_key
    assert wb.scene.items_by_key[key].selected
    assert any(g.kind == "block" for g in s.breadcrumbs)
    assert win.tree.current_target == target


def test_tree_and_canvas_selection_stay_in_sync(qtbot, open_model, nested_model):  # noqa: ANN001
    win = open_model(nested_model)
    s = win.session
    wb = win.workbench
    # canvas -> tree
    item = next(it for it in s.level.items if it.kind == "group")
    rect = wb.scene.item_rect(item.key)
    pos = wb.view.mapFromScene(rect.center())
    wb.view.click_at(pos)
    assert s.selection == Target.group(item.group.id)
    assert win.tree.current_target == Target.group(item.group.id)
    # tree -> canvas (a node deep inside a block: the canvas opens its container)
    i = _node_index(win, "/blocks.1/mlp/", "Relu")
    index = win.tree.model.index_for(Target.node(i))
    with qtbot.waitSignal(wb.levelShown, timeout=10000):
        win.tree.tree.setCurrentIndex(index)
    assert s.selection == Target.node(i)
    assert wb.scene.items_by_key[f"n:{i}"].selected
    assert "Relu" in win.inspector.toPlainText()


def test_keyboard_follows_edges(qtbot, open_model, nested_model):  # noqa: ANN001
    win = open_model(nested_model)
    s = win.session
    wb = win.workbench
    with qtbot.waitSignal(wb.levelShown, timeout=10000):
        s.set_depth(4)
    first = _node_index(win, "/blocks.0/attn/", "MatMul")
    s.select(Target.node(first))
    wb.view.navigate.emit("down")
    nxt = s.selection
    assert nxt.kind == "node"
    consumers = {c for c in win.index.consumers[win.index.graph.nodes[first].outputs[0]]}
    assert nxt.ref in consumers
    wb.view.navigate.emit("up")
    assert s.selection == Target.node(first)


def test_level_selector_and_operator_styles(qtbot, open_model, nested_model):  # noqa: ANN001
    win = open_model(nested_model)
    wb = win.workbench
    with qtbot.waitSignal(wb.levelShown, timeout=10000):
        wb.levels.button(4).click()
    s = win.session
    assert s.level.depth == 4
    ops = [it for it in s.level.items if it.kind == "node"]
    assert len(ops) == len(win.index.graph.nodes)
    softmax = next(it for it in ops if it.label == "Softmax")
    assert softmax.category == "attention" and softmax.marked
    assert wb.legend.isVisible()


def test_tree_rows_are_fetched_lazily(qtbot, open_model, tmp_path):  # noqa: ANN001
    import numpy as np
    import onnx
    from onnx import TensorProto, helper

    from nneditor.ui.panels.hierarchy_tree import BATCH

    n = 1500
    ops = np.random.default_rng(3).choice(["Relu", "Sigmoid", "Tanh", "Neg", "Abs"], n)
    nodes = [
        helper.make_node(str(o), [f"v{i}"], [f"v{i + 1}"], name=f"op{i}") for i, o in enumerate(ops)
    ]
    graph = helper.make_graph(
        nodes,
        "flat",
        [helper.make_tensor_value_info("v0", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info(f"v{n}", TensorProto.FLOAT, [2])],
    )
    path = tmp_path / "flat.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    win = open_model(path)
    model = win.tree.model
    top = model.index(0, 0)
    assert model.rowCount(top) == min(BATCH, n)  # only the first batch exists
    assert model.canFetchMore(top)
    index = model.index_for(Target.node(n - 2))
    assert index.isValid() and model.rowCount(top) == n
    with qtbot.waitSignal(win.workbench.levelShown, timeout=20000):
        win.tree.tree.setCurrentIndex(index)
    assert win.session.selection == Target.node(n - 2)
