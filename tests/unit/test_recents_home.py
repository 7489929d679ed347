"""The recent-files list lives in NNEditor's config folder: a run with its own NNEDITOR_HOME
(portable use, scripted screenshots) lists only the files opened under that home."""

from __future__ import annotations

import pytest

from nneditor.ui import recents


def test_recents_follow_nneditor_home(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NNEDITOR_CONFIG_DIR", raising=False)
    model = tmp_path / "m.onnx"
    model.write_bytes(b"")
    monkeypatch.setenv("NNEDITOR_HOME", str(tmp_path / "a"))
    recents.add(model)
    assert recents.load() == [str(model.resolve())]
    assert (tmp_path / "a" / "config" / "recent.json").is_file()
    monkeypatch.setenv("NNEDITOR_HOME", str(tmp_path / "b"))
    assert recents.load() == []  # another home: another list
    monkeypatch.setenv("NNEDITOR_CONFIG_DIR", str(tmp_path / "c"))
    recents.add(model)
    assert (tmp_path / "c" / "recent.json").is_file()
