"""The collector's server settings (`runtime/collector.py`)."""

import gc
import weakref

from runtime import collector


class Node:
    other: object = None


def test_freezing_keeps_what_lives_and_collects_the_start_up_garbage_first():
    before = gc.get_freeze_count()
    kept, dropped = Node(), Node()
    dropped.other = dropped  # a cycle: only the collector frees it
    gone = weakref.ref(dropped)
    del dropped
    thresholds = gc.get_threshold()
    try:
        collector.tune()
        collector.freeze_startup_heap()
        assert gone() is None  # collected, not frozen forever
        assert gc.get_freeze_count() > before
        assert kept.__class__ is Node
    finally:
        gc.unfreeze()
        gc.set_threshold(*thresholds)
        collector._serving = False


def test_a_process_that_is_not_a_service_is_never_frozen():
    before = gc.get_freeze_count()
    collector.freeze_startup_heap()  # a test building a gateway in process: models loaded
    assert gc.get_freeze_count() == before
