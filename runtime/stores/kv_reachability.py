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

On a cluster, one dead master must not make every tenant skip the store while the others
serve: a failure of a call the batcher routed to a node marks that node down (`failed_node`),
and a hot path that has a key asks `down_for(key)`: whether the master of that key's slot is
down. `down` (no key) is the whole store: the slot map itself cannot be read. A node's probe
reads the slot map again, then asks the node for `CLUSTER INFO`: the node is back when it
serves no slot any more (a replica was promoted in its place: the first call for its slots
goes to the new master without waiting) or says `cluster_state:ok`. CLUSTERDOWN (a slot
without a master, during an election) and TRYAGAIN count as unavailability.
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from typing import Any

from redis.asyncio.cluster import RedisCluster
from redis.cluster import PRIMARY
from redis.exceptions import (
    ClusterDownError,
    ConnectionError,
    RedisClusterException,
    RedisError,
    TimeoutError,
    TryAgainError,
)

from runtime.stores import kv as kv_settings
from runtime.stores.kv_pipeline import ClusterCalls, call_slot, failed_node, hot_command, pipelined

log = logging.getLogger(__name__)

PROBE_SECS = 0.25


def is_unavailability(exc: BaseException) -> bool:
    """A failure that says the store cannot be used now (not a command's own error)."""
    # redis-py's BusyLoadingError (a restarted store loading its data) is a ConnectionError;
    # a cluster's CLUSTERDOWN and TRYAGAIN are ResponseErrors, and a cluster the client cannot
    # map (no seed answers, a slot not covered) a RedisClusterException: all unavailability.
    return isinstance(
        exc,
        ConnectionError
        | TimeoutError
        | OSError
        | ClusterDownError
        | TryAgainError
        | RedisClusterException,
    )


class Reachability:
    def __init__(self, kv: Any) -> None:
        self._kv = weakref.ref(kv)  # the client owns this, not the other way round
        self.down_since: float | None = None  # monotonic
        self.outages = 0  # how many times it went down
        self.failures = 0  # availability failures reported: store calls that were tried
        self.last_failure: BaseException | None = None
        self._probe: asyncio.Task[None] | None = None
        self.cluster = isinstance(kv, RedisCluster)
        self.nodes_down: dict[str, float] = {}  # a cluster's masters found down, since when
        self._node_probes: dict[str, asyncio.Task[None]] = {}

    @property
    def down(self) -> bool:
        """The whole store cannot be used (one node: the store; a cluster: its slot map)."""
        return self.down_since is not None

    def down_for(self, key: str) -> bool:
        """Calls for `key` cannot be served now: the store is down, or (a cluster) the master
        of `key`'s slot is."""
        if self.down_since is not None:
            return True
        if not self.nodes_down:
            return False
        kv = self._kv()
        if kv is None:
            return False
        calls = pipelined(kv)
        slot = call_slot(("GET", key))
        owner = (
            calls.owner_now(slot) if isinstance(calls, ClusterCalls) and slot is not None else None
        )
        return owner in self.nodes_down

    def failed(self, exc: BaseException) -> None:
        """A store call failed with `exc`; an availability failure marks the store (or, on a
        cluster, the node the call went to) down."""
        if not is_unavailability(exc):
            return
        self.failures += 1
        self.last_failure = exc
        node = failed_node(exc) if self.cluster else None
        if node is not None:
            self._node_failed(node, exc)
            return
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

    def _node_failed(self, node: str, exc: BaseException) -> None:
        if node in self.nodes_down:
            return
        self.nodes_down[node] = time.monotonic()
        self.outages += 1
        log.warning(
            "key-value store node unreachable; its slots served from memory where allowed",
            extra={"node": node, "error": f"{type(exc).__name__}: {exc}"},
        )
        self._node_probes[node] = asyncio.get_running_loop().create_task(
            self._until_node_back(node), name=f"kv-reachability-probe-{node}"
        )

    async def _until_node_back(self, node: str) -> None:
        while True:
            kv = self._kv()
            if kv is None:
                return
            calls = pipelined(kv)
            assert isinstance(calls, ClusterCalls)
            try:
                if await self._node_serves(calls, node):
                    break
            except (RedisError, OSError):
                pass
            del kv, calls
            await asyncio.sleep(PROBE_SECS)
        since = self.nodes_down.pop(node, None)
        self._node_probes.pop(node, None)
        took = time.monotonic() - since if since is not None else 0.0
        log.warning(
            "key-value store node reachable again (or replaced)",
            extra={"node": node, "down_secs": round(took, 3)},
        )

    @staticmethod
    async def _node_serves(calls: ClusterCalls, node: str) -> bool:
        """Whether calls routed to `node` can be served: it is no master any more (the map
        read again), or it answers with every slot served."""
        await calls.refresh(calls.map_timeout)
        masters = calls.nodes_manager.get_nodes_by_server_type(PRIMARY)
        if node not in {master.name for master in masters}:
            return True
        info = await calls.to_node(node, kv_settings.HOT_PATH_SECS, ("CLUSTER", "INFO"))
        return "cluster_state:ok" in str(info)

    def close(self) -> None:
        if self._probe is not None:
            self._probe.cancel()
            self._probe = None
        for probe in self._node_probes.values():
            probe.cancel()
        self._node_probes.clear()


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
