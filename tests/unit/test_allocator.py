"""platform/allocator.py: with glibc's malloc set to reuse freed arrays, a decoder-like stream
of megabyte arrays (allocated, filled, freed in turn) stops page-faulting fresh memory."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

PATTERN = textwrap.dedent(
    """
    import resource, sys
    import numpy as np
    if sys.argv[1] == "tuned":
        from nneditor.platform.allocator import reuse_freed_arrays
        print("took" if reuse_freed_arrays() else "refused")
    # a block's matrices and temporaries (SmolLM2's sizes), two alive at a time
    sizes = [3_538_944, 1_179_648, 884_736, 3_538_944, 3_538_944, 221_184, 3_538_944] * 3

    def block():
        live = []
        for size in sizes:
            live.append(np.ones(size // 4, np.float32))
            if len(live) > 2:
                live.pop(0)

    block()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(10):
        block()
    print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
    """
)


def _faults(mode: str) -> tuple[str, int]:
    out = subprocess.run(
        [sys.executable, "-c", PATTERN, mode], capture_output=True, text=True, check=True
    ).stdout.split()
    return (out[0] if mode == "tuned" else "", int(out[-1]))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_freed_arrays_are_reused_not_faulted_in_again() -> None:
    took, tuned = _faults("tuned")
    if took != "took":
        pytest.skip("this C library has no mallopt")
    _, plain = _faults("plain")
    assert plain > 5_000  # the default thresholds give the memory back and fault it in again
    assert tuned < plain / 20, (tuned, plain)


def test_elsewhere_nothing_changes(monkeypatch) -> None:  # noqa: ANN001
    from nneditor.platform import allocator

    allocator.reuse_freed_arrays.cache_clear()
    monkeypatch.setattr(allocator.sys, "platform", "darwin")
    try:
        assert allocator.reuse_freed_arrays() is False
    finally:
        allocator.reuse_freed_arrays.cache_clear()
