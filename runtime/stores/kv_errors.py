"""The key-value store's failures as the API's 503 (a redis-py error would otherwise be a 500).

Security controls (budgets, limits, approvals, sessions) fail closed: when the store cannot
answer, the call is refused with 503 `store_unavailable` rather than let through.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar, cast

from redis.exceptions import RedisClusterException, RedisError

from runtime.errors import Unavailable

F = TypeVar("F", bound=Callable[..., Awaitable[Any]])


@contextmanager
def kv_unavailable() -> Iterator[None]:
    """Turn a key-value store failure inside the block into Unavailable (503)."""
    try:
        yield
    except (RedisError, RedisClusterException, OSError) as exc:  # (the cluster's is no RedisError)
        raise Unavailable(
            f"the key-value store is unreachable: {type(exc).__name__}", error="store_unavailable"
        ) from exc


def store_errors(fn: F) -> F:
    """The key-value store unreachable (or failing) inside `fn` → 503: state-changing controls
    fail closed."""

    @functools.wraps(fn)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        with kv_unavailable():
            return await fn(*args, **kwargs)

    return cast(F, wrapper)
