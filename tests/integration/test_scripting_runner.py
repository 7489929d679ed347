"""The Python tab's script runner with real worker processes (no mocks).

Every test starts ``python -m nneditor.scripting.worker`` for real. Expected values come from
NumPy/SciPy computed here in the test process, never from the runner.
"""

from __future__ import annotations

import ast
import os
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from nneditor.jobs import CancelToken
from nneditor.scripting import run_script, start_script

POSIX = os.name == "posix"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

SOFTMAX_SCRIPT = """\
logits = np.asarray(tensor)[0, -1].astype(np.float64)
probs = scipy.special.softmax(logits)
top = np.argsort(probs)[-10:][::-1]
print("Top token IDs:", top.tolist())
plt.bar(top.astype(str), probs[top])
plt.xlabel("Token ID")
plt.ylabel("Next-token probability")
plt.tight_layout()
float(scipy.stats.entropy(probs))
"""


@pytest.fixture
def logits_npy(tmp_path: Path) -> Path:
    rng = np.random.default_rng(1234)
    path = tmp_path / "logits.npy"
    np.save(path, (rng.standard_normal((1, 3, 32)) * 3).astype(np.float32))
    return path


def _alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie waiting for its parent counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rpartition(")")[2].split()[0] != "Z"


def _gone(pids: list[int], within_s: float = 5.0) -> bool:
    end = time.monotonic() + within_s
    while time.monotonic() < end:
        if not any(_alive(p) for p in pids):
            return True
        time.sleep(0.05)
    return False


class _Streamed:
    """An ``on_event`` callback that collects streamed stdout."""

    def __init__(self) -> None:
        self.parts: list[str] = []

    def __call__(self, event: dict) -> None:
        if event["event"] == "stdout":
            self.parts.append(event["text"])

    def wait_for(self, process, needle: str, within_s: float = 60.0) -> str:
        """Poll ``process`` until streamed stdout contains ``needle``; returns that stdout."""
        end = time.monotonic() + within_s
        while time.monotonic() < end:
            assert process.poll() is None, process.result
            if needle in "".join(self.parts):
                return "".join(self.parts)
            time.sleep(0.05)
        raise AssertionError(f"{needle!r} never appeared in the streamed stdout: {self.parts!r}")


# -- the PRODUCT.md example -------------------------------------------------------------------


def test_softmax_entropy_example_matches_scipy(logits_npy, tmp_path, unchanged):
    special = pytest.importorskip("scipy.special")
    stats = pytest.importorskip("scipy.stats")
    check = unchanged(logits_npy)
    logits = np.load(logits_npy)[0, -1].astype(np.float64)
    probs = special.softmax(logits)
    expected_top = np.argsort(probs)[-10:][::-1].tolist()
    expected_entropy = float(stats.entropy(probs))
    events: list[dict] = []

    result = run_script(
        SOFTMAX_SCRIPT, logits_npy, {"shape": [1, 3, 32]}, workdir=tmp_path, on_event=events.append
    )

    assert result.status == "ok", result.error
    assert f"Top token IDs: {expected_top}" in result.stdout
    assert result.result_type == "float"
    assert result.result_value == pytest.approx(expected_entropy, rel=1e-12)
    assert float(result.result_repr) == pytest.approx(expected_entropy, rel=1e-12)
    assert result.error is None and result.returncode == 0
    kinds = [e["event"] for e in events]
    assert kinds[0] == "started" and kinds[-1] == "finished"
    assert "stdout" in kinds
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert result.figures == []
        assert any("matplotlib is not installed" in n for n in result.notes)
    else:
        assert len(result.figures) == 1
        png = result.figures[0].read_bytes()
        assert png[:8] == PNG_MAGIC
        width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
        assert (width, height) == (640, 480)
        assert result.figures[0].parent == result.run_dir
        assert "figure" in kinds
    check()


