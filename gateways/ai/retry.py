"""Retry delays: exponential backoff with jitter ("equal jitter": the n-th retry waits a
random time in [d/2, d] with d = initial · 2ⁿ, so 50 to 100 ms, then 100 to 200 ms by default).
Which failures are retried is the adapter's `ProviderError.retryable` (connection errors,
timeouts, 429, 5xx; never other 4xx nor a malformed answer)."""

from __future__ import annotations

import random


def backoff(retry: int, initial_secs: float) -> float:
    """Seconds to wait before retry number `retry` (0 for the first retry)."""
    ceiling = initial_secs * (2**retry)
    return ceiling / 2 + random.uniform(0, ceiling / 2)
