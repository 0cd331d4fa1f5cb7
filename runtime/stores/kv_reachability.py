"""Whether this process can reach the key-value store now: a breaker for the store itself, so
that while it is out each request pays no timeout at all (at most the request that finds the
outage pays one).

A hot path that gets an availability failure from the store (no connection, no answer in
time, the store still loading its data) calls `failed(exc)`: from then on `down` is true, and
hot paths skip the store — caches are misses, state is read from memory where that is allowed,
and what must fail closed does at once. One background task then pings the store at once and
every PROBE_SECS after (each ping sent and bounded as a request's calls are,
`kv_pipeline.hot_command`); the first answer makes `down` false again,
so everything recovers without a restart. The first ping goes at once because slow is not
always gone: an event loop busy elsewhere makes a call late too, and then the ping answers
within a loop turn and little was refused. A command error (a script's, a wrong type) is the
caller's or the configuration's and never trips it.

One per store client (`reachability(kv)`), shared by every part of the process that uses it.
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from typing import Any

from redis.exceptions import ConnectionError, RedisError, TimeoutError

from runtime.stores.kv_pipeline import hot_command

log = logging.getLogger(__name__)

PROBE_SECS = 0.25


def is_unavailability(exc: BaseException) -> bool:
    """A failure that says the store cannot be used now (not a command's own error)."""
    # redis-py's BusyLoadingError (a restarted store loading its data) is a ConnectionError.
    return isinstance(exc, ConnectionError | TimeoutError | OSError)


class Reachability:
    def __init__(self, kv: Any) -> None:
        self._kv = weakref.ref(kv)  # the client owns this, not the other way round
        self.down_since: float | None = None  # monotonic
        self.outages = 0  # how many times it went down
        self.failures = 0  # availability failures reported: store calls that were tried
        self.last_failure: BaseException | None = None
        self._probe: asyncio.Task[None] | None = None

    @property
    def down(self) -> bool:
        return self.down_since is not None

    def failed(self, exc: BaseException) -> None:
        """A store call failed with `exc`; an availability failure marks the store down."""
        if not is_unavailability(exc):
            return
        self.failures += 1
        self.last_failure = exc
        if self.down_since is not None:
            return
        self.down_since = time.monotonic()
        self.outages += 1
        log.warning(
            "key-value store unreachable; serving from memory where allowed until it answers",
            extra={"error": f"{type(exc).__name__}: {exc}"},
        )
        if self._probe is None or self._probe.done():
            self._probe = asyncio.get_running_loop().create_task(
                self._until_back(), name="kv-reachability-probe"
            )

    async def _until_back(self) -> None:
        while True:
            kv = self._kv()
            if kv is None:
                return
            try:
                await hot_command(kv, "PING")
            except (RedisError, OSError):
                await asyncio.sleep(PROBE_SECS)
                continue
            break
        since, self.down_since = self.down_since, None
        took = time.monotonic() - since if since is not None else 0.0
        log.warning("key-value store reachable again", extra={"down_secs": round(took, 3)})

    def close(self) -> None:
        if self._probe is not None:
            self._probe.cancel()
            self._probe = None


_by_client: weakref.WeakKeyDictionary[Any, Reachability] = weakref.WeakKeyDictionary()


def reachability(kv: Any) -> Reachability:
    """The one `Reachability` of a store client."""
    found = _by_client.get(kv)
    if found is None:
        found = _by_client[kv] = Reachability(kv)
    return found


def close_reachability(kv: Any) -> None:
    """Stop the probe of a store client that is being closed."""
    found = _by_client.pop(kv, None)
    if found is not None:
        found.close()