def test_preloaded_names_and_no_qt_in_the_worker(tmp_path):
    code = (
        "import sys\n"
        "names = [n for n in ('np', 'math', 'scipy', 'sklearn', 'scikit', 'matplotlib', 'plt')"
        " if n in globals()]\n"
        "qt = sorted(m for m in sys.modules if m.split('.')[0] in ('PySide6', 'shiboken6', 'PyQt5', 'PyQt6'))\n"
        "backend = matplotlib.get_backend().lower() if 'matplotlib' in globals() else 'agg'\n"
        "(names, qt, backend, scikit is sklearn if 'sklearn' in globals() else True, math.pi)\n"
    )
    result = run_script(code, None, None, workdir=tmp_path)
    assert result.status == "ok", result.error
    names, qt, backend, same, pi = ast.literal_eval(result.result_repr)
    assert qt == [] and backend == "agg" and same is True and pi == pytest.approx(np.pi)
    for module, shown in (("scipy", "scipy"), ("sklearn", "scikit"), ("matplotlib", "plt")):
        installed = result.libraries.get(module) is not None
        assert (shown in names) == installed
        if not installed:
            assert any(module in n or "scikit-learn" in n for n in result.notes)
    assert {"np", "math"} <= set(names)


# -- the captured tensor stays intact ---------------------------------------------------------


def test_in_place_ops_leave_the_npy_byte_identical(logits_npy, tmp_path, unchanged):
    check = unchanged(logits_npy)
    before = np.load(logits_npy)
    code = "tensor *= 0\ntensor[...] = 7\nfloat(np.abs(tensor - 7).sum())"
    result = run_script(code, logits_npy, {}, workdir=tmp_path)
    assert result.status == "ok", result.error
    assert result.result_value == 0.0  # the script really changed its private copy
    check()
    np.testing.assert_array_equal(np.load(logits_npy), before)


def test_partial_capture_shape_comes_from_metadata(tmp_path):
    full = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    path = tmp_path / "partial.npy"
    np.save(path, full.reshape(-1)[:10])
    code = "result = tensor\nprint(tuple(metadata['shape']), metadata['partial'], tensor.shape)"
    result = run_script(code, path, {"shape": (2, 3, 4), "partial": True}, workdir=tmp_path)
    assert result.status == "ok", result.error
    assert result.stdout.strip() == "(2, 3, 4) True (10,)"
    np.testing.assert_array_equal(np.load(result.result_array_path), full.reshape(-1)[:10])


def test_a_value_inside_a_trace_container_is_loaded_by_its_location(tmp_path, unchanged):
    from safetensors.numpy import save_file  # a container written by the reference library

    a = np.arange(6, dtype=np.uint8)
    b = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    path = tmp_path / "values.safetensors"
    save_file({"a": a, "b": b}, str(path))
    check = unchanged(path)
    header = int.from_bytes(path.read_bytes()[:8], "little")
    offsets = ast.literal_eval(path.read_bytes()[8 : 8 + header].decode())["b"]["data_offsets"]
    where = {"offset": 8 + header + offsets[0], "dtype": "float32", "shape": [3, 4]}
    code = "tensor *= 0\nprint(tensor.shape, tensor.dtype)\nresult = float(tensor.sum())"
    result = run_script(code, path, {}, workdir=tmp_path, tensor_location=where)
    assert result.status == "ok", result.error
    assert result.stdout.strip() == "(3, 4) float32" and result.result_value == 0.0
    got = run_script("result = tensor", path, {}, workdir=tmp_path, tensor_location=where)
    np.testing.assert_array_equal(np.load(got.result_array_path), b)
    check()  # the script changed its private copy only
    beyond = dict(where, shape=[300, 4])
    bad = run_script("1", path, {}, workdir=tmp_path, tensor_location=beyond)
    assert bad.status != "ok" and "shorter than the trace's manifest says" in bad.error


def test_array_result_is_saved_as_npy(tmp_path):
    result = run_script("result = np.arange(6).reshape(2, 3)", None, None, workdir=tmp_path)
    assert result.status == "ok", result.error
    assert result.result_array_path == result.run_dir / "result.npy"
    np.testing.assert_array_equal(np.load(result.result_array_path), np.arange(6).reshape(2, 3))
    assert result.result_shape == (2, 3)
    assert result.result_dtype == str(np.arange(6).dtype)
    assert result.result_type == "numpy.ndarray"
    assert result.result_repr.startswith("array([[0, 1, 2],")


def test_last_expression_none_falls_back_to_result_variable(tmp_path):
    result = run_script("result = 41 + 1\nprint(result)", None, None, workdir=tmp_path)
    assert result.status == "ok" and result.result_value == 42 and result.stdout == "42\n"


def test_hostile_object_npy_is_not_unpickled(tmp_path):
    marker = tmp_path / "pwned"
    path = tmp_path / "objects.npy"
    np.save(path, np.array([_Boom(str(marker)), 1], dtype=object), allow_pickle=True)
    result = run_script("tensor", path, {}, workdir=tmp_path)
    assert result.status == "error"
    assert "holds Python objects, not numbers" in result.error
    assert not marker.exists()


