"""`nneditor inputs` and `nneditor trace` on the bundled example model and generated ones."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import onnx
import pytest
from nneditor_cli import nneditor_cli
from onnx import TensorProto, helper

from nneditor.tracing.capture_file import read_value

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "tiny_transformer.onnx"
ort = pytest.importorskip("onnxruntime")


def run(*args: object) -> subprocess.CompletedProcess[str]:
    return nneditor_cli(*args, timeout=300)


def test_inputs_auto_writes_a_validated_set(tmp_path, unchanged):
    check = unchanged(EXAMPLE)
    out = run("inputs", EXAMPLE, "--auto", "--out", tmp_path / "in", "--dim", "seq=6")
    assert out.returncode == 0, out.stderr
    plan = json.loads((tmp_path / "in" / "plan.json").read_text())
    assert plan["assumptions"] == [
        "dim 'seq' of input 'input_ids' set to 6 by request",
        "input 'input_ids' holds token ids: values in [0, 96) (embedding rows)",
    ]
    ids = np.load(tmp_path / "in" / "input_ids.npy", allow_pickle=False)
    assert ids.shape == (1, 6) and ids.dtype == np.int64 and ids.min() >= 0 and ids.max() < 96
    with np.load(tmp_path / "in" / "inputs.npz", allow_pickle=False) as npz:
        np.testing.assert_array_equal(npz["input_ids"], ids)
    listing = run("inputs", EXAMPLE, "--json")
    assert json.loads(listing.stdout)["inputs"][0]["role"] == "tokens"
    missing = run("inputs", EXAMPLE, "--out", tmp_path / "x")
    assert missing.returncode == 2
    assert missing.stderr.strip() == (
        "nneditor: inputs ['input_ids'] have no source; add --auto to generate them from their "
        "presets"
    )
    check()


def test_trace_prints_the_plan_and_needs_yes(tmp_path):
    ids = tmp_path / "ids.npz"
    np.savez(ids, input_ids=np.array([[1, 2, 3]], np.int64))
    out = run("trace", EXAMPLE, "--inputs", ids, "--out", tmp_path / "t", "--timeout", "60")
    assert out.returncode == 2
    assert "backend: ONNX Runtime" in out.stdout and "input_ids int64 [1, 3]" in out.stdout
    assert "limits: wall clock 60 s, RAM ceiling 4096 MB" in out.stdout
    assert out.stderr.strip() == "add --yes to approve this run"
    assert not (tmp_path / "t").exists()
    done = run("trace", EXAMPLE, "--inputs", ids, "--out", tmp_path / "t", "--yes", "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["status"] == "ok" and summary["provider"] == "CPUExecutionProvider"
    manifest = json.loads((tmp_path / "t" / "manifest.json").read_text())
    logits = next(v for v in manifest["values"] if v["name"] == "logits")
    model = onnx.load(str(EXAMPLE))
    expected = ort.InferenceSession(
        model.SerializeToString(), providers=["CPUExecutionProvider"]
    ).run(["logits"], {"input_ids": np.array([[1, 2, 3]], np.int64)})[0]
    np.testing.assert_allclose(read_value(tmp_path / "t", logits), expected, rtol=1e-5, atol=1e-6)
    assert manifest["run"]["approval"]["digest"] and manifest["run"]["backend"] == "onnxruntime"
    assert summary["counts"]["captured"] == len(manifest["values"])


def test_trace_writes_one_safetensors_file_and_npy_files_on_request(tmp_path):
    from safetensors.numpy import load_file

    ids = tmp_path / "ids.npz"
    np.savez(ids, input_ids=np.array([[4, 5]], np.int64))
    out = tmp_path / "t"
    done = run("trace", EXAMPLE, "--inputs", ids, "--out", out, "--yes", "--npy-files")
    assert done.returncode == 0, done.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    inside = [v for v in manifest["values"] if v["file"] == "values.safetensors"]
    assert len(inside) == len(manifest["values"]) - 1  # the input refers to inputs/000.npy
    loaded = load_file(str(out / "values.safetensors"))  # any safetensors reader opens it
    npy = sorted((out / "values").glob("*.npy"))
    total = len(manifest["values"])
    assert len(npy) == total and f"wrote {total} .npy files" in done.stderr
    for v in inside:
        np.testing.assert_array_equal(loaded[v["name"]], read_value(out, v))
        one = next(p for p in npy if p.name.startswith(f"{v['index']:05d}_"))
        np.testing.assert_array_equal(np.load(one, allow_pickle=False), loaded[v["name"]])
    ids_file = next(p for p in npy if p.name.startswith("00000_"))  # the input, copied too
    np.testing.assert_array_equal(np.load(ids_file), [[4, 5]])


def test_trace_errors_are_one_line(tmp_path):
    bad = tmp_path / "bad.npz"
    np.savez(bad, input_ids=np.array([[1.0, 2.0]], np.float32))
    out = run("trace", EXAMPLE, "--inputs", bad, "--out", tmp_path / "t", "--yes")
    assert out.returncode == 2
    assert out.stderr.strip() == (
        f"nneditor: input 'input_ids' expects int64 [1, 'seq'], given float32 [1, 2] from {bad}: "
        "the dtype differs"
    )
    gpu = run("trace", EXAMPLE, "--out", tmp_path / "t", "--device", "gpu", "--yes")
    if "CUDAExecutionProvider" not in ort.get_available_providers():
        assert gpu.returncode == 2 and "nneditor[cuda] (onnxruntime-gpu)" in gpu.stderr


def test_a_failed_trace_exits_1_and_publishes_nothing(tmp_path):
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["c_in"], ["c_out"]),
            helper.make_node("Identity", ["s_in"], ["s_out"]),
        ],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("c_in", TensorProto.BOOL, []),
            helper.make_tensor_value_info("s_in", TensorProto.FLOAT, [1]),
        ],
        [
            helper.make_tensor_value_info("c_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("s_out", TensorProto.FLOAT, [1]),
        ],
    )
    graph = helper.make_graph(
        [helper.make_node("Loop", ["n", "c", "s0"], ["s"], body=body)],
        "g",
        [
            helper.make_tensor_value_info("n", TensorProto.INT64, []),
            helper.make_tensor_value_info("c", TensorProto.BOOL, []),
            helper.make_tensor_value_info("s0", TensorProto.FLOAT, [1]),
        ],
        [helper.make_tensor_value_info("s", TensorProto.FLOAT, [1])],
    )
    path = tmp_path / "loop.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    feeds = tmp_path / "in.npz"
    np.savez(feeds, n=np.array(10**9, np.int64), c=np.array(True), s0=np.zeros(1, np.float32))
    out = run("trace", path, "--inputs", feeds, "--out", tmp_path / "t", "--timeout", "4", "--yes")
    assert out.returncode == 1
    assert out.stderr.strip().endswith(
        "nneditor: the trace exceeded its wall-clock limit of 4 s and was stopped; nothing was "
        "published"
    )
    assert not (tmp_path / "t").exists()


def test_a_refused_trace_leaves_no_pre_started_worker(tmp_path, capsys):
    """With --yes the worker starts while the model is planned; a refusal must stop it."""
    import psutil

    from nneditor.cli import main

    bad = tmp_path / "bad.npz"
    np.savez(bad, input_ids=np.array([[1.0, 2.0]], np.float32))
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    code = main(
        ["trace", str(EXAMPLE), "--inputs", str(bad), "--out", str(tmp_path / "t"), "--yes"]
    )
    assert code == 2 and "the dtype differs" in capsys.readouterr().err
    left = [
        p
        for p in psutil.Process().children(recursive=True)
        if p.pid not in before and p.status() != psutil.STATUS_ZOMBIE
    ]
    assert left == []
    assert not (tmp_path / "t").exists()


def test_a_failed_trace_names_open_extents_left_at_one(tmp_path):
    """A model that cannot run on a 1-sample signal: the failure says which open extents the
    automatic inputs set to 1 and how to set them; the folder `inputs --out` wrote is accepted.
    (An image's open height and width get an ordinary picture's size instead: test_inputs_spec.)"""
    graph = helper.make_graph(
        [
            helper.make_node("Conv", ["signal", "w"], ["p"], kernel_shape=[3]),
            helper.make_node("Relu", ["p"], ["y"]),
        ],
        "g",
        [helper.make_tensor_value_info("signal", TensorProto.FLOAT, ["n", 3, "length"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [onnx.numpy_helper.from_array(np.ones((4, 3, 3), np.float32), "w")],
    )
    path = tmp_path / "pool.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    assert run("inputs", path, "--auto", "--out", tmp_path / "in").returncode == 0
    failed = run("trace", path, "--inputs", tmp_path / "in", "--out", tmp_path / "t", "--yes")
    assert failed.returncode == 1
    last = failed.stderr.strip().splitlines()[-1]
    assert last.startswith("nneditor: the trace failed:")
    assert last.endswith(
        "the inputs hold 1 where the model leaves the extent open ('signal' axis 2 ('length')); "
        "models often need more: generate them again with "
        "`nneditor inputs MODEL --auto --dim length=N`"
    )
    assert not (tmp_path / "t").exists()
    again = run("inputs", path, "--auto", "--out", tmp_path / "in2", "--dim", "length=8")
    assert again.returncode == 0
    ok = run("trace", path, "--inputs", tmp_path / "in2", "--out", tmp_path / "t", "--yes")
    assert ok.returncode == 0, ok.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    refused = run("trace", path, "--inputs", empty, "--out", tmp_path / "t2", "--yes")
    assert refused.returncode == 2
    assert "is a folder without inputs.npz" in refused.stderr


def test_the_early_worker_is_closed_when_the_command_is_refused(tmp_path, capsys):
    """`trace ... --yes` starts its worker before the command line is fully parsed; a usage
    error or a refusal must not leave it running (in-process callers keep their process)."""
    import psutil

    from nneditor.cli import main, trace_early

    started: list[int] = []
    original = trace_early.prestart

    def spy(argv: list[str]) -> None:
        original(argv)
        started.extend(w.proc.pid for w in trace_early._EARLY)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(trace_early, "prestart", spy)
        usage = main(["trace", str(EXAMPLE), "--out", str(tmp_path / "t"), "--yes", "--bogus"])
        refused = main(
            ["trace", str(tmp_path / "missing.onnx"), "--out", str(tmp_path / "u"), "--yes"]
        )
    capsys.readouterr()
    assert usage == 2 and refused == 2
    assert len(started) == 2 and trace_early._EARLY == []
    for pid in started:
        with pytest.raises(psutil.NoSuchProcess):
            psutil.Process(pid).wait(timeout=10)


def test_a_trace_leaves_no_runtime_telemetry(tmp_path):
    """ONNX Runtime 1.32 on Linux stores telemetry events under the user's cache folder (and
    uploads them when it can); neither the CLI, which lists providers, nor its worker, which
    runs the session, may leave any. The same command with the variable set to 0 by the user
    must keep the user's choice (where this runtime records telemetry at all). Nothing is left
    in the temporary folder either."""
    import os
    import sys

    ids = tmp_path / "ids.npz"
    np.savez(ids, input_ids=np.array([[1, 2]], np.int64))

    # the runtime records nothing where one of these says it runs in CI (as .ci/run does)
    ci = {"CI", "GITHUB_ACTIONS", "GITLAB_CI", "TF_BUILD", "JENKINS_URL", "BUILDKITE", "TRAVIS"}
    ci |= {"CIRCLECI", "APPVEYOR", "CODEBUILD_BUILD_ID", "TEAMCITY_VERSION"}
    ci |= {"SYSTEM_TEAMFOUNDATIONCOLLECTIONURI", "ORT_DISABLE_TELEMETRY"}

    def trace(home: Path, **extra: str) -> list[Path]:
        env = {k: v for k, v in os.environ.items() if k not in ci}
        (home / "tmp").mkdir(parents=True)
        env.update(HOME=str(home), XDG_CACHE_HOME=str(home / ".cache"), TMPDIR=str(home / "tmp"))
        env.update(extra)
        args = [sys.executable, "-m", "nneditor", "trace", str(EXAMPLE), "--inputs", str(ids)]
        args += ["--out", str(home / "t"), "--yes"]
        done = subprocess.run(args, capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
        assert done.returncode == 0, done.stderr
        # the CLI leaves without Python's teardown; the early worker's folder still goes
        assert [p for p in (home / "tmp").iterdir() if "nneditor" in p.name] == []
        return [p for p in home.rglob("*") if "onnxruntime" in p.name.lower() and p.is_file()]

    assert trace(tmp_path / "default") == []
    recorded = trace(tmp_path / "opted-in", ORT_DISABLE_TELEMETRY="0")
    if sys.platform == "linux" and tuple(map(int, ort.__version__.split(".")[:2])) >= (1, 32):
        assert any(p.name == "onnxruntime.db" for p in recorded), recorded


@pytest.mark.parametrize(
    "argv",
    [
        ["m.onnx", "--out", "o", "--yes"],
        ["--out", "o", "m.onnx", "--yes"],
        ["--inputs", "x.npz", "m.gguf", "--out", "o", "--yes"],
        ["--out=o", "--backend", "reference", "m.onnx", "--yes"],
        ["m.onnx", "--backend=numpy", "--out", "o", "--yes"],
        ["--capture", "a", "b", "--out", "o", "snap", "--yes"],
        ["m.onnx", "--capture", "a.onnx", "--out", "o", "--yes"],
        ["--tracer", "plug", "m.onnx", "--out", "o", "--yes"],
        ["--dim", "seq=3", "--shape", "x=1,2", "M.ONNX", "--out", "o", "--device", "cpu", "--yes"],
        [
            "--seed",
            "3",
            "--timeout",
            "9",
            "--max-ram",
            "100",
            "m.safetensors",
            "--out",
            "o",
            "--yes",
        ],
    ],
)
def test_the_early_workers_preload_matches_the_parsed_command(argv):
    """The hand-read guess (no argparse, no numpy at that point) agrees with the real parser."""
    import argparse

    from nneditor.cli import trace_early
    from nneditor.cli.trace import add_arguments, likely_backend

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert trace_early.likely_preload(argv) == likely_backend(parser.parse_args(argv))
    assert trace_early.likely_preload([a for a in argv if a != "--yes"]) is None
