"""A lock in the key-value store, shared by every replica: `SET key token NX PX ttl`, released
only by its holder (a script compares the token), and freed by its TTL if the holder dies."""

from __future__ import annotations

import asyncio
import secrets
import time

from redis.asyncio import Redis

# KEYS: the lock. ARGV: the holder's token.
RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""
POLL_SECS = 0.05


class StoreLock:
    def __init__(self, kv: Redis, ttl_ms: int) -> None:
        self.kv = kv
        self.ttl_ms = ttl_ms
        self._release = kv.register_script(RELEASE)

    async def acquire(self, key: str, *, wait_secs: float = 0.0) -> str | None:
        """The holder's token, or None when another holder kept the lock for `wait_secs`.
        Store errors propagate (the caller decides how it fails)."""
        token = secrets.token_hex(16)
        deadline = time.monotonic() + wait_secs
        while not await self.kv.set(key, token, nx=True, px=self.ttl_ms):
            if time.monotonic() >= deadline:
                return None
            await asyncio.sleep(POLL_SECS)
        return token

    async def release(self, key: str, token: str) -> None:
        """Release the lock if `token` still holds it (after the TTL another may)."""
        await self._release(keys=[key], args=[token])