class _Boom:
    """Unpickling this would create a directory: proof that nothing was unpickled."""

    def __init__(self, target: str) -> None:
        self.target = target

    def __reduce__(self):
        return (os.mkdir, (self.target,))


def test_missing_tensor_file_is_a_clear_error(tmp_path):
    result = run_script("1", tmp_path / "nope.npy", {}, workdir=tmp_path)
    assert result.status == "error"
    assert result.error == f"The captured tensor file {tmp_path / 'nope.npy'} does not exist."


# -- errors -----------------------------------------------------------------------------------


def test_syntax_error_reports_the_line(tmp_path):
    result = run_script("x = 1\ny = (2,\n", None, None, workdir=tmp_path)
    assert result.status == "error"
    assert result.error_line == 2
    assert 'File "<script>", line 2' in result.error
    assert "SyntaxError" in result.error


def test_exception_traceback_shows_only_script_frames(tmp_path):
    code = "def f(a):\n    return a.reshape(5, 5)\nprint('before')\nf(tensor)\n"
    path = tmp_path / "t.npy"
    np.save(path, np.ones(3))
    result = run_script(code, path, {}, workdir=tmp_path)
    assert result.status == "error"
    assert result.stdout == "before\n"
    assert result.error.startswith("Traceback (most recent call last):")
    assert 'File "<script>", line 4, in <module>' in result.error
    assert 'File "<script>", line 2, in f' in result.error
    assert "ValueError: cannot reshape array of size 3" in result.error
    assert "worker.py" not in result.error and "cell.py" not in result.error
    assert result.error_line == 2


def test_sys_exit_zero_is_ok_with_a_note(tmp_path):
    result = run_script("import sys\nprint('a')\nsys.exit(0)", None, None, workdir=tmp_path)
    assert result.status == "ok" and result.stdout == "a\n"
    assert "The script called sys.exit(0); it ended there." in result.notes


@pytest.mark.skipif(not POSIX, reason="exit codes and signals as on POSIX")
def test_hard_exit_is_reported_as_crashed(tmp_path):
    result = run_script(
        "import os\nprint('x', flush=True)\nos._exit(3)", None, None, workdir=tmp_path
    )
    assert result.status == "crashed"
    assert result.returncode == 3
    assert result.error.startswith("The script process exited with code 3 before reporting")
    assert result.stdout == "x\n"  # streamed before the crash


@pytest.mark.skipif(not POSIX, reason="SIGSEGV")
def test_segfault_is_reported_as_crashed_with_the_script_line(tmp_path):
    result = run_script("x = 1\nimport ctypes\nctypes.string_at(0)", None, None, workdir=tmp_path)
    assert result.status == "crashed"
    assert "was killed by SIGSEGV" in result.error
    assert result.error_line == 3
    assert "Fatal Python error" in result.error and "Extension modules" not in result.error


# -- output capture ---------------------------------------------------------------------------


def test_output_is_bounded_with_a_note(tmp_path):
    code = "print('x' * 4999)\nimport sys\nsys.stderr.write('e' * 10)"
    process = start_script(code, None, None, workdir=tmp_path, max_output_chars=1000)
    result = process.wait()
    assert result.status == "ok"
    assert result.stdout == "x" * 1000
    assert result.stderr == "e" * 10
    assert (
        "The script's stdout was cut after 1,000 characters; 4,000 more characters were not kept."
        in result.notes
    )


def test_unicode_output_and_lone_surrogates_survive_the_protocol(tmp_path):
    code = "s = 'é中' + chr(0xD800)\nprint(s)\ns"
    result = run_script(code, None, None, workdir=tmp_path)
    assert result.status == "ok", result.error
    assert result.stdout == "é中\ud800\n" and result.result_value == "é中\ud800"


def test_streamed_output_arrives_while_the_script_runs(tmp_path):
    streamed = _Streamed()
    code = "print('step 1')\nimport time\ntime.sleep(60)"
    with start_script(code, None, None, workdir=tmp_path, on_event=streamed) as process:
        streamed.wait_for(process, "step 1\n")
        assert process.phase == "running"
    assert process.result.status == "stopped"  # leaving the block stopped it
    assert process.result.stdout == "step 1\n"


