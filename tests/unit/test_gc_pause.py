"""The collector pause of bulk builders: no collection inside, the collector on again after,
and the objects built during the pause promoted to the oldest generation without a scan."""

from __future__ import annotations

import gc

from nneditor.platform.gc_pause import collector_paused


class _Node:
    def __init__(self) -> None:
        self.me = self  # a cycle: tracked, and only the collector frees it


def test_the_pause_promotes_what_it_built_and_turns_the_collector_back_on() -> None:
    assert gc.isenabled()
    collections = gc.get_stats()[0]["collections"]
    with collector_paused():
        assert not gc.isenabled()
        with collector_paused():  # nested: the outer pause decides
            built = [_Node() for _ in range(50_000)]
        assert not gc.isenabled()
    assert gc.isenabled()
    assert gc.get_stats()[0]["collections"] == collections  # none ran inside
    assert gc.get_count()[0] < 700  # not left young for one huge scan
    assert all(not gc.is_finalized(n) for n in built[:10])
    oldest = {id(o) for o in gc.get_objects(generation=2)}
    assert all(id(n) in oldest for n in built[::5000])
    del built
    gc.collect()  # the cycles are still the collector's to free


def test_a_pause_entered_with_the_collector_off_leaves_it_off() -> None:
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
