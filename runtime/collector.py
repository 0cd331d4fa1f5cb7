"""Python's cyclic garbage collector, set for a long-running server.

By default it runs a young-generation pass every 700 net allocations of container objects
(a few chat requests) and, now and then, a full pass over every tracked object. In the AI
gateway, with its models loaded, that full pass walked ~180,000 objects and took ~80 ms: a
pause of every request in flight, three times in ten seconds of load, and the p99 of the
chat benchmark (measured with `gc.callbacks`, `tests/bench/ai_gateway.py`). What a server
allocates per request is freed by reference counting as soon as the request ends; the cycles
it leaves are rare. So:

- `tune()`, at the start of every service process (`runtime/serve.py`): young passes every
  `YOUNG_THRESHOLD` allocations instead of 700 (fewer passes over the objects of the requests
  in flight);
- `freeze_startup_heap()`, once a service's start-up is over (and again once the AI gateway's
  models are loaded): what exists then (modules, models, clients, configuration) lives as
  long as the process, and is moved into the collector's permanent generation (`gc.freeze`),
  after one collection, so that start-up garbage is not kept. Full passes then walk only what
  was made since. Frozen objects are still freed by reference counting. Only in a process
  `tune()` set up: a test process that builds services in process is not frozen.
"""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 10_000

_serving = False  # this process is a service's (tune() ran)


def tune() -> None:
    global _serving
    _serving = True
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)


def freeze_startup_heap() -> None:
    if _serving:
        gc.collect()
        gc.freeze()


def freeze_before_fork() -> None:
    """In a parent that forks services from what it imported (the launcher's preloader): a
    collection then a freeze, so that the children's collections never walk those objects,
    whose pages stay shared with their siblings instead of being copied into each (the gc
    module's recipe for `fork()` without `exec()`)."""
    gc.collect()
    gc.freeze()
