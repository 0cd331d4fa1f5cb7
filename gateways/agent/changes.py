"""When a replica may use its in-memory copies of shared state: the agent gateway's change feed.

Every write of what a tool call outside a session reads — the MCP registry (`mcp:servers`,
with a server's auth and token), a tenant's policy, a server's auth config or OAuth token —
also increments `agent:changes` and publishes on `agent:changed` (`announce`, or the same two
commands inside a write's Lua script). `ChangeWatch` follows the feed:
- `trusted` is true only while its subscription is confirmed: a message published after the
  confirmation reaches it, so copies taken since the last message are current. A lost
  subscription makes it untrusted (callers go back to reading the store) until it is back.
- every message (and every new subscription, which may have missed some) calls the
  listeners, which drop their copies, and moves `generation` on: a copy read from the store
  is kept only if no change came while it was being read (`generation` unchanged).
- a poll of `agent:changes` every second is the safety net for a subscription that died
  silently: a count that moved without a message clears the copies all the same.

A writer also calls `changed_here()` once its write is done, so that its own replica drops
its copies at once rather than when its message comes back. So a change applies to the next
call of the replica that made it, to the next call of every other replica once the message
arrives (the store's delivery time, well under a millisecond on one host), and at the latest
after one poll.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from collections.abc import Callable
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import RedisError

log = logging.getLogger(__name__)

CHANNEL = "agent:changed"
COUNTER = "agent:changes"
POLL_SECS = 1.0


_watches: weakref.WeakSet[ChangeWatch] = weakref.WeakSet()  # this process's


def announce(pipe: Any, what: str) -> None:
    """Queue the announcement of a change (`what`: `policy`, `auth`, `token`) on a pipeline
    that also queues the write; call `changed_here()` once it has run."""
    pipe.incr(COUNTER)
    pipe.publish(CHANNEL, what)


def changed_here() -> None:
    """A write of this process is done: its watches drop their copies now."""
    for watch in list(_watches):
        watch.changed()


class ChangeWatch:
    def __init__(self, kv: Redis) -> None:
        self.kv = kv
        self.trusted = False
        self.generation = 0
        self._listeners: list[Callable[[], None]] = []
        self._count: bytes | str | None = None
        self._tasks: list[asyncio.Task[None]] = []
        _watches.add(self)

    def on_change(self, listener: Callable[[], None]) -> None:
        self._listeners.append(listener)

    def changed(self) -> None:
        """Something may have changed: drop every copy."""
        self.generation += 1
        for listener in self._listeners:
            listener()

    async def start(self) -> None:
        self._tasks = [
            asyncio.create_task(self._follow(), name="agent-changes"),
            asyncio.create_task(self._poll(), name="agent-changes-poll"),
        ]

    async def stop(self) -> None:
        self.trusted = False
        for task in self._tasks:
            task.cancel()
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=2)
        self._tasks = []

    async def _follow(self) -> None:
        delay = 0.1
        while True:
            pubsub = self.kv.pubsub()
            try:
                await pubsub.subscribe(CHANNEL)
                async for message in pubsub.listen():
                    kind = message.get("type")
                    if kind == "subscribe":  # from now on no change goes unheard
                        self.changed()
                        self.trusted = True
                        delay = 0.1
                    elif kind == "message":
                        self.changed()
            except (RedisError, OSError) as exc:
                log.info("agent change feed lost: %s", exc)
            finally:
                self.trusted = False
                self.changed()
                with contextlib.suppress(RedisError, OSError):
                    await pubsub.aclose()
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)

    async def _poll(self) -> None:
        while True:
            await asyncio.sleep(POLL_SECS)
            try:
                count = await self.kv.get(COUNTER)
            except (RedisError, OSError):
                continue  # the feed fails too, and says so
            if count != self._count:
                self._count = count
                self.changed()
