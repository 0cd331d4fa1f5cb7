"""The exact tier: a completion stored under its exact key in the key-value store, with a TTL.

The value is the completion as JSON text (the OpenAI chat completion dict). Errors of the
store propagate: the facade (`cache.py`) decides that a failing store is a miss.
"""

from __future__ import annotations

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
        if raw is None:
            return None
        value = json.loads(raw)
        return value if isinstance(value, dict) else None

    async def set(self, key: str, completion: dict[str, Any]) -> None:
        await self.kv.set(key, json.dumps(completion, separators=(",", ":")), ex=self.ttl_secs)

    async def set_hot(self, key: str, completion: dict[str, Any], ttl_secs: int) -> None:
        """`set` from a request's lookup: batched and bounded like its GETs."""
        value = json.dumps(completion, separators=(",", ":"))
        await hot_command(self.kv, "SET", key, value, "EX", ttl_secs)
