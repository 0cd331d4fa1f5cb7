"""Giving memory back once a service has had nothing to do for a while.

Serving pages in the code of the libraries a request runs through: an embedded engine's query
code (chDB: ~40-70 MB for a first SELECT), a model runtime's kernels, Milvus Lite's Arrow
(~50 MB in the AI gateway over its first chats). They are clean copies of their files, so a
service that has gone quiet can drop them (`runtime/stores/engine_pages.py`) and read them
back from the page cache when work comes again, a few milliseconds once. `IdleRelease` says
when: `idle_secs` after the last piece of work ended, none running since.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

# Seconds without work after which a service gives its pages back: long enough that steady
# traffic never pays for reading them again, short enough that an idle stack is lean.
IDLE_RELEASE_SECS = 10.0


class IdleRelease:
    """`begin()` and `end()` bracket each piece of work, on the event loop; `release` is
    called on the loop once the service has idled `idle_secs` (0: never) and must hand its
    work to a thread. Cheap enough for a hot path: a counter and a clock read per request,
    one timer per idle spell."""

    def __init__(self, release: Callable[[], object], idle_secs: float = IDLE_RELEASE_SECS):
        self._release = release
        self.idle_secs = idle_secs
        self._busy = 0
        self._last_end = 0.0
        self._timer: asyncio.TimerHandle | None = None
        self.released = 0  # times `release` was called

    def begin(self) -> None:
        self._busy += 1

    def end(self) -> None:
        self._busy -= 1
        if not self.idle_secs:
            return
        self._last_end = time.monotonic()
        if self._timer is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:  # ended by a finalizer after the loop stopped: no more work
                return
            self._timer = loop.call_later(self.idle_secs, self._check)

    def _check(self) -> None:
        self._timer = None
        if self._busy:
            return  # the work in progress arms the timer again when it ends
        idle = time.monotonic() - self._last_end
        if idle < self.idle_secs:  # work came and went meanwhile: wait for the rest
            self._timer = asyncio.get_running_loop().call_later(self.idle_secs - idle, self._check)
            return
        self.released += 1
        self._release()

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
