"""A circuit breaker per provider, its state in the key-value store so every replica shares it.

Keys (per provider id, `providers/keys.py`: the id in braces is the hash tag, so the three
share a cluster slot):
- `ai:breaker:{id}:failures`: consecutive failed attempts that say the provider is unavailable
  (connection errors, timeouts, 429, 5xx, a broken answer: `failover.counts_against_availability`;
  never a routing miss nor another 4xx, which are the request's or the configuration's),
  counted within AI_BREAKER_WINDOW_SECS; a success deletes it;
- `ai:breaker:{id}:open`: present (TTL AI_BREAKER_OPEN_SECS) while the breaker is open;
- `ai:breaker:{id}:probe`: the single half-open probe's ticket (SET NX, TTL = the attempt
  timeout, so a probe that dies with its replica frees the ticket).

States: closed (failures < AI_BREAKER_FAILURES) → open (the failure that reaches the threshold
sets the open key; the counter then stops expiring) → half-open once the open key expires while
failures ≥ threshold: one request on one replica wins the probe ticket and calls the provider,
every other request skips it (next provider of the chain); the probe's success closes the
breaker (all keys deleted), its failure opens it again.

Hot path: each replica keeps an in-memory copy of every breaker it uses, reread from the store
when older than AI_BREAKER_REFRESH_MS (250 ms). Staleness bound: a replica may keep sending
requests to a provider up to that long after another replica opened its breaker (and notices a
close as late); its own failures and successes update its copy at once. A closed breaker with
no failures costs no store call per request. The store unreachable: the breaker stays as last
read (closed if never read) — breakers protect providers, budgets are what fail closed — and
while the store is known to be out (`runtime/stores/kv_reachability.py`), each replica keeps
its breakers in memory alone, with no store call: its failures count and open the breaker
locally (for AI_BREAKER_OPEN_SECS, then requests go through again), its successes close it.
Once the store answers again, the shared state is read as usual.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass

from redis.asyncio import Redis
from redis.exceptions import RedisError

from gateways.ai.providers.keys import breaker_keys
from runtime.stores.kv_pipeline import PipelinedScript, hot_command
from runtime.stores.kv_reachability import reachability

log = logging.getLogger(__name__)

CLOSED, OPEN, HALF_OPEN = "closed", "open", "half_open"
GO, PROBE, SKIP = "go", "probe", "skip"

_FAIL = PipelinedScript("""
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
if n >= tonumber(ARGV[2]) then
  redis.call('PERSIST', KEYS[1])
  redis.call('SET', KEYS[2], '1', 'PX', ARGV[3], 'NX')
  redis.call('DEL', KEYS[3])
  return {n, 1}
