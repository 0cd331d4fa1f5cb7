"""When a process may use its in-memory copies of shared state: a change feed in the key-value
store (the agent gateway's admission and registry copies, both gateways' issued API keys).

A feed is a pub/sub channel and a counter. Every write of what the copies hold also increments
the counter and publishes on the channel (a pipeline or the write's own Lua script).
`ChangeWatch` follows one feed:
- `trusted` is true only while its subscription is confirmed: a message published after the
  confirmation reaches it, so copies taken since the last message are current. A lost
  subscription makes it untrusted (callers go back to reading the store) until it is back.
- every message (and every new subscription, which may have missed some) calls the
  listeners, which drop their copies, and moves `generation` on: a copy read from the store
  is kept only if no change came while it was being read (`generation` unchanged).
- a poll of the counter every second is the safety net for a subscription that died
  silently: a count that moved without a message clears the copies all the same, and a poll
  that fails makes the watch untrusted until one succeeds (a store this process cannot reach
  may be taking writes it does not hear of).
- losing contact (the subscription lost, a poll failed) and a new subscription call the
  listeners too, except those registered with `on_loss=False`: copies a process may go on
  using through an outage of the store (`lost_since` says for how long; such a listener's
  owner bounds it). They are dropped on a message, and when a poll finds the counter moved:
  the watch is trusted again only once a poll has answered after the outage, so whatever
  was written meanwhile (every write moves the counter; a store restarted without it moves
  it too) has dropped them by then.

A writer also calls `changed_here(channel)` once its write is done, so that its own process
drops its copies at once rather than when its message comes back. So a change applies to the
next call of the process that made it, to the next call of every other process once the
message arrives (the store's delivery time, well under a millisecond on one host), and at the
latest after one poll.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import weakref
from collections.abc import Callable

from redis.asyncio import Redis
from redis.asyncio.client import PubSub
from redis.exceptions import RedisError

from runtime.cancelling import cancel_and_wait
from runtime.stores.kv import open_pubsub

log = logging.getLogger(__name__)

POLL_SECS = 1.0

_watches: weakref.WeakSet[ChangeWatch] = weakref.WeakSet()  # this process's


def changed_here(channel: str) -> None:
    """A write of this process is done: its watches of `channel` drop their copies now."""
    for watch in list(_watches):
        if watch.channel == channel:
            watch.changed()


class ChangeWatch:
    def __init__(self, kv: Redis, channel: str, counter: str) -> None:
        self.kv = kv
        self.channel = channel
        self.counter = counter
        self.generation = 0
        self._subscribed = False  # the subscription is confirmed
        self._polled = True  # the last poll of the counter answered
        self._listeners: list[tuple[Callable[[], None], bool]] = []  # (listener, on_loss)
        self._lost_at: float | None = None  # monotonic, when contact was lost
        self._count: bytes | str | None = None
        self._tasks: list[asyncio.Task[None]] = []
        _watches.add(self)

    @property
    def trusted(self) -> bool:
        """Whether copies taken since the last change are current."""
        return self._subscribed and self._polled

    @property
    def lost_since(self) -> float | None:
        """Since when (monotonic) the watch has been out of contact; None while trusted (and
        before its first start). Copies exist only if taken while it was trusted."""
        return None if self.trusted else self._lost_at

    def on_change(self, listener: Callable[[], None], *, on_loss: bool = True) -> None:
        """Call `listener` on every change; with `on_loss=False`, not when contact is merely
        lost (its copies outlive an outage; see the module's docstring)."""
        self._listeners.append((listener, on_loss))

    def changed(self) -> None:
        """Something may have changed: drop every copy."""
        self._notify(loss=False)

    def _lost(self) -> None:
        """Contact lost (the subscription, or a poll): changes may go unheard from now on."""
        if self._lost_at is None:
            self._lost_at = time.monotonic()
        self._notify(loss=True)

    def _notify(self, *, loss: bool) -> None:
        self.generation += 1
        for listener, on_loss in self._listeners:
            if on_loss or not loss:
                listener()

    def _contact(self) -> None:
        """Maybe back in contact (a subscription confirmed, a poll answered)."""
        if self.trusted:
            self._lost_at = None

    async def start(self) -> None:
        self._tasks = [
            asyncio.create_task(self._follow(), name=f"{self.channel} feed"),
            asyncio.create_task(self._poll(), name=f"{self.channel} poll"),
        ]

    async def stop(self) -> None:
        self._subscribed = False
        await cancel_and_wait(self._tasks, 2)
        self._tasks = []

    async def _follow(self) -> None:
        delay = 0.1
        while True:
            pubsub: PubSub | None = None
            try:
                pubsub = await open_pubsub(self.kv)
                await pubsub.subscribe(self.channel)
                async for message in pubsub.listen():
                    kind = message.get("type")
                    if kind == "subscribe":  # from now on no change goes unheard
                        self._notify(loss=True)  # what was missed: the poll's counter says
                        self._subscribed = True
                        if self._lost_at is not None:  # (a failover: where the map says now)
                            log.info(
                                "change feed %s subscribed again after %.1fs",
                                self.channel,
                                time.monotonic() - self._lost_at,
                            )
                        self._contact()
                        delay = 0.1
                    elif kind == "message":
                        self.changed()
            except (RedisError, OSError) as exc:
                log.info("change feed %s lost: %s", self.channel, exc)
            finally:
                self._subscribed = False
                self._lost()
                # RuntimeError: a feed never stopped is closed by the garbage collector
                # after its loop has ended; there is nothing left to close it on.
                with contextlib.suppress(RedisError, OSError, RuntimeError):
                    if pubsub is not None:
                        await pubsub.aclose()
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)

    async def _poll(self) -> None:
        while True:
            await asyncio.sleep(POLL_SECS)
            try:
                count = await self.kv.get(self.counter)
            except (RedisError, OSError):
                if self._polled:
                    self._polled = False
                    self._lost()
                continue
            self._polled = True
            if count != self._count:  # every write moves it: a change missed while out too
                self._count = count
                self.changed()
            self._contact()
