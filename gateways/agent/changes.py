"""The agent gateway's change feed: when a replica may use its in-memory copies of shared state
(`runtime/change_feed.py` explains the mechanism).

Every write of what a tool call outside a session reads — the MCP registry (`mcp:servers`,
with a server's auth and token), a tenant's policy, a server's auth config or OAuth token —
also increments `agent:changes` and publishes on `agent:changed` (`announce`, or the same two
commands inside a write's Lua script), then calls `changed_here()`.
"""

from __future__ import annotations

from typing import Any

from redis.asyncio import Redis

from runtime import change_feed

CHANNEL = "agent:changed"
COUNTER = "agent:changes"


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
