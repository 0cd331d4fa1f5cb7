"""`limit-req` (APISIX priority 1001, access): a leaky bucket of `rate` requests per second
per key, exactly as APISIX's `resty.limit.req`. Each request adds one to the key's excess,
which drains at `rate` per second: an excess of 0 passes at once; up to `burst` the request
waits `excess / rate` seconds (none with `nodelay`) and passes; above `burst` it is refused
with `rejected_code` (503; body `{"error_msg": rejected_msg}` when set) and not counted. No
response headers.

- `policy: local` keeps the buckets in this worker's memory (APISIX shares them between the
  nginx workers of a node; here each worker process has its own, so N workers admit up to N
  times the rate: use `redis` for an exact limit). Buckets outlive configuration versions
  that leave the plugin's configuration unchanged.
- `policy: redis` / `redis-cluster` keeps them in the key-value store (`env.kv`, the worker's
  shared client; the `redis_*` fields are accepted, see `_limit.py`), read and updated by one
  atomic script on the store's clock (APISIX's reads then writes, which races between nodes),
  with an expiry once the bucket has drained. A store error or a store slower than
  `redis_timeout` ms answers 500 `{"error_msg": "failed to limit req"}` (APISIX: no body)
  unless `allow_degradation` (then the request passes).
- The key: as limit-count (`key_type` `var` or `var_combination`; nothing resolved → the
  client address), prefixed with the configuration's hash and the route id, so a changed
  configuration starts with empty buckets.
- The delay applied is kept in `ctx.vars["limit_req_delay"]` (seconds), for the log. Tests
  replace the module's `clock` (of the local buckets) and `sleep` (the delay).

Not implemented: `rules` and `$var` rates (newer APISIX).
"""

from __future__ import annotations

import logging
import math
import time
from asyncio import sleep
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gateways.edge.model.plugins import limit_req as declared
from gateways.edge.plugin import Plugin, PluginEnv, Reply, RequestContext, parse_conf
from gateways.edge.plugins._limit import (
    STORE_ERRORS,
    Script,
    conf_digest,
    key_getter,
    rejected_body,
)

log = logging.getLogger(__name__)

# KEYS[1]: the bucket (a hash: excess in milli-requests, last update in ms of the store's
# clock). ARGV: rate (milli-requests per second), burst (milli-requests), expiry (ms).
# Returns {admitted (0/1), excess}; a refused request leaves the bucket as it was.
SCRIPT = Script("""
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
local excess = 0
local bucket = redis.call('HMGET', KEYS[1], 'excess', 'last')
if bucket[1] and bucket[2] then
  local elapsed = math.abs(now - tonumber(bucket[2]))
  excess = math.max(tonumber(bucket[1]) - rate * elapsed / 1000 + 1000, 0)
  if excess > burst then
    return {0, tostring(excess)}
  end
end
redis.call('HSET', KEYS[1], 'excess', tostring(excess), 'last', tostring(now))
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return {1, tostring(excess)}
""")
LOCAL_PRUNE_AT = 100_000  # buckets kept locally before the drained ones are swept
MAX_EXPIRY_MS = 366 * 86400 * 1000

clock: Callable[[], float] = time.monotonic  # the local buckets' clock (tests replace it)

# This worker's buckets (policy local): key → [excess (requests), last update, drained at]
# (time.monotonic() seconds).
_buckets: dict[str, list[float]] = {}
_prune_at = LOCAL_PRUNE_AT


@dataclass(frozen=True, slots=True)
class LimitReqConf:
    rate: float  # requests per second
    burst: float
    key_type: str
    key: str
    nodelay: bool
    policy: str
    redis_timeout: int  # milliseconds
    allow_degradation: bool
    rejected_code: int
    rejected_msg: str | None = None


class LimitReq(declared.LimitReq, Plugin):
    """At most `rate` requests per second per key, leaky bucket: up to `burst` more are delayed
    to the rate, beyond that refused (local or in the key-value store)."""

    def __init__(self, conf: Any, env: PluginEnv) -> None:
        super().__init__(conf, env)
        settings = parse_conf(LimitReqConf, self.schema, conf)
        self.rate = float(settings.rate)
        self.burst = float(settings.burst)
        self.nodelay = settings.nodelay
        self.redis = settings.policy != "local"
        self.timeout = settings.redis_timeout / 1000
        self.degrade = settings.allow_degradation
        self.rejected_code = settings.rejected_code
        self.rejected_body = rejected_body(settings.rejected_msg)
        self.key_of = key_getter(settings.key_type, settings.key)
        # the counter's identity: the whole configuration as stored (not the parsed fields)
        self.prefix = f"plugin-limit-req:{conf_digest(conf)}:"
        # The store's arguments, in resty.limit.req's units; the bucket expires once drained.
        drained_ms = math.ceil((self.burst + 1) / self.rate * 1000) + 1000
        self.script_args = (self.rate * 1000, self.burst * 1000, min(drained_ms, MAX_EXPIRY_MS))

    async def access(self, ctx: RequestContext) -> Reply | None:
        key = f"{self.prefix}{ctx.route_id}:{self.key_of(ctx)}"
        if self.redis:
            try:
                admitted, excess_ms = await SCRIPT.run(
                    self.env.kv, self.timeout, (key,), *self.script_args
                )
            except STORE_ERRORS as exc:
                log.warning("failed to limit req: %r", exc, extra={"route_id": ctx.route_id})
                if self.degrade:
                    return None
                return Reply(500, {"error_msg": "failed to limit req"})
            excess = float(excess_ms) / 1000 if int(admitted) else None
        else:
            excess = self._leak_locally(key)
        if excess is None:
            return Reply(self.rejected_code, self.rejected_body)
        delay = excess / self.rate
        if delay >= 0.001 and not self.nodelay:
            ctx.vars["limit_req_delay"] = delay
            await sleep(delay)
        return None

    def _leak_locally(self, key: str) -> float | None:
        """resty.limit.req's `incoming(key, commit=true)`: the new excess, or None (refused)."""
        now = clock()
        bucket = _buckets.get(key)
        if bucket is None:
            excess = 0.0
            if len(_buckets) >= _prune_at:
                _prune(now)
        else:
            excess = max(bucket[0] - self.rate * abs(now - bucket[1]) + 1, 0.0)
            if excess > self.burst:
                return None
        # drained (as good as no bucket) once the excess and the next request have leaked
        _buckets[key] = [excess, now, now + (excess + 1) / self.rate]
        return excess


def _prune(now: float) -> None:
    """Forget the drained buckets; sweep again when the table has doubled."""
    global _buckets, _prune_at
    _buckets = {k: b for k, b in _buckets.items() if b[2] > now}
    _prune_at = max(LOCAL_PRUNE_AT, 2 * len(_buckets))
