"""Tracer plugins run for real: a template made by ``--create-tracer`` traces a GGUF end to end
(captures equal the built-in decoder's), the host enforces capture names, approvals bind the
plugin's code, and limits and cancellation stop a misbehaving plugin with nothing left."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import psutil
import pytest

import nneditor
from nneditor.jobs import CancelToken
from nneditor.tracing import Limits, RunError, TraceRunner, approve, make_plan
from nneditor.tracing.capture_file import read_value
from nneditor.tracing.plugins.discovery import PATH_ENV
from nneditor.tracing.plugins.manifest import MANIFEST

ROOT = Path(__file__).resolve().parents[2]
IDS = np.array([[1, 5, 17, 300]], np.int64)


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NNEDITOR_HOME", str(tmp_path / "home"))
    monkeypatch.setenv(PATH_ENV, str(tmp_path / "plugins"))


def _plugin(tmp_path: Path, pid: str, body: str) -> Path:
    folder = tmp_path / "plugins" / pid
    folder.mkdir(parents=True)
    manifest = {
        "api_version": 1,
        "id": pid,
        "name": f"Test {pid}",
        "version": "0.0.1",
        "entry_point": "tracer.py:trace",
        "artifact_kinds": ["gguf_model"],
        "architectures": [],
    }
    (folder / MANIFEST).write_text(json.dumps(manifest), "utf-8")
    (folder / "tracer.py").write_text(body, "utf-8")
    return folder


def _run(path: Path, pid: str, out: Path, limits: Limits | None = None, **kw):  # noqa: ANN003
    with nneditor.open(path) as doc:
        plan = make_plan(doc, {"tokens": IDS}, tracer=pid, limits=limits or Limits(timeout_s=120))
    return TraceRunner().run(plan, approve(plan), out, **kw)


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@pytest.mark.realdata
def test_the_llm_template_traces_a_gguf_like_the_built_in_decoder(
    tmp_path: Path,
    zoo_artifact,  # noqa: ANN001
) -> None:
    gguf = zoo_artifact("decoder-llama.gguf")
    env = {**os.environ, PATH_ENV: str(tmp_path / "mine")}
    made = subprocess.run(
        [sys.executable, "-m", "nneditor", "--create-tracer", str(tmp_path / "mine")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
    )
    assert made.returncode == 0, made.stderr
    np.savez(tmp_path / "p.npz", tokens=IDS)
    outs = {}
    for label, extra in (("plugin", ["--tracer", "example.mine"]), ("builtin", [])):
        done = subprocess.run(
            [sys.executable, "-m", "nneditor", "trace", str(gguf), "--inputs"]
            + [str(tmp_path / "p.npz"), "--out", str(tmp_path / label), "--yes", *extra],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env=env,
        )
        assert done.returncode == 0, done.stderr
        outs[label] = json.loads((tmp_path / label / "manifest.json").read_text())
    plugin, builtin = outs["plugin"], outs["builtin"]
    assert plugin["run"]["backend"] == "plugin" and plugin["run"]["plugin"]["id"] == "example.mine"
    assert (tmp_path / "plugin" / "tracer-plugin" / "tracer.py").is_file()  # the approved copy
    names = {v["name"] for v in builtin["values"]}
    assert {v["name"] for v in plugin["values"]} == names and len(names) == 16  # 2 blocks
    for v in plugin["values"]:
        assert v["status"] == "captured"
        a = read_value(tmp_path / "plugin", v)
        b = read_value(
            tmp_path / "builtin", next(w for w in builtin["values"] if w["name"] == v["name"])
        )
        np.testing.assert_array_equal(a, b)


LOGITS_ONLY = """
import numpy as np
from nneditor.tracing.sdk import TraceOutcome, TracePluginError
from .helper import width

def trace(context):
    context.capture_inputs()
    vocab = width(context)
    context.capture("result_output", np.zeros((1, 4, vocab), np.float32))
    return TraceOutcome(provider="zeros", notes=("a test runtime",))
