"""Every zoo artifact (tools/zoo.py) in the real window, offscreen: a model with a graph shows
each of the four levels with items and no error; a graph-less one shows its module tree and
its tensors."""

from __future__ import annotations

import pytest
import zoo
from zoo_expect import expect


@pytest.mark.realdata
@pytest.mark.parametrize("name", zoo.names())
def test_every_level_renders(
    name: str, zoo_artifact, qtbot, window, open_model, monkeypatch
) -> None:  # noqa: ANN001
    path = zoo_artifact(name)
    e = expect(name)
    if e["refused"]:  # the window says why and stays on the start screen
        from PySide6.QtWidgets import QMessageBox

        monkeypatch.setattr(QMessageBox, "critical", staticmethod(lambda *a: None))
        with qtbot.waitSignal(window.openFailed, timeout=30000) as sig:
            window.open_path(str(path))
        assert e["refused"] in sig.args[0] and window.index is None
        return
    failures: list[str] = []
    window.viewFailed.connect(failures.append)
    open_model(path)
    assert window.index is not None
    if not e["graph"]:
        assert window.session is None
        assert window.names.tree.topLevelItemCount() > 0
        assert window.tensors.isVisibleTo(window) or window.tensors.parent() is not None
        return
    session = window.session
    assert session is not None
    wb = window.workbench
    for depth in (1, 2, 3, 4):
        with qtbot.waitSignal(wb.levelShown, timeout=60000):
            session.set_depth(depth)
        assert not failures, failures
        assert wb.stack.currentWidget() is wb.view
        assert wb.scene.item_count > 0, f"level {depth} of {name} is empty"
        assert len(session.level.items) > 0
