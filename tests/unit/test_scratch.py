"""Staging named for its owner: the sweep removes what dead owners left, never a live one's."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from nneditor.io import scratch


def _dead_owner() -> str:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return f"p{proc.pid}t{int(time.time() * 1000)}-"


def test_sweep_removes_dead_owners_and_old_legacy_entries_only(tmp_path: Path) -> None:
    prefix = scratch.EXPORT_PREFIX
    live = scratch.staging_dir(tmp_path, prefix)
    assert live.name.startswith(prefix + scratch.owner_tag())
    dead = tmp_path / f"{prefix}{_dead_owner()}abc"
    dead.mkdir()
    (dead / "model.onnx").write_bytes(b"partial")
    reused = tmp_path / f"{prefix}p{os.getpid()}t1-xyz"  # our pid, another start time
    reused.mkdir()
    old_legacy = tmp_path / f"{prefix}abcd1234"
    old_legacy.mkdir()
    new_legacy = tmp_path / f"{prefix}efgh5678"
    new_legacy.mkdir()
    past = time.time() - scratch.LEGACY_AGE_S - 60
    os.utime(old_legacy, (past, past))
    other = tmp_path / "user-file.onnx"
    other.write_bytes(b"mine")
    removed = scratch.sweep(tmp_path, (prefix,))
    # the same pid with another start time was an earlier process (pids are reused)
    assert sorted(p.name for p in removed) == sorted([dead.name, old_legacy.name, reused.name])
    assert live.exists() and new_legacy.exists() and other.exists()


def test_legacy_weights_staging_files_are_recognised(tmp_path: Path) -> None:
    old = tmp_path / ".nneditor-k3j2h1g0.safetensors"
    old.write_bytes(b"x")
    keep = tmp_path / ".nneditor-export-p1t1-abc"
    keep.mkdir()
    past = time.time() - scratch.LEGACY_AGE_S - 60
    os.utime(old, (past, past))
    removed = scratch.sweep(tmp_path, (scratch.WEIGHTS_PREFIX,), legacy=scratch.LEGACY_WEIGHTS)
    assert removed == [old] and keep.exists()


def test_the_lock_of_a_live_writer_refuses_a_second_one(tmp_path: Path) -> None:
    dest = tmp_path / "out.onnx"
    lock = tmp_path / ".out.onnx.nneditor-lock"
    with scratch.destination_lock(dest):
        assert lock.read_text() == scratch.owner_tag()
        try:
            with scratch.destination_lock(dest):
                raise AssertionError("a second writer got the lock")
        except scratch.DestinationBusyError as exc:
            assert f"(pid {os.getpid()}) is writing {dest}" in str(exc)
    assert not lock.exists()
    lock.write_text(_dead_owner())
    with scratch.destination_lock(dest):  # a dead writer's lock is taken over
        assert lock.read_text() == scratch.owner_tag()


def test_a_clock_step_does_not_make_this_process_look_dead(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    """On Linux the owner's start is the kernel's count since boot: a wall-clock step (psutil's
    create_time moves with it) must not get a live process's folder swept."""
    import psutil
    import pytest

    if not Path(f"/proc/{os.getpid()}/stat").exists():
        pytest.skip("no /proc here: the start time is psutil's")
    live = scratch.staging_dir(tmp_path, scratch.EXPORT_PREFIX)
    shifted = psutil.Process.create_time
    monkeypatch.setattr(psutil.Process, "create_time", lambda self: shifted(self) + 5.0)
    assert scratch.sweep(tmp_path, (scratch.EXPORT_PREFIX,)) == []
    assert live.exists()
