"""A killed or failing export, edit, quantize export, weights export or trace leaves nothing
behind and loses nothing.

Kills are deterministic: ``NNEDITOR_TEST_PAUSE_AT`` makes the command stop at a named point
(nneditor/io/crash_points.py) and announce it; the test then sends SIGKILL. After each kill:
the destination is absent, the staging the kill left is swept by the next run of the same
kind, and sources and input sets are byte-identical. Write failures (disk full, file too
large, no permission, read-only, folder gone) give one sentence, exit 2 and no leftovers.
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import re
import resource
import signal
import subprocess
import sys
import textwrap
import time
from collections import namedtuple
from pathlib import Path

import numpy as np
import onnx
import pytest
from nneditor_cli import nneditor_cli

import nneditor
from nneditor.cli import main as cli_main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "tiny_transformer.onnx"

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")


def _leftovers(folder: Path) -> list[str]:
    """Hidden staging, run folders and locks NNEditor writes beside a destination."""
    return sorted(
        p.name for p in folder.iterdir() if p.name.startswith(".") and "nneditor" in p.name
    )


def _killed_at(point: str, args: list[str], tmp_path: Path) -> None:
    marker = tmp_path / f"paused-{point.replace(':', '-')}"
    env = {**os.environ, "NNEDITOR_TEST_PAUSE_AT": point, "NNEDITOR_TEST_PAUSE_FILE": str(marker)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "nneditor", *args],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 120
    while not marker.exists():
        if proc.poll() is not None:
            raise AssertionError(f"exited before {point}: {proc.stderr.read().decode()}")  # type: ignore[union-attr]
        assert time.monotonic() < deadline, f"never reached {point}"
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL


def _run(*args: object) -> subprocess.CompletedProcess[str]:
    return nneditor_cli(*args, timeout=300)


def _node_name(op: str) -> str:
    return next(n.name for n in onnx.load(str(EXAMPLE)).graph.node if n.op_type == op)


def _safetensors(path: Path) -> Path:
    from safetensors.numpy import save_file

    save_file({"w": np.arange(6 * 1024, dtype=np.float32).reshape(6, 1024)}, str(path))
    return path


def _ids(path: Path) -> Path:
    np.savez(path, input_ids=np.array([[1, 2, 3]], np.int64))
    return path


def _scenarios(tmp_path: Path) -> dict[str, tuple[str, list[object], Path, Path]]:
    """name -> (pause point, command, source, destination)"""
    out = tmp_path / "out"
    out.mkdir()
    st = _safetensors(tmp_path / "w.safetensors")
    ids = _ids(tmp_path / "ids.npz")
    gelu = _node_name("Gelu")
    return {
        "export-writing": ("export:writing", ["export", EXAMPLE], EXAMPLE, out / "e.onnx"),
        "export-validated": ("export:validated", ["export", EXAMPLE], EXAMPLE, out / "e.onnx"),
        "edit": (
            "export:validated",
            ["edit", EXAMPLE, "--replace-op", f"{gelu}=Relu"],
            EXAMPLE,
            out / "edited.onnx",
        ),
        "quantize": ("export:writing", ["quantize", EXAMPLE], EXAMPLE, out / "q.onnx"),
        "weights": ("weights:writing", ["export", st], st, out / "w-only.safetensors"),
        "trace": (
            "trace:worker-started",
            ["trace", EXAMPLE, "--inputs", ids, "--yes"],
            ids,
            out / "trace",
        ),
    }


@pytest.mark.parametrize(
    "scenario", ["export-writing", "export-validated", "edit", "quantize", "weights", "trace"]
)
def test_kill_leaves_nothing_at_the_destination_and_the_next_run_sweeps(tmp_path, scenario):
    point, args, source, dest = _scenarios(tmp_path)[scenario]
    before = source.read_bytes()
    example = EXAMPLE.read_bytes()
    _killed_at(point, [*map(str, args), "--out", str(dest)], tmp_path)
    assert not dest.exists()
    assert _leftovers(dest.parent), "the kill should have left its staging behind"
    done = _run(*args, "--out", dest)
    assert done.returncode == 0, done.stderr
    assert dest.exists()
    assert _leftovers(dest.parent) == []  # swept, and the finished run left nothing
    assert source.read_bytes() == before and EXAMPLE.read_bytes() == example
    if dest.suffix == ".onnx":
        onnx.checker.check_model(str(dest), full_check=True)
    if scenario == "trace":
        assert (dest / "manifest.json").exists()
        ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
        assert str(tmp_path) not in ps  # no worker of the killed run lives on


def test_two_exports_to_one_destination_one_wins_the_other_says_so(tmp_path):
    dest = tmp_path / "out.onnx"
    marker = tmp_path / "paused"
    env = {
        **os.environ,
        "NNEDITOR_TEST_PAUSE_AT": "export:validated",
        "NNEDITOR_TEST_PAUSE_FILE": str(marker),
    }
    first = subprocess.Popen(
        [sys.executable, "-m", "nneditor", "export", str(EXAMPLE), "--out", str(dest)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        while not marker.exists():
            assert first.poll() is None
            time.sleep(0.05)
        second = _run("export", EXAMPLE, "--out", dest)
        assert second.returncode == 2 and not dest.exists()
        assert second.stderr.strip() == (
            f"nneditor: another NNEditor process (pid {first.pid}) is writing {dest} right now; "
            "wait until it finishes or choose another destination"
        )
    finally:
        first.kill()
        first.wait(timeout=30)
    third = _run("export", EXAMPLE, "--out", dest)  # the dead writer's lock is taken over
    assert third.returncode == 0, third.stderr and _leftovers(tmp_path) == []


def _cli(*args: object) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = cli_main([str(a) for a in args])
    return code, err.getvalue().strip()


@pytest.mark.parametrize(
    ("code", "phrase"),
    [
        (errno.ENOSPC, "the disk is full"),
        (errno.EACCES, "there is no permission to write there"),
        (errno.EROFS, "the file system is read-only"),
        (errno.ENOENT, "the folder disappeared while writing"),
    ],
)
@pytest.mark.parametrize("kind", ["export", "weights"])
def test_write_failures_are_one_sentence_and_leave_nothing(
    tmp_path, monkeypatch, code, phrase, kind
):
    if kind == "export":
        import nneditor.export.onnx_writer as target

        source, dest = EXAMPLE, tmp_path / "out.onnx"
    else:
        import nneditor.export.weights as target  # type: ignore[no-redef]

        source, dest = _safetensors(tmp_path / "w.safetensors"), tmp_path / "out.safetensors"
    before = source.read_bytes()
    real_replace = os.replace

    def failing_replace(a, b):  # noqa: ANN001, ANN202 - the publishing rename fails
        if Path(b) == dest:
            raise OSError(code, os.strerror(code))
        return real_replace(a, b)

    monkeypatch.setattr(target.os, "replace", failing_replace)
    status, err = _cli("export", source, "--out", dest)
    assert status == 2
    assert err == (
        f"nneditor: could not write {dest}: {phrase}; nothing was published there — free some "
        "space, check the folder's permissions, or choose another destination"
    )
    assert not dest.exists() and _leftovers(tmp_path) == []
    assert source.read_bytes() == before


def test_a_file_too_large_for_the_limit_is_refused_with_a_sentence(tmp_path):
    """A real EFBIG: the export runs under RLIMIT_FSIZE below the model's size."""
    dest = tmp_path / "out.onnx"

    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (20_000, 20_000))

    out = subprocess.run(
        [sys.executable, "-m", "nneditor", "export", str(EXAMPLE), "--out", str(dest)],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=limit,
    )
    assert out.returncode == 2
    assert "the file system refuses a file this large" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    assert not dest.exists() and _leftovers(tmp_path) == []


