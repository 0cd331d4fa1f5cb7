"""The exact tier: a completion stored under its exact key in the key-value store, with a TTL.

The value is the completion as JSON text (the OpenAI chat completion dict). Errors of the
store propagate: the facade (`cache.py`) decides that a failing store is a miss.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from redis.asyncio import Redis

from runtime.stores.kv_pipeline import hot_command


class ExactTier:
    def __init__(self, kv: Redis, ttl_secs: int) -> None:
        self.kv = kv
        self.ttl_secs = ttl_secs

    async def get(self, key: str) -> dict[str, Any] | None:
        raw = await hot_command(self.kv, "GET", key)  # a request's: bounded, batched
        return _completion(raw)

    async def get_copying(
        self, key: str, copy_to: str
    ) -> tuple[dict[str, Any] | None, BaseException | None]:
        """`get(key)`, and its entry copied under `copy_to` with the time it has left (COPY
        keeps the TTL), in the same store round trip: no second trip, and the answer is not
        sent back to the store. The copy's failure is returned, not raised: it costs only the
        copy."""
        replies: tuple[Any, Any] = await asyncio.gather(
            hot_command(self.kv, "GET", key),
            hot_command(self.kv, "COPY", key, copy_to, "REPLACE"),
            return_exceptions=True,
        )
        raw, copied = replies
        if isinstance(raw, BaseException):
            raise raw
        return _completion(raw), copied if isinstance(copied, BaseException) else None

    async def set(self, key: str, completion: dict[str, Any]) -> None:
        await self.kv.set(key, json.dumps(completion, separators=(",", ":")), ex=self.ttl_secs)


def _completion(raw: Any) -> dict[str, Any] | None:
    if raw is None:
        return None
    value = json.loads(raw)
    return value if isinstance(value, dict) else None
