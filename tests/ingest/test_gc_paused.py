"""The garbage collector is off while answers are decoded, and back as it was once the last decode is done, whatever
order the round's threads finish in."""

from __future__ import annotations

import gc

import pytest

from apps.common.decoding import GcPaused


@pytest.fixture
def gc_restored():
    was = gc.isenabled()
    yield
    gc.enable() if was else gc.disable()


def test_overlapping_decodes_keep_it_off_until_the_last_ends(gc_restored):
    gc.enable()
    paused = GcPaused()
    paused.__enter__()
    first = gc.isenabled()
    paused.__enter__()  # a second thread's decode begins
    paused.__exit__(None, None, None)  # the first ends before it
    second = gc.isenabled()
    paused.__exit__(None, None, None)
    assert (first, second, gc.isenabled()) == (False, False, True)


def test_a_collector_switched_off_elsewhere_stays_off(gc_restored):
    gc.disable()
    with GcPaused():
        assert not gc.isenabled()
    assert not gc.isenabled()