def test_too_little_free_space_is_refused_before_writing(tmp_path, monkeypatch):
    import nneditor.io.scratch as scratch

    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(scratch.shutil, "disk_usage", lambda _p: usage(10**9, 10**9, 4096))
    dest = tmp_path / "out.onnx"
    status, err = _cli("export", EXAMPLE, "--out", dest)
    assert status == 2 and not dest.exists() and _leftovers(tmp_path) == []
    assert re.fullmatch(
        rf"nneditor: not enough free space for {re.escape(str(dest))}: writing it needs "
        rf"9\d\.\d KiB but the disk holding {re.escape(str(tmp_path))} has 4\.0 KiB free; free "
        "some space or choose another destination",
        err,
    ), err
    status, err = _cli(
        "trace", EXAMPLE, "--inputs", _ids(tmp_path / "ids.npz"), "--out", tmp_path / "t", "--yes"
    )
    assert status == 2 and "lower the capture budget, now 2048 MB" in err
    assert not (tmp_path / "t").exists() and _leftovers(tmp_path) == []


def test_window_killed_while_saving_loses_no_revision(tmp_path):
    """The window commits an edit, Save changes… is killed mid-export: the journal recovers
    the revision, nothing appears at the destination, and the next save sweeps the staging."""
    dest = tmp_path / "saved.onnx"
    marker = tmp_path / "paused"
    gelu = _node_name("Gelu")
    script = textwrap.dedent(f"""
        import os
        os.environ["QT_QPA_PLATFORM"] = "offscreen"
        from PySide6.QtWidgets import QApplication, QFileDialog
        app = QApplication([])
        from nneditor.ui.main_window import MainWindow
        w = MainWindow(interactive=False)
        QFileDialog.getSaveFileName = staticmethod(lambda *a, **k: ({str(dest)!r}, ""))

        def ready(*_a):
            s = w.edit.session
            if s is None:
                return
            w.edit.sessionChanged.disconnect(ready)
            s.apply([{{"op": "replace_op", "node": {gelu!r}, "op_type": "Relu"}}], "relu")
            w.edit.save()

        w.edit.sessionChanged.connect(ready)
        w.open_path({str(EXAMPLE)!r})
        app.exec()
    """)
    env = {
        **os.environ,
        "NNEDITOR_HOME": str(tmp_path / "home"),
        "NNEDITOR_CONFIG_DIR": str(tmp_path / "config"),
        "NNEDITOR_TEST_PAUSE_AT": "export:validated",
        "NNEDITOR_TEST_PAUSE_FILE": str(marker),
    }
    proc = subprocess.Popen([sys.executable, "-c", script], env=env, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while not marker.exists():
        if proc.poll() is not None:
            raise AssertionError(proc.stderr.read().decode())  # type: ignore[union-attr]
        assert time.monotonic() < deadline
        time.sleep(0.05)
    proc.kill()
    proc.wait(timeout=30)
    assert not dest.exists() and _leftovers(tmp_path)
    os.environ["NNEDITOR_HOME"] = env["NNEDITOR_HOME"]
    try:
        from nneditor.editing.session import EditSession

        with nneditor.open(EXAMPLE) as doc:
            s = EditSession.open(doc)
            assert s.recovered and [r.description for r in s.chain.revisions] == ["relu"]
            s.export(dest)
            s.close()
    finally:
        del os.environ["NNEDITOR_HOME"]
    assert [n.op_type for n in onnx.load(str(dest)).graph.node].count("Relu") == 1
    assert _leftovers(tmp_path) == []


def test_trace_captures_that_cannot_be_written_leave_nothing(tmp_path):
    """The worker's capture files hit RLIMIT_FSIZE (a real EFBIG): one sentence naming the
    destination, exit 2, no run folder, the input set unchanged."""
    ids = _ids(tmp_path / "ids.npz")
    before = ids.read_bytes()
    dest = tmp_path / "t"

    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (3000, 3000))

    out = subprocess.run(
        [sys.executable, "-m", "nneditor", "trace", str(EXAMPLE), "--inputs", str(ids)]
        + ["--out", str(dest), "--yes"],
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=limit,
    )
    assert out.returncode == 2
    assert out.stderr.strip().splitlines()[-1] == (
        f"nneditor: could not write {dest}: the file system refuses a file this large; nothing "
        "was published there — free some space, check the folder's permissions, or choose "
        "another destination"
    )
    assert not dest.exists() and _leftovers(tmp_path) == [] and ids.read_bytes() == before
