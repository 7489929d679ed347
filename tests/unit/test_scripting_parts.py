"""Pieces of the script runner tested in-process: capture, tensor loading, results, processes."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from nneditor.scripting import preload, results
from nneditor.scripting.capture import BoundedStream, Channel
from nneditor.scripting.limits import RamLimit, address_space_bytes, apply_ram_limit, memory_message
from nneditor.scripting.processes import descendants, signal_name, worker_command, worker_env
from nneditor.scripting.protocol import NATIVE_STDERR_FILE, read_json, write_json_atomic

# -- capture ----------------------------------------------------------------------------------


def _events(buffer: io.StringIO) -> list[dict]:
    return [json.loads(line) for line in buffer.getvalue().splitlines()]


def test_bounded_stream_keeps_a_prefix_and_streams_it_once():
    wire = io.StringIO()
    stream = BoundedStream("stdout", Channel(wire), limit=10)
    assert stream.write("hello ") == 6
    stream.flush()
    stream.write("world and more")
    stream.flush()
    stream.flush()
    assert stream.getvalue() == "hello worl"
    assert [e["text"] for e in _events(wire)] == ["hello ", "worl"]
    assert stream.truncation_note() == (
        "The script's stdout was cut after 10 characters; 10 more characters were not kept."
    )


def test_bounded_stream_behaves_like_a_text_file():
    stream = BoundedStream("stderr", None, limit=100)
    print("a", 1, file=stream)
    assert stream.getvalue() == "a 1\n" and stream.truncation_note() is None
    assert stream.encoding == "utf-8" and not stream.isatty() and stream.writable()
    with pytest.raises(TypeError, match="must be str, not bytes"):
        stream.write(b"x")  # type: ignore[arg-type]
    with pytest.raises(io.UnsupportedOperation):
        stream.fileno()
    with pytest.raises(ValueError, match="unknown stream kind"):
        BoundedStream("log", None, 1)


def test_channel_survives_a_closed_parent():
    wire = io.StringIO()
    channel = Channel(wire)
    wire.close()
    channel.emit("note", text="x")  # no exception
    assert channel.broken


# -- protocol files ---------------------------------------------------------------------------


def test_json_files_are_written_atomically(tmp_path):
    path = tmp_path / "r.json"
    write_json_atomic(path, {"a": [1, "é"]})
    assert read_json(path) == {"a": [1, "é"]}
    assert not (tmp_path / "r.json.tmp").exists()
    path.write_text("[1]")
    with pytest.raises(ValueError, match="does not hold a JSON object"):
        read_json(path)


# -- tensor loading ---------------------------------------------------------------------------


def test_load_tensor_is_a_private_writable_copy(tmp_path, unchanged):
    path = tmp_path / "t.npy"
    original = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.save(path, original)
    check = unchanged(path)
    tensor = preload.load_tensor(path)
    owner = tensor
    while owner.base is not None:
        owner = owner.base
    assert type(tensor) is np.ndarray and tensor.flags.writeable
    assert type(owner) is np.ndarray and owner.flags.owndata  # fresh memory, not a file map
    tensor *= 0
    check()
    np.testing.assert_array_equal(np.load(path), original)


@pytest.mark.parametrize(
    "array",
    [
        np.zeros((0, 3), np.float16),
        np.array(2.5),
        np.ones(3, ">i4"),
        np.asfortranarray(np.arange(6, dtype=np.int16).reshape(2, 3)),
        np.zeros(2, dtype=[("a", "<i4"), ("b", "<f8")]),
    ],
)
def test_load_tensor_edge_shapes_and_byte_orders(tmp_path, array):
    path = tmp_path / "t.npy"
    np.save(path, array)
    loaded = preload.load_tensor(path)
    np.testing.assert_array_equal(loaded, array)
    assert loaded.dtype == array.dtype and loaded.shape == array.shape


def _refusal(path: Path) -> str:
    with pytest.raises(preload.TensorLoadError) as exc:
        preload.load_tensor(path)
    return str(exc.value)


def test_header_claiming_more_data_than_the_file_holds_is_refused_before_allocating(tmp_path):
    path = tmp_path / "claims.npy"
    with open(path, "wb") as f:
        header = {"descr": "<f4", "fortran_order": False, "shape": (10**6, 10**6)}
        np.lib.format.write_array_header_1_0(f, header)
        f.write(b"\0" * 64)
    tracemalloc.start()
    try:
        message = _refusal(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert message == (
        f"The captured tensor file {path} is damaged: its header describes "
        "4,000,000,000,000 bytes of data but the file holds only 64."
    )
    assert peak < 10 * 2**20


def test_bad_header_is_a_damaged_file(tmp_path):
    path = tmp_path / "bad.npy"
    path.write_bytes(b"\x93NUMPY\x01\x00\x10\x00{'descr': 'zz'}  \n")
    assert _refusal(path).startswith(f"The captured tensor file {path} is damaged:")


def test_load_tensor_refuses_objects(tmp_path):
    path = tmp_path / "o.npy"
    np.save(path, np.array([1, None], dtype=object), allow_pickle=True)
    assert _refusal(path) == (
        f"The captured tensor file {path} holds Python objects, not numbers; it is not loaded "
        "because that would execute code stored in the file."
    )


def test_load_tensor_refuses_npz_text_missing_and_truncated(tmp_path):
    npz = tmp_path / "a.npz"
    np.savez(npz, a=np.ones(2))
    assert _refusal(npz) == (
        f"The captured tensor file {npz} is an .npz archive, not a single .npy array."
    )
    text = tmp_path / "a.txt"
    text.write_text("hello world")
    assert _refusal(text) == (
        f"The captured tensor file {text} is not an .npy file (it does not start with the .npy "
        "signature); found b'hello '."
    )
    missing = tmp_path / "none.npy"
    assert _refusal(missing) == f"The captured tensor file {missing} does not exist."
    full = tmp_path / "full.npy"
    np.save(full, np.ones(1000))
    cut = tmp_path / "cut.npy"
    cut.write_bytes(full.read_bytes()[:500])
    message = _refusal(cut)
    assert message.startswith(f"The captured tensor file {cut} is damaged:")
    header_only = tmp_path / "header.npy"
    header_only.write_bytes(full.read_bytes()[:20])
    assert _refusal(header_only).startswith(f"The captured tensor file {header_only} is damaged:")


# -- preloaded libraries ----------------------------------------------------------------------


def test_mentioned_names_are_whole_words():
    assert preload.mentioned_names("plt.plot(x)\nscikit") == {"plt", "scikit"}
    assert preload.mentioned_names("splt = 1; npx = 2") == set()


def test_missing_optional_library_is_absent_with_a_note(monkeypatch):
    fake = preload.Library(("zz",), "nneditor_no_such_library", (), "nneditor-no-such-library")
    monkeypatch.setattr(preload, "OPTIONAL_LIBRARIES", (fake,))
    monkeypatch.setattr(preload, "mentioned_names", lambda code: {"zz"})
    notes: list[str] = []
    namespace, versions = preload.preload_libraries("zz", notes)
    assert "zz" not in namespace and {"np", "math"} <= set(namespace)
    assert versions["nneditor_no_such_library"] is None
    assert notes == [
        "nneditor-no-such-library is not installed, so `zz` is not available in scripts "
        "(install it with `pip install nneditor-no-such-library`)."
    ]


def test_unmentioned_optional_library_is_not_imported_or_noted(monkeypatch):
    fake = preload.Library(("zz",), "nneditor_no_such_library", (), "nneditor-no-such-library")
    monkeypatch.setattr(preload, "OPTIONAL_LIBRARIES", (fake,))
    notes: list[str] = []
    namespace, _ = preload.preload_libraries("print(1)", notes)
    assert "zz" not in namespace and notes == []


# -- limits -----------------------------------------------------------------------------------


def test_memory_messages():
    assert memory_message(RamLimit(256, 100.0, 1)) == "The script exceeded the RAM limit of 256 MB."
    assert memory_message(RamLimit(256, 100.0, None), "Loading") == "Loading ran out of memory."


def test_zero_ram_limit_is_not_enforced():
    limit = apply_ram_limit(0, [])
    assert not limit.enforced
    if sys.platform.startswith("linux"):
        assert address_space_bytes() > 10 * 2**20


# -- results ----------------------------------------------------------------------------------


def test_result_paths_cannot_leave_the_run_folder(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "figure-1.png").write_bytes(b"x")
    (tmp_path / "secret.png").write_bytes(b"x")
    payload = {"status": "ok", "figures": ["figure-1.png", "../secret.png", "missing.png"]}
    payload["result_array_path"] = "../secret.png"
    result = results.from_worker(payload, run)
    assert result.figures == [(run / "figure-1.png").resolve()]
    assert result.result_array_path is None


def test_unknown_worker_status_is_a_crash(tmp_path):
    result = results.from_worker({"status": "great"}, tmp_path)
    assert result.status == "crashed"
    assert result.error == "The script worker reported an unknown status 'great'."


FAULT = """Fatal Python error: Segmentation fault

