"""Revision chain semantics and journal replay (crash recovery without the ONNX specifics)."""

from __future__ import annotations

import json

from nneditor.editing.journal import Journal, has_unsaved
from nneditor.editing.revisions import RevisionChain


def _change(i: int) -> dict:
    return {"op": "rename_node", "node": f"n{i}", "new": f"m{i}"}


def test_commit_undo_redo_and_dirty_tracking():
    chain = RevisionChain("abc")
    assert not chain.dirty and chain.current_id == "source"
    r1 = chain.commit([_change(1)], "one")
    r2 = chain.commit([_change(2)], "two")
    assert chain.dirty and chain.active_changes() == [_change(1), _change(2)]
    assert r2.parent == r1.id
    chain.mark_saved()
    assert not chain.dirty
    chain.undo()
    assert chain.dirty and chain.active_changes() == [_change(1)]
    chain.redo()
    assert not chain.dirty
    chain.undo()
    chain.commit([_change(3)], "three")  # drops the redo tail
    assert [r.description for r in chain.revisions] == ["one", "three"]
    assert chain.dirty and not chain.can_redo


def test_journal_replays_commits_cursor_and_saved(tmp_path):
    j = Journal(tmp_path / "j.jsonl")
    chain = RevisionChain("abc")
    for i in range(3):
        j.record_commit(chain, chain.commit([_change(i)], f"c{i}"))
    chain.undo()
    j.record_cursor(chain)
    chain.mark_saved()
    j.record_saved(chain)
    back = j.load("abc")
    assert [r.description for r in back.revisions] == ["c0", "c1", "c2"]
    assert back.cursor == 2 and back.saved_cursor == 2 and not back.dirty
    back.redo()
    assert has_unsaved(back)


def test_journal_ignores_torn_last_line_and_discard(tmp_path):
    path = tmp_path / "j.jsonl"
    j = Journal(path)
    chain = RevisionChain()
    j.record_commit(chain, chain.commit([_change(1)], "kept"))
    with open(path, "a") as fh:
        fh.write(json.dumps({"type": "commit"})[:10])  # crash mid-write
    back = j.load()
    assert [r.description for r in back.revisions] == ["kept"] and has_unsaved(back)
    j2 = Journal(tmp_path / "k.jsonl")
    j2.record_commit(chain, chain.revisions[0])
    j2.discard()
    assert j2.load().revisions == []