def test_descriptor_level_output_cannot_corrupt_the_protocol(tmp_path):
    code = (
        "import os, subprocess, sys\n"
        "print('python')\n"
        "os.write(1, b'{not json\\n')\n"
        "subprocess.run([sys.executable, '-c', 'print(\"child\")'], check=True)\n"
        "subprocess.run([sys.executable, '-c', 'import sys; sys.stderr.write(\"oops\")'])\n"
        "print('to stderr', file=sys.stderr)\n"
        "'done'"
    )
    result = run_script(code, None, None, workdir=tmp_path)
    assert result.status == "ok", result.error
    assert result.result_value == "done"
    assert result.stdout == "python\n{not json\nchild\n"
    assert result.stderr == "to stderr\noops"
    assert len([n for n in result.notes if n.startswith("Output written straight")]) == 2


def test_descriptor_level_output_counts_against_the_output_bound(tmp_path):
    code = "print('a' * 60)\nimport os\nos.write(1, b'b' * 100)"
    result = start_script(code, None, None, workdir=tmp_path, max_output_chars=100).wait()
    assert result.stdout == "a" * 60 + "\n" + "b" * 39
    assert "The script's stdout was cut after 100 characters." in result.notes


# -- limits -----------------------------------------------------------------------------------


def test_timeout_kills_a_busy_loop(tmp_path):
    process = start_script("while True: pass", None, None, timeout_s=2, workdir=tmp_path)
    pid = process.pid
    result = process.wait()
    assert result.status == "timeout"
    assert result.error == "The script did not finish within the 2 s timeout and was stopped."
    assert result.startup_s is not None
    assert 2.0 <= result.duration_s - result.startup_s < 5.0
    assert not _alive(pid)


@pytest.mark.skipif(not POSIX, reason="RLIMIT_AS is POSIX only")
def test_huge_allocation_is_a_memory_status(tmp_path):
    result = run_script("x = 1\na = np.ones(10**10)\n", None, None, workdir=tmp_path)
    assert result.status == "memory"
    assert result.error.startswith("The script exceeded the RAM limit of 2048 MB (line 2).")
    assert result.error_line == 2


@pytest.mark.skipif(not POSIX, reason="RLIMIT_AS is POSIX only")
@pytest.mark.parametrize(
    ("max_ram_mb", "megabytes", "status"),
    [(256, 96, "ok"), (256, 480, "memory"), (0, 480, "ok")],
)
def test_ram_limit_is_headroom_for_the_script(tmp_path, max_ram_mb, megabytes, status):
    code = f"a = np.ones({megabytes} * 2**20 // 8)\na[::4096] = 2\nfloat(a.sum())"
    result = run_script(code, None, None, max_ram_mb=max_ram_mb, workdir=tmp_path)
    assert result.status == status, result.error
    if status == "memory":
        assert result.error.startswith("The script exceeded the RAM limit of 256 MB (line 1).")
    else:
        assert result.result_value > 0
        assert result.ram_limit_mb == (max_ram_mb or None)


@pytest.mark.skipif(not POSIX, reason="RLIMIT_AS is POSIX only")
def test_tensor_copy_counts_once_against_the_ram_limit(tmp_path, unchanged):
    path = tmp_path / "t96.npy"
    np.save(path, np.ones(24 * 2**20, np.float32))  # 96 MiB
    check = unchanged(path)
    too_small = run_script("tensor.sum()", path, {}, max_ram_mb=64, workdir=tmp_path)
    assert too_small.status == "memory"
    assert too_small.error == "Loading the captured tensor exceeded the RAM limit of 64 MB."
    enough = run_script(
        "tensor *= 2\nfloat(tensor[:10].sum())", path, {}, max_ram_mb=128, workdir=tmp_path
    )
    assert enough.status == "ok", enough.error
    assert enough.result_value == 20.0
    check()


@pytest.mark.skipif(not POSIX, reason="process groups and /proc")
def test_stop_kills_the_whole_process_tree(tmp_path):
    code = (
        "import subprocess, sys, time\n"
        "cmd = [sys.executable, '-c', 'import time; time.sleep(120)']\n"
        "child = subprocess.Popen(cmd)\n"
        "escaped = subprocess.Popen(cmd, start_new_session=True)\n"
        "print('PIDS', child.pid, escaped.pid, flush=True)\n"
        "time.sleep(120)\n"
    )
    streamed = _Streamed()
    process = start_script(code, None, None, timeout_s=300, workdir=tmp_path, on_event=streamed)
    text = streamed.wait_for(process, "PIDS")
    pids = [int(p) for p in text.split("PIDS", 1)[1].split()[:2]]
    assert all(_alive(p) for p in pids)
    t0 = time.monotonic()
    result = process.stop()
    assert time.monotonic() - t0 < 3
    assert result.status == "stopped"
    assert result.error == "The script was stopped before it finished."
    assert result.stdout.startswith("PIDS ")
    assert _gone([process.pid, *pids])


