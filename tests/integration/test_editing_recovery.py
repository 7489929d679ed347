"""Crash recovery: a process that commits edits and is SIGKILLed loses nothing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import onnx
import pytest

import nneditor
from nneditor.editing.session import EditSession

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "tiny_transformer.onnx"

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")


def test_sigkill_after_commits_recovers_every_revision(tmp_path):
    env = {**os.environ, "NNEDITOR_HOME": str(tmp_path / "home")}
    script = textwrap.dedent(f"""
        import os, signal, nneditor
        from nneditor.editing.session import EditSession
        doc = nneditor.open({str(EXAMPLE)!r})
        s = EditSession.open(doc)
        s.apply([{{"op": "replace_op", "node": "/blocks.0/mlp/Gelu_21", "op_type": "Relu"}}], "first")
        s.apply([{{"op": "rename_node", "node": "/lm_head/MatMul", "new": "head"}}], "second")
        s.apply([{{"op": "set_attr", "node": "/blocks.1/mlp/Gelu_44", "attr": "approximate", "value": "tanh"}}], "third")
        s.undo()
        print("ready", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    out = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == -signal.SIGKILL and "ready" in out.stdout, out.stderr
    os.environ["NNEDITOR_HOME"] = env["NNEDITOR_HOME"]
    try:
        with nneditor.open(EXAMPLE) as doc:
            s = EditSession.open(doc)
            assert s.recovered and s.chain.dirty
            assert [r.description for r in s.chain.revisions] == ["first", "second", "third"]
            assert s.chain.cursor == 2  # the undo was journaled too
            dest = tmp_path / "recovered.onnx"
            s.export(dest)
            names = [n.name for n in onnx.load(str(dest)).graph.node]
            ops = [n.op_type for n in onnx.load(str(dest)).graph.node]
            assert "head" in names and ops.count("Relu") == 1 and ops.count("Gelu") == 1
            s.close()
        with nneditor.open(EXAMPLE) as doc:
            s = EditSession.open(doc)
            assert not s.recovered and s.chain.cursor == 0  # saved, so a fresh start
            s.close()
    finally:
        del os.environ["NNEDITOR_HOME"]


def test_sigkill_during_export_leaves_previous_file_intact(tmp_path):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    from synthetic_models import make_transformer

    src = make_transformer(
        tmp_path / "big.onnx",
        blocks=4,
        dim=512,
        ffn=2048,
        heads=8,
        nodes_per_block=40,
        random_weights=True,
    )
    dest = tmp_path / "dest.onnx"
    dest.write_bytes(b"previous contents")
    script = textwrap.dedent(f"""
        import nneditor
        from pathlib import Path
        from nneditor.editing.session import EditSession
        from nneditor.jobs import JobHandle
        doc = nneditor.open({str(src)!r})
        s = EditSession.open(doc, use_journal=False)
        def progress(done, total, msg):
            print("progress", done, flush=True)
        s.export(Path({str(dest)!r}), JobHandle(on_progress=progress, min_interval_s=0))
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("progress"), line
    proc.kill()
    proc.wait(timeout=60)
    assert dest.read_bytes() == b"previous contents"
    # the staging folder may remain after a SIGKILL, but never a partial file at the destination
    assert not (tmp_path / "dest.onnx.data").exists()
