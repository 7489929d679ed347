"""The garbage-collector pause used while a document is built."""

from __future__ import annotations

import gc
import threading

import pytest

from nneditor.jobs.collector import paused_collection


def test_pauses_nest_and_restore_the_collector():
    assert gc.isenabled()
    with paused_collection():
        assert not gc.isenabled()
        with paused_collection():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the outer pause is still running
    assert gc.isenabled()
    with pytest.raises(RuntimeError), paused_collection():
        raise RuntimeError("a failed open")
    assert gc.isenabled()


def test_a_collector_disabled_by_the_application_stays_disabled():
    gc.disable()
    try:
        with paused_collection():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_concurrent_pauses_resume_when_the_last_one_ends():
    inside = threading.Barrier(2)
    release = threading.Event()

    def worker():
        with paused_collection():
            inside.wait()
            release.wait(10)

    t = threading.Thread(target=worker)
    t.start()
    with paused_collection():
        inside.wait()
    assert not gc.isenabled()  # the other thread's pause is still open
    release.set()
    t.join()
    assert gc.isenabled()