end
return {n, 0}
""")


@dataclass
class _View:
    state: str = CLOSED
    failures: int = 0
    read_at: float = float("-inf")
    open_until: float = float("-inf")  # a breaker opened locally, while the store was out


@dataclass(frozen=True)
class BreakerSettings:
    failures: int = 5
    window_secs: float = 60.0
    open_secs: float = 30.0
    refresh_secs: float = 0.25
    probe_secs: float = 60.0


class Breakers:
    def __init__(self, kv: Redis, settings: BreakerSettings) -> None:
        self.kv = kv
        self.settings = settings
        self._views: dict[str, _View] = {}
        self._reading: dict[str, asyncio.Future[_View]] = {}
        self.reachability = reachability(kv)

    async def state(self, provider_id: str) -> str:
        view = await self._view(provider_id)
        return view.state

    async def allow(self, provider_id: str) -> str:
        """GO (closed), PROBE (this request is the half-open probe) or SKIP (open, or another
        request holds the probe)."""
        view = await self._view(provider_id)
        if view.state == CLOSED:
            return GO
        if view.state == OPEN:
            return SKIP
        if self.reachability.down:
            return GO
        _, _, probe = breaker_keys(provider_id)
        try:
            px = int(self.settings.probe_secs * 1000)
            won = await hot_command(self.kv, "SET", probe, "1", "NX", "PX", px)
        except (RedisError, OSError) as exc:
            self.reachability.failed(exc)
            log.warning("breaker %s: store unreachable, calling anyway: %s", provider_id, exc)
            return GO
        return PROBE if won else SKIP

    async def success(self, provider_id: str) -> None:
        view = self._views.get(provider_id)
        if view is not None and view.state == CLOSED and view.failures == 0:
            return  # nothing to reset: no store call on the hot path
        if self.reachability.down:
            self._views[provider_id] = _View(CLOSED, 0, view.read_at if view else float("-inf"))
            return
        try:
            await hot_command(self.kv, "DEL", *breaker_keys(provider_id))
        except (RedisError, OSError) as exc:
            self.reachability.failed(exc)
            log.warning("breaker %s: could not record a success: %s", provider_id, exc)
            return
        self._views[provider_id] = _View(CLOSED, 0, time.monotonic())

    async def failure(self, provider_id: str) -> bool:
        """Count one failed attempt; True when the breaker is open now."""
        s = self.settings
        if self.reachability.down:
            return self._local_failure(provider_id)
        try:
            count, opened = await _FAIL(
                self.kv,
                breaker_keys(provider_id),
                [int(s.window_secs * 1000), s.failures, int(s.open_secs * 1000)],
                hot=True,
            )
        except (RedisError, OSError) as exc:
            self.reachability.failed(exc)
            log.warning("breaker %s: could not record a failure: %s", provider_id, exc)
            return self._local_failure(provider_id)
        state = OPEN if opened else CLOSED
        self._views[provider_id] = _View(state, int(count), time.monotonic())
        if opened:
            log.warning("circuit breaker of provider %s is open", provider_id)
        return bool(opened)

    def _local_failure(self, provider_id: str) -> bool:
        """Count a failure in this replica's copy alone (the store is out); True when that
        opens the breaker (locally, for AI_BREAKER_OPEN_SECS)."""
        view = self._views.get(provider_id) or _View()
        failures = view.failures + 1
        now = time.monotonic()
        if failures >= self.settings.failures:
            self._views[provider_id] = _View(OPEN, 0, view.read_at, now + self.settings.open_secs)
            log.warning("circuit breaker of provider %s is open (locally)", provider_id)
            return True
        self._views[provider_id] = _View(view.state, failures, view.read_at, view.open_until)
        return False

    async def _view(self, provider_id: str) -> _View:
        view = self._views.get(provider_id)
        if self.reachability.down:  # this replica's copy alone, with no store call
            view = view or _View()
            if view.state == OPEN:
                until = view.open_until
                if until == float("-inf"):  # open as last read: at most open_secs more
                    until = view.read_at + self.settings.open_secs
                if until <= time.monotonic():  # no probe ticket without the store: try again
                    view = self._views[provider_id] = _View(CLOSED, 0, view.read_at)
            return view
        if view is not None and time.monotonic() - view.read_at < self.settings.refresh_secs:
            return view
        # One read per provider at a time: the requests that find the view stale together
        # wait for the same read (not one store round trip, and connection, each).
        reading = self._reading.get(provider_id)
        if reading is None:
            reading = asyncio.ensure_future(self._read(provider_id, view))
            self._reading[provider_id] = reading
            reading.add_done_callback(lambda _: self._reading.pop(provider_id, None))
        return await asyncio.shield(reading)

    async def _read(self, provider_id: str, view: _View | None) -> _View:
        failures_key, open_key, _ = breaker_keys(provider_id)
        try:
            failures, is_open = await asyncio.gather(  # one write, through the batcher
                hot_command(self.kv, "GET", failures_key), hot_command(self.kv, "EXISTS", open_key)
            )
        except (RedisError, OSError) as exc:
            self.reachability.failed(exc)
            log.warning("breaker %s: store unreachable, using the last state: %s", provider_id, exc)
            return view or _View()
        count = int(failures or 0)
        if is_open:
            state = OPEN
        elif count >= self.settings.failures:
            state = HALF_OPEN
        else:
            state = CLOSED
        view = _View(state, count, time.monotonic())
        self._views[provider_id] = view
        return view
