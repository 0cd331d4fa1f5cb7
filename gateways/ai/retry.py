"""Retry delays: exponential backoff with additive jitter. The n-th retry waits d = initial · 2ⁿ
(the spec: 100 ms initial, so 100 ms, then 200 ms), plus a random extra of up to a fifth of d
so that gateways retrying the same provider do not all come back at once. Jitter only adds:
no retry comes sooner than the spec's delay. Which failures are retried is the adapter's
`ProviderError.retryable` (connection errors, timeouts, 429, 5xx; never other 4xx nor a
malformed answer)."""

from __future__ import annotations

import random

JITTER = 0.2  # the most jitter adds, as a fraction of the delay


def backoff(retry: int, initial_secs: float) -> float:
    """Seconds to wait before retry number `retry` (0 for the first retry): at least
    `initial_secs · 2^retry`, at most a fifth more."""
    delay = initial_secs * 2.0**retry
    return delay + random.uniform(0, delay * JITTER)
