"""The key-value store: any Redis-protocol server through redis-py's asyncio client."""

from __future__ import annotations

import redis.asyncio as redis
from redis.exceptions import RedisError


def connect_kv(url: str) -> redis.Redis:
    """A pooled client; connections open lazily, so a store that is down does not stop boot.
    Timeouts are short because every caller on the hot path must fail fast (and fail open
    where the spec says so)."""
    return redis.Redis.from_url(
        url,
        decode_responses=True,
        socket_timeout=1.0,
        socket_connect_timeout=1.0,
        health_check_interval=30,
    )


async def kv_status(client: redis.Redis) -> str:
    """The spec's health vocabulary: `connected` or `unreachable`."""
    try:
        await client.ping()
    except (RedisError, OSError):
        return "unreachable"
    return "connected"