def test_cancel_token_stops_a_blocking_run(tmp_path):
    token = CancelToken()

    def on_event(event: dict) -> None:
        if event["event"] == "phase" and event["phase"] == "running":
            token.cancel()

    code = "import time\ntime.sleep(60)"
    t0 = time.monotonic()
    result = run_script(code, None, None, workdir=tmp_path, on_event=on_event, cancel=token)
    assert result.status == "stopped"
    assert time.monotonic() - t0 < 30


@pytest.mark.skipif(not POSIX, reason="process groups")
def test_background_process_left_by_a_finished_script_is_killed(tmp_path):
    code = (
        "import subprocess, sys\n"
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'])\n"
        "p.pid"
    )
    result = run_script(code, None, None, workdir=tmp_path)
    assert result.status == "ok"
    assert _gone([int(result.result_value)])


def test_runs_get_fresh_folders_and_relative_files_land_there(tmp_path):
    code = "open('note.txt', 'w').write('hi')\nimport os\nos.getcwd()"
    first = run_script(code, None, None, workdir=tmp_path)
    second = run_script(code, None, None, workdir=tmp_path)
    assert first.run_dir != second.run_dir
    for result in (first, second):
        assert result.run_dir.parent == tmp_path.resolve()
        assert Path(result.result_value) == result.run_dir
        assert (result.run_dir / "note.txt").read_text() == "hi"


# -- the parent's own argument checks ---------------------------------------------------------


def test_bad_arguments_are_refused_before_starting(tmp_path):
    with pytest.raises(ValueError, match="metadata cannot be passed to the script"):
        start_script("1", None, {"f": object()}, workdir=tmp_path)
    with pytest.raises(ValueError, match="timeout_s must be a positive number"):
        start_script("1", None, None, timeout_s=0, workdir=tmp_path)
    with pytest.raises(TypeError, match="code must be a str"):
        start_script(b"1", None, None, workdir=tmp_path)  # type: ignore[arg-type]


def test_numpy_metadata_values_arrive_as_plain_json(tmp_path):
    meta = {"shape": np.array([1, 3]), "scale": np.float32(0.5), "path": Path("/x")}
    result = run_script(
        "(metadata['shape'], metadata['scale'], metadata['path'])", None, meta, workdir=tmp_path
    )
    assert ast.literal_eval(result.result_repr) == ([1, 3], 0.5, "/x")


def test_worker_module_runs_standalone_without_a_request(tmp_path):
    import subprocess

    out = subprocess.run(
        [sys.executable, "-m", "nneditor.scripting.worker", str(tmp_path)],
        capture_output=True,
        timeout=120,
    )
    assert out.returncode == 0
    payload = (tmp_path / "result.json").read_text()
    assert '"status": "error"' in payload and "The run request could not be read" in payload


@pytest.mark.skipif(not POSIX, reason="re-parenting and process groups")
def test_worker_dies_with_the_app_that_started_it(tmp_path):
    import subprocess

    app = (
        "import os, sys, time\n"
        "from pathlib import Path\n"
        "from nneditor.scripting import start_script\n"
        "code = 'import subprocess, sys\\n"
        'p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])\\n'
        'print("CHILD", p.pid, flush=True)\\n'
        "while True: pass'\n"
        "seen = []\n"
        f"proc = start_script(code, None, None, timeout_s=300, workdir=Path({str(tmp_path)!r}),"
        " on_event=lambda e: seen.append(e.get('text', '')))\n"
        "while 'CHILD' not in ''.join(seen):\n"
        "    proc.poll(); time.sleep(0.05)\n"
        "print(proc.pid, ''.join(seen).split()[1], flush=True)\n"
        "os._exit(0)\n"  # the app dies without stopping its run
    )
    out = subprocess.run([sys.executable, "-c", app], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    pids = [int(p) for p in out.stdout.split()]
    assert len(pids) == 2
    assert _gone(pids, within_s=10)