Thread 0x1 (most recent call first):
  File "/x/threading.py", line 331 in wait

Current thread 0x2 (most recent call first):
  File "/x/ctypes/__init__.py", line 519 in string_at
  File "<script>", line 7 in <module>
  File "/x/cell.py", line 76 in run_cell

Extension modules: numpy.core, scipy.special (total: 2)
"""


def test_crash_report_is_shortened_to_the_crashing_thread():
    text, line = results.summarize_crash(FAULT)
    assert line == 7
    assert text.startswith("Fatal Python error: Segmentation fault\n\nCurrent thread 0x2")
    assert "threading.py" not in text and "Extension modules" not in text


def test_crash_with_memory_hint_is_memory_status(tmp_path):
    (tmp_path / NATIVE_STDERR_FILE).write_text("terminate called after std::bad_alloc\n")
    result = results.crashed(tmp_path, -6, "", "", max_ram_mb=512)
    assert result.status == "memory"
    assert result.error.startswith(
        "The script exceeded the RAM limit of 512 MB; the worker was killed by SIGABRT."
    )
    plain = results.crashed(tmp_path, -9, "", "", max_ram_mb=0)
    assert plain.status == "crashed"
    assert "possibly because the system ran out of memory" in plain.error


# -- processes --------------------------------------------------------------------------------


def test_signal_names():
    assert signal_name(0) is None and signal_name(3) is None
    if os.name == "posix":
        assert signal_name(-9) == "SIGKILL"


def test_worker_command_and_environment(tmp_path):
    cmd = worker_command(tmp_path)
    assert cmd == [sys.executable, "-m", "nneditor.scripting.worker", str(tmp_path)]
    env = worker_env({"PYTHONPATH": "/elsewhere"})
    assert env["MPLBACKEND"] == "Agg"
    root, rest = env["PYTHONPATH"].split(os.pathsep, 1)
    assert (Path(root) / "nneditor" / "scripting" / "worker.py").is_file()
    assert rest == "/elsewhere"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc walk")
def test_descendants_finds_grandchildren():
    code = (
        "import subprocess, sys, time\n"
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)'])\n"
        "print(p.pid, flush=True)\n"
        "time.sleep(30)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        grandchild = int(parent.stdout.readline())
        end = time.monotonic() + 5
        while grandchild not in descendants(parent.pid) and time.monotonic() < end:
            time.sleep(0.05)
        assert grandchild in descendants(parent.pid)
    finally:
        for pid in descendants(parent.pid):
            os.kill(pid, 9)
        parent.kill()
        parent.wait()
