"""Tracer plugins without running them: manifests, limits, discovery (never importing plugin
code), duplicate ids, install and templates, and the plan's compatibility sentences."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from nneditor.tracing.plugins import discovery, install
from nneditor.tracing.plugins.manifest import (
    MANIFEST,
    PluginError,
    fingerprint,
    plugin_files,
    read_manifest,
)

ROOT = Path(__file__).resolve().parents[2]
GOOD = {
    "api_version": 1,
    "id": "test.sentinel",
    "name": "Sentinel tracer",
    "version": "1.0.0",
    "entry_point": "tracer.py:trace",
    "artifact_kinds": ["gguf_model"],
    "architectures": ["llama"],
    "devices": ["cpu"],
    "streaming_weights": True,
}


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NNEDITOR_HOME", str(tmp_path / "home"))
    monkeypatch.delenv(discovery.PATH_ENV, raising=False)


def make_plugin(folder: Path, sentinel: Path | None = None, **over: object) -> Path:
    """A plugin whose module writes ``sentinel`` when imported (it never should be here)."""
    folder.mkdir(parents=True)
    (folder / MANIFEST).write_text(json.dumps({**GOOD, **over}), "utf-8")
    marker = f"open({str(sentinel)!r}, 'w').write('imported')\n" if sentinel else ""
    (folder / "tracer.py").write_text(
        marker + "from .helpers import VALUE\n\ndef trace(context):\n    return None\n", "utf-8"
    )
    (folder / "helpers.py").write_text("VALUE = 1\n", "utf-8")
    return folder


def test_a_valid_manifest_is_read_and_fingerprinted(tmp_path: Path) -> None:
    folder = make_plugin(tmp_path / "p")
    m = read_manifest(folder)
    assert (m.id, m.version, m.entry_file, m.entry_function) == (
        "test.sentinel",
        "1.0.0",
        "tracer.py",
        "trace",
    )
    assert m.architectures == ("llama",) and m.streaming_weights
    before = fingerprint(folder)
    (folder / "__pycache__").mkdir()
    (folder / "__pycache__" / "x.pyc").write_bytes(b"cache")  # ignored
    assert fingerprint(folder) == before
    (folder / "helpers.py").write_text("VALUE = 2\n", "utf-8")
    assert fingerprint(folder) != before


@pytest.mark.parametrize(
    ("over", "words"),
    [
        ({"api_version": 2}, "api_version is 2"),
        ({"id": "Bad Id"}, "must be lowercase"),
        ({"entry_point": "tracer.py"}, "must look like tracer.py:trace"),
        ({"entry_point": "missing.py:trace"}, "missing.py does not exist"),
        ({"entry_point": "../x.py:trace"}, "inside the plugin folder"),
        ({"artifact_kinds": ["gguf"]}, "names 'gguf'; known values"),
        ({"artifact_kinds": []}, "at least one kind"),
        ({"devices": ["tpu"]}, "names 'tpu'"),
        ({"name": ""}, "'name' must be a non-empty string"),
        ({"streaming_weights": "yes"}, "true or false"),
    ],
)
def test_malformed_manifests_are_refused_with_the_field(
    tmp_path: Path, over: dict, words: str
) -> None:
    with pytest.raises(PluginError, match=words):
        read_manifest(make_plugin(tmp_path / "p", **over))


def test_folder_limits(tmp_path: Path) -> None:
    folder = make_plugin(tmp_path / "links")
    os.symlink(folder / "helpers.py", folder / "alias.py")
    with pytest.raises(PluginError, match="symbolic link"):
        plugin_files(folder)
    many = make_plugin(tmp_path / "many")
    for i in range(1024):
        (many / f"f{i}.txt").write_text("x")
    with pytest.raises(PluginError, match="more than 1,024 files"):
        plugin_files(many)
    big = make_plugin(tmp_path / "big")
    with open(big / "weights.bin", "wb") as fh:
        fh.truncate(33 * 1024 * 1024)  # sparse: 33 MiB of size, no disk
    with pytest.raises(PluginError, match="more than 32 MiB"):
        plugin_files(big)


def test_discovery_never_imports_and_diagnoses(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    sentinel = tmp_path / "imported.txt"
    lib = tmp_path / "lib"
    make_plugin(lib / "a", sentinel)
    make_plugin(lib / "b", sentinel)  # the same id: both disabled
    make_plugin(lib / "c", sentinel, id="test.other")
    broken = lib / "broken"
    broken.mkdir()
    (broken / MANIFEST).write_text("{not json", "utf-8")
    single = make_plugin(tmp_path / "single", sentinel, id="test.single")
    monkeypatch.setenv(discovery.PATH_ENV, os.pathsep.join([str(lib), str(single)]))
    records = {r.folder.name: r for r in discovery.discover()}
    assert set(records) >= {"a", "b", "c", "broken", "single"}
    assert records["c"].enabled and records["single"].enabled
    assert records["single"].source == "path" and len(records["single"].fingerprint) == 64
    for dup, other in (("a", "b"), ("b", "a")):
        assert not records[dup].enabled
        assert str(lib / other) in records[dup].reason and "rename one" in records[dup].reason
    assert "is not valid JSON" in records["broken"].reason
    with pytest.raises(PluginError, match="disabled: id 'test.sentinel' is also used"):
        discovery.find("test.sentinel")
    with pytest.raises(PluginError, match="no tracer plugin 'nope'.*test.other"):
        discovery.find("nope")
    env = {**os.environ}
    listed = subprocess.run(
        [sys.executable, "-m", "nneditor", "--list-tracers", "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        check=True,
    )
    data = json.loads(listed.stdout)
    states = {Path(t["folder"]).name: t["state"] for t in data["tracers"]}
    assert states["c"] == "enabled" and states["a"] == states["broken"] == "disabled"
    assert data["user_folder"].endswith(os.path.join("home", "data", "tracers"))
    assert not sentinel.exists()  # nothing above imported a plugin


def test_install_copies_without_importing_and_never_overwrites(tmp_path: Path) -> None:
    sentinel = tmp_path / "imported.txt"
    src = make_plugin(tmp_path / "src", sentinel)
    done = subprocess.run(
        [sys.executable, "-m", "nneditor", "--install-tracer", str(src)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    dest = discovery.user_folder() / "test.sentinel"
    assert (dest / "tracer.py").read_bytes() == (src / "tracer.py").read_bytes()
    assert fingerprint(dest) == fingerprint(src)
    again = subprocess.run(
        [sys.executable, "-m", "nneditor", "--install-tracer", str(src)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert again.returncode == 2
    assert "already installed" in again.stderr and "remove it" in again.stderr
    record = discovery.find("test.sentinel")
    assert record.source == "user"
    with pytest.raises(PluginError, match="has no nneditor-tracer.json"):
        install.install(tmp_path)
    assert not sentinel.exists()


def test_templates(tmp_path: Path) -> None:
    dest = install.create(tmp_path / "My LLM")
    m = read_manifest(dest)
    assert m.id == "example.my-llm" and m.entry_point == "tracer.py:trace"
    assert "qwen35" in m.architectures and m.artifact_kinds == ("gguf_model", "huggingface_model")
    assert "trace_numpy_decoder" in (dest / "tracer.py").read_text("utf-8")
    with pytest.raises(PluginError, match="already exists and is not empty"):
        install.create(dest)
    ssm = install.create(tmp_path / "ssm", "ssm")  # a copy of the bundled Mamba tracer
    assert read_manifest(ssm).id == "example.mamba-ssm"
    assert (ssm / "hooks.py").is_file() and not (ssm / "__pycache__").exists()
    unet = install.create(tmp_path / "diffusion", "diffusion")
    assert read_manifest(unet).id == "example.diffusion-unet"
