"""The key-value store: any Redis-protocol server through redis-py's asyncio client."""

from __future__ import annotations

import redis.asyncio as redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import RedisError
from redis.maint_notifications import MaintNotificationsConfig

# How long any store command (or a new connection) may take: operators' and background
# calls, and the batcher's watchdog. A URL's own `?socket_timeout=…&socket_connect_timeout=…`
# overrides it (redis-py's URL options win over these defaults).
TIMEOUT_SECS = 1.0
# How long a request's own store calls may wait for the store (`kv_pipeline.hot_command`, and
# scripts run with `hot=True`; read at each call). The store answers in well under a
# millisecond, so a call still owed a reply after this long means the store hangs or is gone,
# and the request fails closed (or goes on without it, where that is allowed) within this one
# timeout.
HOT_PATH_SECS = 0.25


def connect_kv(url: str) -> redis.Redis:
    """A pooled client; connections open lazily, so a store that is down does not stop boot.

    Each command is one attempt (no retry): a retry after a timeout would double the wait on
    a hung store, and a command resent after a broken connection may run twice (an INCR, a
    budget's DECRBY). A pooled connection that the store closed (a restarted Valkey) is
    noticed and reopened when it is taken from the pool, before the command is sent — only
    with maintenance notifications off: redis-py 8 skips that check when they may be on (its
    default, "auto"), and they are a Redis Enterprise feature that would also stretch
    timeouts to 10 s during its maintenance."""
    return redis.Redis.from_url(
        url,
        decode_responses=True,
        socket_timeout=TIMEOUT_SECS,
        socket_connect_timeout=TIMEOUT_SECS,
        retry=Retry(NoBackoff(), 0),
        maint_notifications_config=MaintNotificationsConfig(enabled=False),
        health_check_interval=30,
    )


async def kv_status(client: redis.Redis) -> str:
    """The spec's health vocabulary: `connected` or `unreachable`."""
    try:
        await client.ping()
    except (RedisError, OSError):
        return "unreachable"
    return "connected"
