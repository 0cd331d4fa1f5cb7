"""A hash of the key-value store read field by field on a hot path, its answers kept in memory
while its change feed (`runtime/change_feed.py`) says they are current: a warm field costs no
store round trip, and a write anywhere drops every copy on every replica at once.

The writer of the hash also increments its counter and publishes on its channel in the same
script or pipeline, and calls `changed_here(channel)` once done. A reader:
- answers from memory while the copies are usable: while the feed is trusted, and, for a hash
  given an `outage_grace`, for that many seconds after contact was lost (copies a process may
  go on using through a short outage of the store; see the change feed's `on_loss=False`);
- else reads the field with one HGET, and keeps the answer only if no change came while it
  was read (the feed's generation unchanged) and the feed is trusted;
- fails closed: a field held nowhere in memory is Unavailable (503) when the store cannot
  answer, at once while it is known to be out (`runtime/stores/kv_reachability.py`).

Fields found absent (or that `decode` refuses) are remembered apart, oldest leaving first, so
a flood of made-up fields can neither fill memory nor push out a field that was found.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Generic, TypeVar

from redis.asyncio import Redis
from redis.exceptions import RedisError

from runtime.change_feed import ChangeWatch
from runtime.errors import Unavailable
from runtime.stores.kv_pipeline import hot_command
from runtime.stores.kv_reachability import reachability

T = TypeVar("T")


class WatchedHash(Generic[T]):
    """`key`'s fields, decoded by `decode` (None: absent or refused). `start`/`stop` follow
    the change feed (a service's on_startup and on_cleanup). `found` and `absent` hold the
    copies: at most `max_found` (all dropped when full) and `max_absent` (the oldest leaves)."""

    def __init__(
        self,
        kv: Redis,
        key: str,
        *,
        channel: str,
        counter: str,
        decode: Callable[[bytes | str | None], T | None],
        max_found: int,
        max_absent: int,
        outage_grace: Callable[[], float] | None = None,
    ) -> None:
        self.kv = kv
        self.key = key
        self.decode = decode
        self.max_found = max_found
        self.max_absent = max_absent
        # A callable, so that a module's setting read at call time stays the one that counts.
        self.outage_grace = outage_grace
        self.found: dict[str, T] = {}
        self.absent: dict[str, None] = {}  # insertion-ordered: the oldest leaves first
        self.watch = ChangeWatch(kv, channel, counter)
        # Without a grace, contact lost drops the copies too (read the store again: fail closed).
        self.watch.on_change(self.forget, on_loss=outage_grace is None)
        self.reachability = reachability(kv)

    async def start(self) -> None:
        await self.watch.start()

    async def stop(self) -> None:
        await self.watch.stop()

    async def get(self, field: str) -> T | None:
        """The field's value; None when absent (or refused by `decode`). Unavailable (503) when
        the store cannot answer for a field not held in memory."""
        if self.copies_usable():
            found = self.found.get(field)
            if found is not None:
                return found
            if field in self.absent:
                return None
        if self.reachability.down_for(self.key):
            raise store_unavailable()
        generation = self.watch.generation
        try:
            entry = await hot_command(self.kv, "HGET", self.key, field)
        except (RedisError, OSError) as exc:
            self.reachability.failed(exc)
            raise store_unavailable(exc) from exc
        value = self.decode(entry)
        if generation == self.watch.generation and self.watch.trusted:
            self._keep(field, value)  # no change came while it was read
        return value

    def copies_usable(self) -> bool:
        """While the feed is trusted; after it lost contact, for the outage grace (if any)."""
        if self.watch.trusted:
            return True
        lost = self.watch.lost_since
        if self.outage_grace is None or lost is None:
            return False
        return time.monotonic() - lost < self.outage_grace()

    def forget(self) -> None:
        self.found.clear()
        self.absent.clear()

    def _keep(self, field: str, value: T | None) -> None:
        if value is not None:
            if len(self.found) >= self.max_found:
                self.found.clear()
            self.found[field] = value
            return
        if len(self.absent) >= self.max_absent:
            del self.absent[next(iter(self.absent))]
        self.absent[field] = None


def store_unavailable(exc: BaseException | None = None) -> Unavailable:
    why = f": {type(exc).__name__}" if exc is not None else " (known to be out)"
    return Unavailable(f"the key-value store is unreachable{why}", error="store_unavailable")
