"""The key-value store's failures as the API's 503 (a redis-py error would otherwise be a 500)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from redis.exceptions import RedisError

from runtime.errors import Unavailable


@contextmanager
def kv_unavailable() -> Iterator[None]:
    """Turn a key-value store failure inside the block into Unavailable (503)."""
    try:
        yield
    except (RedisError, OSError) as exc:
        raise Unavailable(
            f"the key-value store is unreachable: {type(exc).__name__}", error="store_unavailable"
        ) from exc
