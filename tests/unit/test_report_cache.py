"""The kept ``inspect`` reports: given back only while the model's files and NNEditor's code
are unchanged, never for a file still being written, identical to a fresh report."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import onnx
import pytest

from nneditor.cli import inspection, main, report_cache

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "tiny_transformer.onnx"
OLD_NS = 1_600_000_000 * 10**9


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """The cache on, in a temporary home, keeping every report of any settled file."""
    monkeypatch.setenv("NNEDITOR_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("NNEDITOR_NO_REPORT_CACHE", raising=False)
    monkeypatch.setattr(report_cache, "MIN_SECONDS", 0.0)
    monkeypatch.setattr(report_cache, "RACY_S", 0.0)
    return tmp_path


def _model(folder: Path) -> Path:
    path = folder / "model.onnx"
    shutil.copyfile(EXAMPLE, path)
    return path


def _inspect(capsys, *args: str) -> str:
    assert main(["inspect", *args]) == 0
    return capsys.readouterr().out


def _count_opens(monkeypatch) -> list[str]:
    opened: list[str] = []
    real = inspection.open_document

    def counted(path: str):
        opened.append(path)
        return real(path)

    monkeypatch.setattr(inspection, "open_document", counted)
    return opened


def test_a_kept_report_is_given_back_unchanged(cache, capsys, monkeypatch):
    path = _model(cache)
    fresh = _inspect(capsys, str(path), "--json")
    text = _inspect(capsys, str(path))
    assert len(list((cache / "home" / "cache" / "reports").glob("*.json"))) == 1
    opened = _count_opens(monkeypatch)
    assert _inspect(capsys, str(path), "--json") == fresh
    assert _inspect(capsys, str(path)) == text
    assert opened == []
    report = json.loads(fresh)
    assert report["graph"]["node_count"] == len(onnx.load(str(EXAMPLE)).graph.node)
    assert text.startswith("model.onnx: onnx v")


def test_no_cache_computes_afresh(cache, capsys, monkeypatch):
    path = _model(cache)
    kept = _inspect(capsys, str(path), "--json")
    opened = _count_opens(monkeypatch)
    assert _inspect(capsys, str(path), "--json", "--no-cache") == kept
    assert opened == [str(path)]


def test_a_same_size_rewrite_with_the_old_time_is_a_miss(cache, capsys):
    path = _model(cache)
    os.utime(path, ns=(OLD_NS, OLD_NS))
    before = json.loads(_inspect(capsys, str(path), "--json"))
    assert before["graph"]["name"] == "tiny_transformer"
    data = path.read_bytes().replace(b"tiny_transformer", b"tiny_transfXrmer")
    path.write_bytes(data)  # same size; the change time moves, which no one can set back
    os.utime(path, ns=(OLD_NS, OLD_NS))
    after = json.loads(_inspect(capsys, str(path), "--json"))
    assert after["graph"]["name"] == "tiny_transfXrmer"


def test_a_file_written_moments_ago_is_not_kept(cache, capsys, monkeypatch):
    monkeypatch.setattr(report_cache, "RACY_S", 60.0)
    path = _model(cache)
    _inspect(capsys, str(path), "--json")
    assert not (cache / "home" / "cache" / "reports").exists() or not list(
        (cache / "home" / "cache" / "reports").glob("*.json")
    )


def test_changed_code_is_a_miss(cache, capsys, monkeypatch):
    path = _model(cache)
    _inspect(capsys, str(path), "--json")
    assert report_cache.lookup(str(path)) is not None
    monkeypatch.setattr(report_cache, "_CODE", "another build")
    assert report_cache.lookup(str(path)) is None


def test_a_changed_external_data_file_is_a_miss(cache, capsys):
    model = onnx.load(str(EXAMPLE))
    path = cache / "ext.onnx"
    onnx.save(model, str(path), save_as_external_data=True, location="ext.data", size_threshold=0)
    _inspect(capsys, str(path), "--json")
    assert report_cache.lookup(str(path)) is not None
    data = cache / "ext.data"
    data.write_bytes(data.read_bytes())
    assert report_cache.lookup(str(path)) is None


def test_only_onnx_reports_without_notes_are_kept_and_only_when_switched_on(
    cache, capsys, monkeypatch
):
    path = _model(cache)
    assert not report_cache.store(str(path), [path], {"format": "onnx", "notes": ["x"]}, 1.0)
    assert not report_cache.store(str(path), [path], {"format": "gguf"}, 1.0)
    monkeypatch.setenv("NNEDITOR_NO_REPORT_CACHE", "1")
    assert not report_cache.store(str(path), [path], {"format": "onnx"}, 1.0)
    _inspect(capsys, str(path), "--json")
    assert report_cache.lookup(str(path)) is None
    monkeypatch.delenv("NNEDITOR_NO_REPORT_CACHE")
    assert report_cache.lookup(str(path)) is None
    assert report_cache.store(str(path), [path], {"format": "onnx"}, 1.0)
    assert report_cache.lookup(str(path)) == {"format": "onnx"}


def test_a_damaged_entry_is_a_miss_and_is_replaced(cache, capsys):
    path = _model(cache)
    fresh = _inspect(capsys, str(path), "--json")
    (entry,) = (cache / "home" / "cache" / "reports").glob("*.json")
    entry.write_text("{not json", encoding="utf-8")
    assert report_cache.lookup(str(path)) is None
    assert _inspect(capsys, str(path), "--json") == fresh
    assert report_cache.lookup(str(path)) == json.loads(fresh)


_PROBE = """
import contextlib, io, json, sys
from nneditor.cli import main, report_cache
report_cache.MIN_SECONDS = report_cache.RACY_S = 0.0
with contextlib.redirect_stdout(io.StringIO()):
    main(["inspect", sys.argv[1], "--json"])
print(json.dumps([m for m in ("numpy", "onnx", "onnx.onnx_ml_pb2") if m in sys.modules]))
"""


def test_a_kept_report_imports_neither_numpy_nor_onnx(cache):
    path = _model(cache)
    env = {**os.environ, "NNEDITOR_HOME": str(cache / "home")}
    env.pop("NNEDITOR_NO_REPORT_CACHE", None)
    runs = [
        subprocess.run(
            [sys.executable, "-c", _PROBE, str(path)],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )
        for _ in range(2)
    ]
    assert [r.returncode for r in runs] == [0, 0], runs[0].stderr + runs[1].stderr
    first, second = (json.loads(r.stdout.splitlines()[-1]) for r in runs)
    assert first == ["onnx.onnx_ml_pb2"]  # computed: onnx's message classes only, no numpy
    assert second == []  # given back
