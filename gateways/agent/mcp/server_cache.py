"""Server records in memory for the tool-call hot path, never trusted without the store's word.

Every write of the registry sets `{mcp}:servers:version` to a new random token and announces
itself on the change feed (`store.py`, `changes.py`). A record read from the store is kept with
the version it was read at, unless a change was announced while it was read; every announced
change drops them all. A call in a session hands the version to its admission round trip
(`admission.admit`), which refuses it (`Stale`) when the registry has changed since — the
caller then drops the cache and reads again; a call outside a session may skip that round trip
while the change feed is trusted (`admission_cache.py`). So a quarantine, a deletion or a
re-registration on any replica applies to the next call everywhere, and a call costs no store
round trip of its own for its server.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis

from gateways.agent.changes import ChangeWatch
from gateways.agent.mcp import keys
from gateways.agent.mcp.store import Record, new_version
from runtime.stores.kv_errors import kv_unavailable

MAX_ENTRIES = 10_000  # beyond that many servers, the cache starts over


@dataclass(frozen=True)
class Cached:
    """A server record, its tools by name, and the registry version to check it against at
    admission ('' when it was read from the store during this call)."""

    record: Record
    tools: dict[str, dict[str, Any]]
    version: str


class ServerCache:
    def __init__(self, kv: Redis, watch: ChangeWatch) -> None:
        self.kv = kv
        self.watch = watch
        self._version = ""
        self._records: dict[str, Cached] = {}
        watch.on_change(self.invalidate)

    async def get(self, server_id: str) -> Cached | None:
        """The server's record (None: not registered)."""
        cached = self._records.get(server_id)
        if cached is not None:
            return cached
        generation = self.watch.generation
        with kv_unavailable():
            async with self.kv.pipeline(transaction=True) as pipe:
                pipe.set(keys.SERVERS_VERSION, new_version(), nx=True)  # once, in a new store
                pipe.get(keys.SERVERS_VERSION)
                pipe.hget(keys.SERVERS, server_id)
                _, version, raw = await pipe.execute()
        version = version.decode() if isinstance(version, bytes) else str(version)
        if version != self._version or len(self._records) >= MAX_ENTRIES:
            self._records.clear()
            self._version = version
        if raw is None:
            return None
        record: Record = json.loads(raw)
        tools = {tool["name"]: tool for tool in record["tools"]}
        if generation == self.watch.generation:  # no change announced while it was read
            self._records[server_id] = Cached(record, tools, version)
        return Cached(record, tools, "")  # just read: nothing to check

    def invalidate(self) -> None:
        """The registry changed (an admission found the version moved): read again."""
        self._records.clear()
        self._version = ""