"""
HELPER = "def width(context):\n    return context.document.main_graph.value_info['result_output'].shape[2]\n"


@pytest.mark.realdata
def test_the_host_marks_unpublished_values_and_checks_names(tmp_path: Path, zoo_artifact) -> None:  # noqa: ANN001
    gguf = zoo_artifact("decoder-llama.gguf")
    folder = _plugin(tmp_path, "test.logits", LOGITS_ONLY)
    (folder / "helper.py").write_text(HELPER, "utf-8")  # a relative sibling import
    result = _run(gguf, "test.logits", tmp_path / "t")
    assert result.published, result.message + result.log_tail
    values = {v["name"]: v for v in result.manifest["values"]}
    assert values["result_output"]["status"] == "captured"
    assert values["tokens"]["status"] == "captured"
    assert values["blk.0.output"]["status"] == "dropped"
    assert "not produced by the run" in values["blk.0.output"]["reason"]
    assert result.manifest["run"]["provider"] == "zeros"
    assert "a test runtime" in result.manifest["run"]["notes"]
    _plugin(tmp_path, "test.unknown", "def trace(context):\n    context.capture('nope', 1)\n")
    bad = _run(gguf, "test.unknown", tmp_path / "u")
    assert not bad.published
    assert "published 'nope', which is not a value of" in bad.message
    twice = "def trace(context):\n    context.capture('result_norm', 1)\n    context.capture('result_norm', 1)\n"
    _plugin(tmp_path, "test.twice", twice)
    assert "published 'result_norm' twice" in _run(gguf, "test.twice", tmp_path / "w").message
    raises = "from nneditor.tracing.sdk import TracePluginError\ndef trace(context):\n    raise TracePluginError('weights blk.9 are missing')\n"
    _plugin(tmp_path, "test.raises", raises)
    assert (
        "tracer test.raises: weights blk.9 are missing"
        in _run(gguf, "test.raises", tmp_path / "r").message
    )


@pytest.mark.realdata
def test_a_changed_plugin_needs_a_new_approval(tmp_path: Path, zoo_artifact) -> None:  # noqa: ANN001
    gguf = zoo_artifact("decoder-llama.gguf")
    folder = _plugin(tmp_path, "test.edit", "def trace(context):\n    return None\n")
    with nneditor.open(gguf) as doc:
        plan = make_plan(doc, {"tokens": IDS}, tracer="test.edit")
        approval = approve(plan)
        (folder / "tracer.py").write_text("def trace(context):\n    return 1\n", "utf-8")
        replanned = make_plan(doc, {"tokens": IDS}, tracer="test.edit")
    assert replanned.binding()["tracer"] != plan.binding()["tracer"]
    with pytest.raises(RunError, match="changed since it was approved"):
        TraceRunner().run(plan, approval, tmp_path / "t")
    assert not (tmp_path / "t").exists()


SPIN = "def trace(context):\n    while True:\n        pass\n"
GROW = "def trace(context):\n    hoard = []\n    while True:\n        hoard.append(bytearray(50_000_000))\n"
SLEEP = "import time\ndef trace(context):\n    while True:\n        time.sleep(0.05)\n"


@pytest.mark.realdata
def test_limits_and_cancel_stop_a_plugin_and_leave_no_process(tmp_path: Path, zoo_artifact) -> None:  # noqa: ANN001
    gguf = zoo_artifact("decoder-llama.gguf")
    _plugin(tmp_path, "test.spin", SPIN)
    spun = _run(gguf, "test.spin", tmp_path / "a", Limits(timeout_s=4))
    assert spun.status == "timeout" and _gone(spun.worker_pid)
    _plugin(tmp_path, "test.grow", GROW)
    grown = _run(gguf, "test.grow", tmp_path / "b", Limits(timeout_s=60, max_ram_mb=300))
    assert grown.status == "memory", grown.message
    assert _gone(grown.worker_pid)
    _plugin(tmp_path, "test.sleep", SLEEP)
    token = CancelToken()

    def on_event(e: dict) -> None:
        if e.get("event") == "stage" and "running tracer plugin" in str(e.get("stage")):
            threading.Timer(0.3, token.cancel).start()

    cancelled = _run(gguf, "test.sleep", tmp_path / "c", token=token, on_event=on_event)
    assert cancelled.status == "cancelled" and _gone(cancelled.worker_pid)
    assert not any((tmp_path / n).exists() for n in "abc")
