"""The agent gateway's change feed: when a replica may use its in-memory copies of shared state
(`runtime/change_feed.py` explains the mechanism).

Every write of what a tool call outside a session reads — the MCP registry (`{mcp}:servers`,
with a server's auth and token), a tenant's policy, a server's auth config or OAuth token —
also increments `{mcp}:changes` and publishes on `{mcp}:changed` (`announce`, or the same two
commands inside a write's Lua script), then calls `changed_here()`. The counter and the channel
carry the tag of what they guard (`keys.py`), so on a clustered store the write and its
announcement stay one transaction or script.
"""

from __future__ import annotations

from typing import Any

from redis.asyncio import Redis

from gateways.agent.keys import CHANGES_CHANNEL as CHANNEL
from gateways.agent.keys import CHANGES_COUNTER as COUNTER
from runtime import change_feed

__all__ = ["CHANNEL", "COUNTER", "ChangeWatch", "announce", "changed_here"]


def announce(pipe: Any, what: str) -> None:
    """Queue the announcement of a change (`what`: `policy`, `auth`, `token`) on a pipeline
    that also queues the write; call `changed_here()` once it has run."""
    pipe.incr(COUNTER)
    pipe.publish(CHANNEL, what)


def changed_here() -> None:
    """A write of this process is done: its watches drop their copies now."""
    change_feed.changed_here(CHANNEL)


class ChangeWatch(change_feed.ChangeWatch):
    """The watch of the agent gateway's feed."""

    def __init__(self, kv: Redis) -> None:
        super().__init__(kv, CHANNEL, COUNTER)
